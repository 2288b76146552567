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
def fuzz(paths: tuple[str, ...], campaign: str, examples: int, seed: int, fmt: str, out: str, jobs: int, strict: bool,
         fixtures: str | None) -> None:
    """Fuzz the rules: single-field mutations of valid records and profiles (PATHs; default the
    bundled examples), concrete/z3 parity, and rule ablation. Exit 0 ok, 1 failures (each written
    to --out with the `kvproof check` command that reproduces it), 2 bad input."""
    from .commands.fuzz import run

    sys.exit(run(paths, campaign, examples, seed, fmt, out, jobs, strict, fixtures))


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
