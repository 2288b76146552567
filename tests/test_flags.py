"""One vocabulary of flags across commands (docs/cli.md): ``-o/--output`` a file or a folder as each
command's --help states, ``--examples DIR`` a folder of example documents, ``-n/--count`` a count,
the same ``--timeout``/``--rlimit`` defaults, ``--jobs``/``KVPROOF_JOBS`` wherever work runs in
parallel; the old spellings still work, warn, and are hidden."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from kvproof import cli as cli_module
from kvproof.cli import RLIMIT, TIMEOUT, cli, main
from kvproof.solver.calls import Config

CODE = Path(__file__).resolve().parents[1]
EXAMPLES = CODE / "examples"


def _shown(command: str) -> list[click.Option]:
    """The options --help lists (not the hidden old spellings)."""
    return [p for p in cli.commands[command].params if isinstance(p, click.Option) and not p.hidden]


def _option(command: str, name: str) -> click.Option:
    (option,) = [p for p in _shown(command) if name in p.opts]
    return option


def _commands_with(name: str) -> list[str]:
    return sorted(c for c in cli.commands if any(name in p.opts for p in _shown(c)))


def test_the_solver_budget_is_the_same_for_every_solver_command() -> None:
    assert RLIMIT == Config().rlimit and TIMEOUT == Config().timeout  # the help's defaults are the engine's (and the proof cache keys an API run like a CLI one)
    assert _commands_with("--timeout") == _commands_with("--rlimit") == ["claim", "explore", "prove"]
    for command in ("claim", "explore", "prove"):
        assert _option(command, "--timeout").default == TIMEOUT
        assert _option(command, "--rlimit").default is None  # None: the engine's RLIMIT
        assert f"[default: {RLIMIT:,}]" in _option(command, "--rlimit").help


def test_every_output_says_file_or_folder_and_takes_that() -> None:
    commands = _commands_with("--output")
    assert {"check", "claim", "explore", "fuzz", "geometry", "import", "prove", "synth"} <= set(commands)
    for command in commands:
        option = _option(command, "--output")
        assert option.opts == ["-o", "--output"], command
        kind = option.help.split(":")[0]
        assert kind in ("A file", "A folder"), (command, option.help)
        assert (option.type.dir_okay, option.type.file_okay) == ((False, True) if kind == "A file" else (True, False))


@pytest.mark.parametrize("name", ["--examples", "--jobs", "--count", "--color", "--quiet", "--timings", "--max-shape"])
def test_a_shared_flag_means_the_same_everywhere(name) -> None:
    options = [_option(command, name) for command in _commands_with(name)]
    assert options, name
    first = options[0]
    for option in options[1:]:
        assert (option.opts, option.type.name, option.default, option.envvar, option.is_flag) == \
               (first.opts, first.type.name, first.default, first.envvar, first.is_flag), name


def test_examples_is_a_folder_and_count_a_number() -> None:
    assert _commands_with("--examples") == ["claim", "prove"]
    assert all(not _option(c, "--examples").type.file_okay for c in ("claim", "prove"))
    assert _option("fuzz", "--count").opts == ["-n", "--count"]
    assert isinstance(_option("fuzz", "--count").type, click.IntRange)


def test_jobs_on_every_command_that_runs_in_parallel() -> None:
    assert _commands_with("--jobs") == ["fuzz", "prove"]  # the two that fork processes
    assert all(_option(c, "--jobs").envvar == "KVPROOF_JOBS" for c in ("fuzz", "prove"))


@pytest.fixture
def calls(monkeypatch):
    """The arguments each command's run() got (the commands themselves are stubbed: exit 0)."""
    from kvproof.commands import claim, fuzz, prove

    seen: dict[str, tuple] = {}
    for module in (claim, fuzz, prove):
        def stub(*args, _name=module.__name__.rsplit(".", 1)[1], **kwargs):
            seen[_name] = args
            return 0
        monkeypatch.setattr(module, "run", stub)
    return seen


def test_kvproof_jobs_is_honoured_by_fuzz_and_prove(calls, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KVPROOF_JOBS", "3")
    assert main(["fuzz", "--count", "0"]) == 0 and calls["fuzz"][6] == 3
    assert main(["prove", "PF001"]) == 0 and calls["prove"][9] == 3
    assert main(["prove", "PF001", "-j", "2"]) == 0 and calls["prove"][9] == 2  # the flag wins
    monkeypatch.setenv("KVPROOF_JOBS", "0")
    assert main(["prove", "PF001"]) == 2  # a bad KVPROOF_JOBS is a usage error, not one process
    assert "KVPROOF_JOBS" in capsys.readouterr().err
    monkeypatch.delenv("KVPROOF_JOBS")
    assert main(["fuzz"]) == 0 and calls["fuzz"][6] == 1


@pytest.mark.parametrize(("command", "old", "new", "value", "index"), [
    (["fuzz"], "--examples", "--count", "7", 2),
    (["fuzz"], "--out", "--output", "DIR", 5),
    (["prove", "PF001"], "--witness-dir", "--output", "DIR", 5),
    (["claim", "--all"], "--counterexample-dir", "--output", "DIR", 7),
])
def test_an_old_spelling_works_and_warns(calls, capsys, tmp_path, command, old, new, value, index) -> None:
    value = str(tmp_path / "w") if value == "DIR" else value
    assert main([*command, new, value]) == 0
    assert capsys.readouterr().err == ""
    name = command[0]
    current = calls.pop(name)
    assert main([*command, old, value]) == 0
    assert calls[name] == current and calls[name][index] in (value, int(value) if value.isdigit() else value)
    assert capsys.readouterr().err == f"kvproof {name}: {old} is deprecated; use {new}\n"
    assert main([*command, old, value, new, value]) == 2  # both spellings: a usage error
    assert f"give {new} or its old spelling {old}, not both" in capsys.readouterr().err
    shown = cli_module.cli.commands[name].get_help(click.Context(cli_module.cli.commands[name]))
    assert not re.search(re.escape(old) + r"(?![\w-])", shown)  # hidden from --help


def test_the_examples_folder_is_checked_by_its_name(capsys, tmp_path) -> None:
    assert main(["prove", "PF001", "--examples", str(tmp_path / "missing")]) == 2
    assert f"{tmp_path / 'missing'}: LD001 $: --examples: not a directory" in capsys.readouterr().out
