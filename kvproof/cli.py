"""The ``kvproof`` command line.

Exit codes (every command): 0 accepted / ok, 1 refused, 2 bad input or usage, 3 solver
unknown or timeout, 4 internal error (a kvproof bug; set KVPROOF_DEBUG=1 for the traceback).
Commands import their machinery lazily so ``check`` and ``simulate`` never import z3 or
Hypothesis.
"""

from __future__ import annotations

import os
import sys

import click

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_INTERNAL = 0, 1, 2, 3, 4

FORMATS = ["text", "json", "sarif", "junit"]


class Seconds(click.ParamType):
    """A solver time limit: a positive, finite number of seconds (``nan``, ``inf`` and ``0`` are
    usage errors, not a solver call that can never time out or never start)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0 or seconds > 10**9:
            self.fail(f"{value!r} is not a positive, finite number of seconds", param, ctx)
        return seconds


SECONDS = Seconds()


def _examples_problems(examples: str) -> list[str]:
    """``prove --examples DIR``: each ``DIR/*/*.json`` template loads strictly, read as ``check``
    reads documents (the prover's own reader skips bad files and would block on a FIFO)."""
    from pathlib import Path

    from .commands.check import unloadable

    root = Path(examples)
    if not root.is_dir():
        return [f"{examples}: LD001 $: --examples: not a directory"]
    files = sorted(p for directory in root.iterdir() if directory.is_dir() for p in directory.glob("*.json"))
    return [d.render() for d in unloadable(files)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvproof")
def cli() -> None:
    """Prove or refute the KV-cache allocation rules of vLLM 0.33.0."""


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write the report to a file.")
@click.option("--probe", multiple=True, type=click.Path(),
              help="Records of the accepted probe; each phase checked is compared with them.")
def check(paths: tuple[str, ...], fmt: str, output: str | None, probe: tuple[str, ...]) -> None:
    """Check runtime records and FPM profiles (files or directories of *.json).

    The records of one directory are checked together as one record set. Prints one
    `FILE: ID $.path: message` line per refusal; exit 0 accepted, 1 refused, 2 bad input.
    """
    from .commands.check import run

    sys.exit(run(paths, fmt, output, probe))


@cli.command()
@click.argument("geometry", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def simulate(geometry: str, fmt: str) -> None:
    """Plan a geometry as vLLM 0.33.0 does at start-up (groups, pool, concurrency, block sizes)."""
    from .commands.simulate import run

    sys.exit(run(geometry, fmt))


@cli.command()
@click.argument("geometry", type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False), help="Directory for the records.")
def synth(geometry: str, output: str) -> None:
    """Write the worker and scheduler records vLLM 0.33.0 would write for a geometry."""
    from .commands.synth import run

    sys.exit(run(geometry, output))


@cli.command(name="rules")
@click.argument("ids", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_command(ids: tuple[str, ...], fmt: str) -> None:
    """List every rule: ID, family, message, vLLM 0.33.0 source and expectation."""
    from .commands.rules import run

    sys.exit(run(ids, fmt))


@cli.command()
@click.argument("kind", type=click.Choice(["record", "profile", "geometry"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of a document kind."""
    from .commands.schema import run

    sys.exit(run(kind))


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--campaign", type=click.Choice(["mutation", "parity", "ablation", "all"]), default="all",
              show_default=True)
@click.option("--examples", type=click.IntRange(min=0), default=50, show_default=True,
              help="Random edits per document, parity inputs and random geometries.")
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed gives the same report.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--out", default="kvproof-fuzz", show_default=True, type=click.Path(file_okay=False),
              help="Directory for the documents that reproduce failures.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Processes for the mutants.")
@click.option("--strict", is_flag=True, help="Known gaps and known parity differences fail too.")
@click.option("--fixtures", type=click.Path(file_okay=False), help="Rule fixtures for ablation (default tests/rules).")
@click.option("--geometries", type=click.IntRange(min=0), default=None,
              help="Random geometries synthesized into records that must be accepted [default: --examples].")
@click.option("--exhaustive", is_flag=True, help="Edit every element of every list and mapping (slow).")
def fuzz(paths: tuple[str, ...], campaign: str, examples: int, seed: int, fmt: str, out: str, jobs: int, strict: bool,
         fixtures: str | None, geometries: int | None, exhaustive: bool) -> None:
    """Fuzz the rules: single-field mutations of valid records and profiles (PATHs; default the
    bundled examples), concrete/z3 parity, and rule ablation. Exit 0 ok, 1 failures (each written
    to --out with the `kvproof check` command that reproduces it), 2 bad input."""
    from .commands.fuzz import run

    sys.exit(run(paths, campaign, examples, seed, fmt, out, jobs, strict, fixtures, geometries, exhaustive))


@cli.command()
@click.argument("rule_ids", nargs=-1)
@click.option("--all", "all_rules", is_flag=True, help="Every rule of the registry.")
@click.option("--max-shape", help="Shape bound [default: groups=2,layers=2,workers=1,mutations=60].")
@click.option("--timeout", type=SECONDS, default=60.0, show_default=True,
              help="Wall-clock safety net per solver call (the budget that decides is --rlimit).")
@click.option("--rlimit", type=click.IntRange(min=1), default=None,
              help="Deterministic z3 resource limit per solver call [default: 5000000].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--witness-dir", type=click.Path(file_okay=False), help="Write every witness here (RULE.json or RULE/).")
@click.option("--redundant", is_flag=True, help="Report the rules the other rules imply instead.")
@click.option("--examples", type=click.Path(file_okay=False), help="Example documents the shapes come from.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Processes [default: KVPROOF_JOBS or 1].")
def prove(rule_ids: tuple[str, ...], all_rules: bool, max_shape: str | None, timeout: float, rlimit: int | None,
          fmt: str, witness_dir: str | None, redundant: bool, examples: str | None, jobs: int | None) -> None:
    """Prove each rule reachable (a witness the checker refuses with it first) or dead within the
    shape bound (an unsat core of rule IDs and axioms), against its declared expectation.
    Exit 0 as expected, 1 a contrary result, 2 usage, 3 unknown (timeout or resource limit)."""
    if examples is not None:
        problems = _examples_problems(examples)
        if problems:
            click.echo("\n".join(problems))
            sys.exit(EXIT_BAD_INPUT)
    from .commands.prove import run

    sys.exit(run(rule_ids, all_rules, max_shape, timeout, fmt, witness_dir, redundant, rlimit, examples, jobs))


@cli.command()
@click.argument("expression", required=False)
@click.option("--kind", type=click.Choice(["profile", "worker", "scheduler", "bundle"]), default=None,
              help="Document kind the expression is about (default: the claim's or profile).")
@click.option("--claims", "claims_file", type=click.Path(dir_okay=False), help="A Python file of @claim functions.")
@click.option("--all", "all_claims", is_flag=True, help="Every shipped claim.")
@click.option("--max-shape", help="Shape bound, e.g. groups=2,layers=2.")
@click.option("--timeout", type=SECONDS, default=10.0, show_default=True, help="Seconds per solver call.")
@click.option("--rlimit", type=click.IntRange(min=1), default=None,
              help="Deterministic z3 resource limit per solver call [default: 40000000].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--counterexample-dir", type=click.Path(file_okay=False), help="Write counterexamples here.")
def claim(expression: str | None, kind: str | None, claims_file: str | None, all_claims: bool, max_shape: str | None,
          timeout: float, rlimit: int | None, fmt: str, counterexample_dir: str | None) -> None:
    """Prove an invariant over documents every rule accepts, or print a counterexample document.

    EXPRESSION is Python over `doc` (the symbolic document) with the kvproof.logic helpers and
    `sim`, e.g. "All(Implies(g.kind == 'state', g.page_size_bytes > 0) for g in
    doc.resources.cache_groups)". Exit 0 as expected (an expression: it holds), 1 refuted or contrary
    to a claim's declared expectation, 2 usage, 3 unknown.

    EXPRESSION and --claims FILE are Python code, run with your privileges like `python -c`: pass
    only code you wrote or trust. (Documents never run as code; see docs/formats.md.)"""
    if claims_file is not None and not os.path.isfile(claims_file):  # a FIFO or a device would block the import
        click.echo(f"kvproof claim: --claims {claims_file}: not a regular file", err=True)
        sys.exit(EXIT_BAD_INPUT)
    from .commands.claim import run

    sys.exit(run(expression, kind, claims_file, all_claims, max_shape, timeout, fmt, counterexample_dir, rlimit))


@cli.command()
@click.argument("template", type=click.Path(dir_okay=False))
@click.option("--minimize", "minimize", help="Expression to minimize.")
@click.option("--maximize", "maximize", help="Expression to maximize.")
@click.option("--open", "open_fields", multiple=True, help="JSON path of a field the optimizer may change (repeatable).")
@click.option("--timeout", type=SECONDS, default=30.0, show_default=True, help="Seconds for the optimizer.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the optimal document here.")
def explore(template: str, minimize: str | None, maximize: str | None, open_fields: tuple[str, ...], timeout: float,
            fmt: str, output: str | None) -> None:
    """Optimize an expression over the open fields of a document template with z3 (every rule
    must accept the result). The expression is a formula over `doc` with the kvproof.logic helpers,
    checked by a restricted parser (no names or attributes starting with `_`, calls of helpers
    only). Exit 0 optimum found, 1 no accepted document, 2 usage or bad input, 3 unknown."""
    from .commands.explore import run

    sys.exit(run(template, minimize, maximize, open_fields, timeout, fmt, output))


def main(argv: list[str] | None = None) -> int:
    """Entry point: click's own usage errors exit 2; no input ever produces a traceback."""
    _tolerant_streams()
    code = _dispatch(argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`kvproof check ... | head`): keep the verdict
        _silence_stdout()
    return code


def _dispatch(argv: list[str] | None) -> int:
    try:
        cli.main(args=argv, prog_name="kvproof", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return EXIT_BAD_INPUT
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except MemoryError:
        click.echo("kvproof: out of memory: the input is too large to check", err=True)
        return EXIT_BAD_INPUT
    except RecursionError:  # an expression or document nested past the interpreter's limit
        if os.environ.get("KVPROOF_DEBUG"):
            raise
        click.echo("kvproof: the input is nested too deeply (set KVPROOF_DEBUG=1 for details)", err=True)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a file or directory the command cannot read or write (an --output, a --witness-dir)
        if os.environ.get("KVPROOF_DEBUG"):
            raise
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        click.echo(f"kvproof: cannot read or write{where}: {exc.strerror or exc}", err=True)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("KVPROOF_DEBUG"):
            raise
        click.echo(f"kvproof: internal error: {type(exc).__name__}: {exc} (set KVPROOF_DEBUG=1 for details)", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


def _tolerant_streams() -> None:
    """Text from the input (layer names, keys, file names that are not UTF-8) may hold characters
    the terminal's encoding cannot show, or lone surrogates: print them escaped, never raise."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot be reconfigured: leave it
                pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
