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


def main(argv: list[str] | None = None) -> int:
    """Entry point: click's own usage errors exit 2; no input ever produces a traceback."""
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
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("KVPROOF_DEBUG"):
            raise
        click.echo(f"kvproof: internal error: {type(exc).__name__}: {exc} (set KVPROOF_DEBUG=1 for details)", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
