"""Every ``kvproof claim``/``kvproof explore`` command shown in ``--help`` and in docs/solver.md
runs, from the repository root, with the exit code it is shown with (0 unless a trailing
``# exit N`` says otherwise). The commands are read from the help and the doc, so a new example is
tested without editing this file."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from kvproof.cli import main

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"^\s*(kvproof (?:claim|explore)\b.*)$")


def _help(command: str) -> str:
    from click.testing import CliRunner

    from kvproof.cli import cli

    return CliRunner().invoke(cli, [command, "--help"], terminal_width=10_000).output


def _fenced(text: str) -> str:
    return "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M))


def examples() -> list[tuple[str, int]]:
    """(command line, expected exit code), each once, in order of first appearance."""
    sources = [_help("claim"), _help("explore"), _fenced((ROOT / "docs" / "solver.md").read_text(encoding="utf-8"))]
    found: dict[str, int] = {}
    for text in sources:
        for line in text.splitlines():
            match = COMMAND.match(line)
            if not match:
                continue
            words = shlex.split(match.group(1), comments=True)
            expected = re.search(r"#\s*exit\s+(\d+)\s*$", match.group(1))
            found.setdefault(shlex.join(words), int(expected.group(1)) if expected else 0)
    return list(found.items())


def test_the_examples_are_found() -> None:
    commands = [command for command, _code in examples()]
    assert "kvproof claim --all" in commands
    assert any(c.startswith("kvproof explore") for c in commands) and any("--help" not in c for c in commands)
    assert len(commands) >= 8, commands


@pytest.mark.parametrize("command, expected", examples(), ids=lambda value: str(value)[:60])
def test_every_example_runs(command, expected, monkeypatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    code = main(shlex.split(command)[1:])
    out, err = capsys.readouterr()
    assert code == expected, f"{command}: exit {code}\n{out[-2000:]}\n{err[-2000:]}"
    assert "Traceback" not in err
