"""The ``kvproof`` command line.

Exit codes (every command): 0 accepted / ok, 1 refused, 2 bad input or usage, 3 solver
unknown or timeout, 4 internal error (a kvproof bug; set KVPROOF_DEBUG=1 for the traceback);
130 interrupted (Ctrl-C, SIGINT), at once, also inside a solver call.
Commands import their machinery lazily so ``check`` and ``simulate`` never import z3 or
Hypothesis.
"""

from __future__ import annotations

import _thread
import functools
import gc
import os
import sys
import threading

import click
from click.core import ParameterSource

from . import terminal
from .output import OutputError

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's code for a command stopped by Ctrl-C

FORMATS = ["text", "json", "sarif", "junit", "github"]

#: The solver budget every solver command (prove, claim, explore) shares (docs/cli.md): the
#: wall-clock safety net per solver call, and the deterministic z3 resource limit that decides
#: (kvproof.solver.calls.Config.rlimit; tests/test_flags.py holds the two equal).
TIMEOUT = 120.0
RLIMIT = 5_000_000


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


def _solver_process() -> None:
    """The set-up of a command that runs z3: Ctrl-C stops it at once (:func:`_solver_interrupts`),
    and the process is tuned for the solver (:func:`kvproof.solver.native.tune_process`)."""
    from .solver.native import tune_process

    _solver_interrupts()
    tune_process()


def _solver_interrupts() -> None:
    """Make Ctrl-C stop a command that runs z3 at once, with exit 130.

    z3 catches SIGINT itself during a solver call (its ``ctrl_c`` parameter): the call returns
    unknown and Python never sees the signal, so ``prove`` went on and exited 0. With ``ctrl_c``
    off the signal reaches Python's handler, which writes it to a wakeup pipe at once; a thread
    reading that pipe interrupts the running z3 call (``Context.interrupt`` is thread-safe), and
    the ``KeyboardInterrupt`` Python raises when the call returns ends the command. An interrupt
    can also land in z3 outside a check (``push canceled``) or in a destructor, where Python only
    prints it: both still end the command with 130 (``_SIGINT``, ``_unraisable``)."""
    import signal

    import z3

    z3.set_param("ctrl_c", False)
    if threading.current_thread() is not threading.main_thread():
        return  # (an in-process runner on a thread: signals are not delivered there)
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:
        return

    def watch() -> None:
        while True:
            data = os.read(read, 64)
            if not data:
                return
            if signal.SIGINT in data:
                _SIGINT.set()
                z3.main_ctx().interrupt()
                calls = sys.modules.get("kvproof.solver.calls")
                if calls is not None:  # the prover's calls run in z3 contexts of their own
                    calls.interrupt()

    threading.Thread(target=watch, name="kvproof-sigint", daemon=True).start()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        # Python's own handler, but the flag is set before KeyboardInterrupt is raised: the
        # watcher thread may not have read the pipe yet when a z3 object whose __init__ the
        # interrupt cut short fails in its __del__ ('BoolRef' object has no attribute 'ctx')
        signal.signal(signal.SIGINT, _interrupted)
    previous = sys.unraisablehook

    def _unraisable(unraisable) -> None:
        if _is_interrupt(unraisable.exc_value):  # swallowed in a __del__: deliver it again
            _SIGINT.set()
            calls = sys.modules.get("kvproof.solver.calls")
            if calls is not None:  # the next solver call raises KeyboardInterrupt, outside any hook
                calls.interrupt()
            # and for the code between calls, the signal again, from a thread that does not make
            # this hook wait for it (raised here, or while Thread.start waits, it is swallowed too)
            _thread.start_new_thread(_deliver_sigint_soon, ())
            return
        if _SIGINT.is_set():
            return  # the interrupt's aftermath in a destructor: the command ends with 130 anyway
        previous(unraisable)

    sys.unraisablehook = _unraisable


def _interrupted(signum, frame) -> None:
    _SIGINT.set()
    raise KeyboardInterrupt


def _deliver_sigint_soon() -> None:
    import signal
    import time

    time.sleep(0.05)  # the hook that started this thread has returned by then
    signal.raise_signal(signal.SIGINT)


def _is_interrupt(exc: BaseException | None) -> bool:
    """A KeyboardInterrupt, also as ctypes wraps one raised while it converted an argument of a
    z3 call (``ArgumentError('argument 1: KeyboardInterrupt: ')`` from ``AstRef.__del__``)."""
    for _ in range(8):
        if exc is None:
            return False
        if isinstance(exc, KeyboardInterrupt):
            return True
        if type(exc).__name__ == "ArgumentError" and "KeyboardInterrupt" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


# -- the shared vocabulary of options (docs/cli.md) -------------------------------------------

def _reset_terminal(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """The group's ``--color``: every run starts from the defaults (an in-process caller runs
    several), then takes the group's colour mode; a command's own ``--color`` overrides it."""
    terminal.settings.color, terminal.settings.quiet = value or "auto", False


def _set_color(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        terminal.settings.color = value


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        terminal.settings.quiet = True


_COLOR_HELP = ("Colour the text report: auto (when stdout is a terminal and NO_COLOR is unset), always, never "
               "[default: auto]. Other formats are never coloured.")


def color_option(func):
    return click.option("--color", type=click.Choice(terminal.COLOR_MODES), default=None, expose_value=False,
                        is_eager=True, callback=_set_color, help=_COLOR_HELP)(func)


def quiet_option(func):
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_set_quiet,
                        help="Print only the verdict line of the text report (the exit code says the rest); "
                             "no progress display.")(func)


def reported(verdict=terminal.last_line, quiet: bool = True):
    """A command whose stdout is a report: coloured on a terminal, and (``quiet``) shrunk to its
    verdict line by ``--quiet`` (kvproof.terminal.report)."""
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with terminal.report(kwargs.get("fmt", "text"), verdict):
                return func(*args, **kwargs)
        params = wrapper.__dict__.setdefault("__click_params__", [])
        before = len(params)
        wrapper = color_option(wrapper)
        wrapper = quiet_option(wrapper) if quiet else wrapper
        params[:] = params[before:] + params[:before]  # listed after the command's own options
        return wrapper
    return decorate


def deprecated_alias(old: str, new: str, dest: str, **kwargs):
    """The old spelling of a renamed option: hidden, still works, and warns on stderr. Giving
    both spellings is a usage error."""
    alias = f"{dest}__{old.lstrip('-').replace('-', '_')}"

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kw):
            value = kw.pop(alias)
            if value is not None:
                ctx = click.get_current_context()
                if ctx.get_parameter_source(dest) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"give {new} or its old spelling {old}, not both", ctx)
                click.echo(f"kvproof {ctx.info_name}: {old} is deprecated; use {new}", err=True)
                kw[dest] = value
            return func(*args, **kw)
        return click.option(old, alias, hidden=True, default=None, **kwargs)(wrapper)
    return decorate


def timeout_option(what: str = "per solver call"):
    return click.option("--timeout", type=SECONDS, default=TIMEOUT, show_default=True,
                        help=f"Wall-clock safety net {what} (the budget that decides, the same on every run, "
                             "is --rlimit).")


def rlimit_option(what: str = "per solver call"):
    return click.option("--rlimit", type=click.IntRange(min=1), default=None,
                        help=f"Deterministic z3 resource limit {what} [default: {RLIMIT:,}].")


def jobs_option(what: str):
    return click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
                        envvar="KVPROOF_JOBS", show_envvar=True, help=f"Processes for {what}.")


def executor_option(what: str):
    return click.option("--executor", metavar="ADDRESS", default="local", show_default=True,
                        help=f"Where {what} run: local (the --jobs pool), or a Dask scheduler such as "
                             "tcp://host:8786 (pip install 'kvproof[cluster]'; docs/scale.md).")


def examples_option(func):
    return click.option("--examples", type=click.Path(file_okay=False),
                        help="A folder of example documents (DIR/*/*.json) the shapes come from "
                             "[default: KVPROOF_EXAMPLES, else the bundled examples].")(func)


#: Set once SIGINT arrived during a solver command: whatever the command raises then (z3's
#: ``canceled``), it ends with 130.
_SIGINT = threading.Event()


def _examples_problems(examples: str) -> list[str]:
    """``prove --examples DIR``: each ``DIR/*/*.json`` template loads strictly, read as ``check``
    reads documents (the prover's own reader skips bad files and would block on a FIFO)."""
    from pathlib import Path

    from .commands.check import unloadable
    from .diagnostics import LOAD_SYNTAX, Diagnostic

    root = Path(examples)
    if not root.is_dir():
        return [Diagnostic(LOAD_SYNTAX, "$", "--examples: not a directory", examples).render()]
    files = sorted(p for directory in root.iterdir() if directory.is_dir() for p in directory.glob("*.json"))
    return [d.render() for d in unloadable(files)]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kvproof")
@click.option("--color", type=click.Choice(terminal.COLOR_MODES), default=None, expose_value=False,
              is_eager=True, callback=_reset_terminal, help=_COLOR_HELP)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Prove or refute the KV-cache allocation rules of vLLM 0.33.0.

    Reports go to stdout, diagnostics and refusals with them; usage errors, warnings and progress
    go to stderr (docs/cli.md)."""
    if isinstance(ctx.obj, Startup):
        ctx.obj.command = ctx.invoked_subcommand
        if ctx.obj.gc_paused and ctx.invoked_subcommand != "check":
            gc.enable()  # the console script paused it for start-up only (kvproof/__main__.py)


class Startup:
    """What the process entry point (``kvproof.__main__``) and the CLI tell each other: whether
    the cyclic garbage collector was paused for start-up, and which command ran."""

    def __init__(self, gc_paused: bool = False) -> None:
        self.gc_paused = gc_paused
        self.command: str | None = None


@cli.command()
@reported()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="A file: write the report there instead of stdout.")
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
@reported(quiet=False)
@click.argument("geometry", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--tp", type=click.IntRange(min=1), default=None, help="GEOMETRY is a config.json: tensor-parallel size.")
@click.option("--pp", type=click.IntRange(min=1), default=None, help="GEOMETRY is a config.json: pipeline-parallel size.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="GEOMETRY is a config.json: a top-level geometry field (see `kvproof geometry`).")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.svg|FILE.png",
              help="Also draw the plan (and the requests over time, with a simulate block) to this picture "
                   "(needs `pip install 'kvproof[plot]'`).")
def simulate(geometry: str, fmt: str, tp: int | None, pp: int | None, settings: tuple[str, ...],
             plot: str | None) -> None:
    """Plan a geometry as vLLM 0.33.0 does at start-up (groups, pool, concurrency, block sizes).

    GEOMETRY may also be a Hugging Face config.json (or its folder): it is turned into a geometry
    first, as `kvproof geometry` does."""
    from .commands.simulate import run, run_config

    if tp is not None or pp is not None or settings:
        sys.exit(run_config(geometry, tp or 1, pp or 1, settings, fmt, plot=plot))
    sys.exit(run(geometry, fmt, plot=plot))


@cli.command(name="geometry")
@click.argument("config", type=click.Path())
@click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel size.")
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True, help="Pipeline-parallel size.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="A top-level geometry field (VALUE as JSON, else a string); repeatable.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="A file: write the geometry there instead of stdout.")
def geometry_command(config: str, tp: int, pp: int, settings: tuple[str, ...], output: str | None) -> None:
    """The geometry of a Hugging Face config.json (or a folder holding one): the KV cache spec
    each layer of vLLM 0.33.0's model reports at this TP/PP (docs/geometry-from-config.md).
    Exit 0, 2 bad input (unknown architecture, missing key, TP/PP vLLM refuses)."""
    from .commands.geometry import run

    sys.exit(run(config, tp, pp, settings, output))


@cli.command()
@reported(quiet=False)
@click.argument("geometry", type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="A folder: write the records there (made if missing).")
def synth(geometry: str, output: str) -> None:
    """Write the worker and scheduler records vLLM 0.33.0 would write for a geometry."""
    from .commands.synth import run

    sys.exit(run(geometry, output))


@cli.command(name="import")
@reported()
@click.argument("phase_dirs", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="A file: write the profile there (only when every rule accepts).")
@click.option("--verify", type=click.Path(dir_okay=False), help="Check this profile against the records instead.")
@click.option("--probe", multiple=True, type=click.Path(), help="Records of the accepted probe; each phase is compared with them.")
@click.option("--model", help="The model name, when the records name none.")
@click.option("--layout", type=click.Choice(["grouped", "mamba_align"]), default="grouped", show_default=True,
              help="mamba_align: add the storage policy and the observed mamba_cache (docs/state-storage.md).")
def import_command(phase_dirs: tuple[str, ...], output: str | None, verify: str | None, probe: tuple[str, ...],
                   model: str | None, layout: str) -> None:
    """Import the record sets of a probe's phases into an FPM profile (docs/import.md).

    Every rule runs over the phases as one record set; only when all accept is the profile
    written. Exit 0 written (or verified), 1 refused (nothing written), 2 bad input."""
    from .commands.import_ import run

    sys.exit(run(phase_dirs, output, probe, verify, model, layout))


@cli.command(name="plan")
@reported(quiet=False)
@click.argument("profile", type=click.Path(dir_okay=False))
@click.option("--tokens", type=click.IntRange(min=1), default=None, help="Request length [default: max_model_len].")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def plan_command(profile: str, tokens: int | None, fmt: str) -> None:
    """What a profile's consumer sees: one request's blocks and bytes per group, the pool and the
    start-up concurrency. Exit 0, 1 the profile is refused, 2 bad input."""
    from .commands.plan import run

    sys.exit(run(profile, tokens, fmt))


@cli.command(name="rules")
@reported(quiet=False)
@click.argument("ids", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--explain", metavar="ID", help="Print the rule's page: what it checks, why, examples, the solver's verdict.")
@click.option("--sort", type=click.Choice(["order", "id"]), default="order", show_default=True,
              help="Evaluation order (loader IDs first) or by ID.")
def rules_command(ids: tuple[str, ...], fmt: str, explain: str | None, sort: str) -> None:
    """List every rule (IDs case-insensitive): ID, family, message, why, vLLM 0.33.0 source and
    expectation; the loader's LD IDs too."""
    from .commands.rules import run

    sys.exit(run(ids, fmt, explain, sort))


@cli.command()
@click.argument("kind", type=click.Choice(["record", "profile", "geometry"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of a document kind."""
    from .commands.schema import run

    sys.exit(run(kind))


@cli.command()
@reported(verdict=terminal.line_starting("FAILED: ", "ok: "))
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--campaign", type=click.Choice(["mutation", "parity", "ablation", "all"]), default="all",
              show_default=True)
@click.option("-n", "--count", "examples", type=click.IntRange(min=0), default=50, show_default=True,
              help="Random edits per document, parity inputs and random geometries.")
@deprecated_alias("--examples", "--count", "examples", type=click.IntRange(min=0))
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed gives the same report.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True)
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="A folder: write the documents that reproduce failures there [default: a new temporary one, "
                   "made only when something fails].")
@deprecated_alias("--out", "--output", "out", type=click.Path(file_okay=False))
@jobs_option("the mutation campaign")
@executor_option("the mutation campaign's batches")
@click.option("--strict", is_flag=True, help="Known gaps and known parity differences fail too.")
@click.option("--fixtures", type=click.Path(file_okay=False), help="Rule fixtures for ablation (default tests/rules).")
@click.option("--geometries", type=click.IntRange(min=0), default=None,
              help="Random geometries synthesized into records that must be accepted [default: --count].")
@click.option("--exhaustive", is_flag=True, help="Edit every element of every list and mapping (slow).")
@click.option("--timings", is_flag=True, help="Add the campaigns' seconds and rates to the report (they differ run to run).")
def fuzz(paths: tuple[str, ...], campaign: str, examples: int, seed: int, fmt: str, out: str | None,
         jobs: int, executor: str, strict: bool, fixtures: str | None, geometries: int | None, exhaustive: bool,
         timings: bool) -> None:
    """Fuzz the rules: single-field mutations of valid records and profiles (PATHs; default the
    bundled examples), concrete/z3 parity, and rule ablation. Exit 0 ok, 1 failures (each written
    to --output with the `kvproof check` command that reproduces it), 2 bad input."""
    _solver_process()
    from .commands.fuzz import run

    sys.exit(run(paths, campaign, examples, seed, fmt, out, jobs, strict, fixtures, geometries, exhaustive,
                 executor=executor, timings=timings))


@cli.command()
@reported()
@click.argument("rule_ids", nargs=-1)
@click.option("--all", "all_rules", is_flag=True, help="Every rule of the registry.")
@click.option("--max-shape", help="Shape bound [default: groups=2,layers=2,workers=2,mutations=60].")
@timeout_option()
@rlimit_option()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True,
              help="sarif/github: contrary and unknown verdicts only (run --table and --redundant in text or json).")
@click.option("-o", "--output", "witness_dir", type=click.Path(file_okay=False),
              help="A folder: write every witness there (RULE.json or RULE/).")
@deprecated_alias("--witness-dir", "--output", "witness_dir", type=click.Path(file_okay=False))
@click.option("--redundant", is_flag=True, help="Report the rules the other rules imply instead.")
@examples_option
@jobs_option("the rules (one rule per process)")
@executor_option("the rules (one rule per unit)")
@click.option("--table", is_flag=True,
              help="Prove the state support table instead: every row reachable, rows disjoint, the table total.")
@click.option("--timings", is_flag=True, help="Add each rule's seconds to the report (they differ run to run).")
@click.option("--cache", "cache_dir", envvar="KVPROOF_PROOF_CACHE", type=click.Path(file_okay=False),
              help="A proof cache folder (or KVPROOF_PROOF_CACHE): reachable and dead verdicts, re-checked before use "
                   "(a witness replayed, a dead proof's unsat cores solved again).")
def prove(rule_ids: tuple[str, ...], all_rules: bool, max_shape: str | None, timeout: float, rlimit: int | None,
          fmt: str, witness_dir: str | None, redundant: bool, examples: str | None, jobs: int, executor: str,
          table: bool, timings: bool, cache_dir: str | None) -> None:
    """Prove each rule reachable (a witness the checker refuses with it first) or dead within the
    shape bound (an unsat core of rule IDs and axioms), against its declared expectation.
    Exit 0 as expected, 1 a contrary result, 2 usage, 3 unknown (timeout or resource limit)."""
    if fmt in ("sarif", "github") and (table or redundant):
        click.echo(f"kvproof prove: --format {fmt} reports rule verdicts; give --table or --redundant text or json", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if examples is not None:
        problems = _examples_problems(examples)
        if problems:
            click.echo("\n".join(problems))
            sys.exit(EXIT_BAD_INPUT)
    _solver_process()
    from .commands.prove import run, run_table

    if table:
        sys.exit(run_table(timeout, fmt))
    sys.exit(run(rule_ids, all_rules, max_shape, timeout, fmt, witness_dir, redundant, rlimit, examples, jobs, timings,
                 executor, cache_dir))


@cli.command()
@reported()
@click.argument("expression", required=False)
@click.option("--kind", type=click.Choice(["profile", "worker", "scheduler", "bundle"]), default=None,
              help="Document kind the expression is about (default: the claim's or profile).")
@click.option("--claims", "claims_file", type=click.Path(dir_okay=False), help="A Python file of @claim functions.")
@click.option("--all", "all_claims", is_flag=True, help="Every shipped claim.")
@click.option("--max-shape", help="Shape bound, e.g. groups=2,layers=2.")
@timeout_option()
@rlimit_option()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True)
@click.option("-o", "--output", "counterexample_dir", type=click.Path(file_okay=False),
              help="A folder: write the counterexamples there.")
@deprecated_alias("--counterexample-dir", "--output", "counterexample_dir", type=click.Path(file_okay=False))
@examples_option
@click.option("--timings", is_flag=True, help="Add each claim's seconds to the report (they differ run to run).")
def claim(expression: str | None, kind: str | None, claims_file: str | None, all_claims: bool, max_shape: str | None,
          timeout: float, rlimit: int | None, fmt: str, counterexample_dir: str | None, examples: str | None,
          timings: bool) -> None:
    """Prove an invariant over documents every rule accepts, or print a counterexample document.

    EXPRESSION is a formula over `doc` (`bundle` for --kind bundle) in kvproof's expression
    language (docs/solver.md, "Expressions"): model fields, comparisons, arithmetic,
    comprehensions over document lists, and calls of the kvproof.logic helpers (If, And, Or, Not,
    Implies, All, Any, Sum, Min, Max, ValueOf, Present, len, ...) and of the functions of demand,
    pages and concurrency. Nothing else runs; a refused or malformed expression is exit 2 with its
    line:column. Exit 0 as expected (an expression: it holds), 1 refuted or contrary to a claim's
    declared expectation, 2 usage, 3 unknown (a solver limit, or nothing checked: no shape or no
    claim).

    \b
    Examples:
      kvproof claim --all
      kvproof claim "All(Implies(g.kind == 'state', g.page_size_bytes > 0) for g in doc.resources.cache_groups)"
      kvproof claim "Implies(doc.resources.cache_layout != 'unmodeled', Sum(g.num_layers for g in doc.resources.cache_groups) >= 1)" --kind profile

    --claims FILE is Python code, imported with your privileges like `python -c`: pass only a
    file you wrote or trust. (Documents never run as code; see docs/formats.md.)"""
    if claims_file is not None and not os.path.isfile(claims_file):  # a FIFO or a device would block the import
        click.echo(f"kvproof claim: --claims {claims_file}: not a regular file", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if examples is not None:
        problems = _examples_problems(examples)
        if problems:
            click.echo("\n".join(problems))
            sys.exit(EXIT_BAD_INPUT)
    _solver_process()
    from .commands.claim import run

    sys.exit(run(expression, kind, claims_file, all_claims, max_shape, timeout, fmt, counterexample_dir, rlimit,
                 examples, timings))


@cli.command()
@reported(verdict=terminal.first_line)
@click.argument("template", type=click.Path(dir_okay=False))
@click.option("--minimize", "minimize", help="Expression to minimize.")
@click.option("--maximize", "maximize", help="Expression to maximize.")
@click.option("--open", "open_fields", multiple=True, help="JSON path of a field the optimizer may change (repeatable).")
@timeout_option("for the optimizer")
@rlimit_option("of the optimizer")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="A file: write the optimal document there instead of stdout.")
@click.option("--require", "requires", multiple=True,
              help="Geometry templates: an expression over doc and plan every candidate must meet (repeatable) "
                   "[default: plan.status == 'ok'].")
@click.option("--max-plans", type=click.IntRange(min=1), default=None,
              help="Geometry templates: most plans the search computes [default: 2000].")
def explore(template: str, minimize: str | None, maximize: str | None, open_fields: tuple[str, ...], timeout: float,
            rlimit: int | None, fmt: str, output: str | None, requires: tuple[str, ...], max_plans: int | None) -> None:
    """Optimize an expression over the open fields of a document template with z3 (every rule
    must accept the result). The expression is a formula over `doc` in kvproof's expression
    language, as for `kvproof claim` (docs/solver.md, "Expressions"); a refused or malformed one
    is exit 2 with its line:column. Exit 0 optimum found, 1 no optimum (no accepted document, or
    the objective is unbounded), 2 usage or bad input, 3 unknown (a solver limit).

    A geometry template is explored over the planner itself: --open PATH[=LO..HI[:STEP] or
    =V1,V2,...], expressions over `doc` and `plan` (its `simulate --format json`), --require
    (default: vLLM starts); exit 3 also when a property the search relied on fails its check
    (docs/solver.md, "Exploration over geometries").

    \b
    Examples:
      kvproof explore examples/minimax-m27-tp4/scheduler-dp0.json --minimize doc.cache.num_blocks --open '$.cache'
      kvproof explore examples/geometries/glm53flash-tp4.json --minimize doc.available_memory_bytes --open '$.available_memory_bytes'
      kvproof explore examples/glm53flash-tp4/profile.json --minimize "Sum(If(g.kind == 'state', 0, g.page_size_bytes) for g in doc.resources.cache_groups) + doc.resources.runtime_memory.kv_cache_bytes" --open '$.resources.runtime_memory'"""
    _solver_process()
    from .commands.explore import run

    sys.exit(run(template, minimize, maximize, open_fields, timeout, fmt, output, rlimit, requires, max_plans))


def main(argv: list[str] | None = None, startup: Startup | None = None) -> int:
    """Entry point: click's own usage errors exit 2; no input ever produces a traceback.
    ``startup``: from the process entry point (``kvproof.__main__``): when it turned the cyclic
    garbage collector off for start-up, every command but ``check`` turns it on again; the command
    that ran is recorded in it."""
    _tolerant_streams()
    stdout = sys.stdout
    sys.stdout = _PipeTolerant(stdout)
    try:
        code = _dispatch(argv, startup or Startup())
        sys.stdout.flush()
    finally:
        sys.stdout = stdout
    return code


class _PipeTolerant:
    """stdout for one command: when the reader goes away (`kvproof rules | head -1`), the rest of
    the output is dropped and the command ends with its own exit code. (click would exit 1 on
    the broken pipe, and an exception raised mid-report would lose the verdict.)"""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _silence_stdout()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _silence_stdout()
            try:
                self._stream.flush()  # what was buffered now goes to /dev/null
            except OSError:
                pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _dispatch(argv: list[str] | None, startup: Startup) -> int:
    code = _run_command(argv, startup)
    if code == EXIT_INTERRUPTED or _SIGINT.is_set():
        click.echo("kvproof: interrupted", err=True)
        return EXIT_INTERRUPTED
    return code


def _run_command(argv: list[str] | None, startup: Startup) -> int:
    try:
        cli.main(args=argv, prog_name="kvproof", standalone_mode=False, obj=startup)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            return EXIT_INTERRUPTED
        click.echo("Aborted!", err=True)
        return EXIT_BAD_INPUT
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_INTERNAL
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OutputError as exc:  # a write kvproof refuses (a link, a name outside the folder)
        click.echo(f"kvproof: cannot write: {exc}", err=True)
        return EXIT_BAD_INPUT
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
        if _SIGINT.is_set():  # the interrupt's own aftermath (z3: "push canceled")
            return EXIT_INTERRUPTED
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
