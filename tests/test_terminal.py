"""People at a terminal (docs/cli.md): colour and progress only for a person at a TTY, ``--quiet``,
thousands separators in text; machine output never changes, and a pipe never loads rich."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.commands.check import FileResult
from kvproof.report import render_github, render_text

CODE = Path(__file__).resolve().parents[1]
RULES = CODE / "tests" / "rules"
GEOMETRIES = CODE / "examples" / "geometries"
REFUSED = [str(RULES / "CK002")]  # three refused documents: rule IDs, paths, files to colour
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(CODE), **extra}
    for name in ("NO_COLOR", "KVPROOF_DEBUG", "FORCE_COLOR", "TERM"):
        if name not in extra:
            env.pop(name, None)
    env.setdefault("TERM", "xterm-256color")
    return env


def _on_a_terminal(args: list[str], stream: str = "stdout", **env: str) -> tuple[int, bytes, bytes]:
    """Run kvproof with ``stream`` (stdout or stderr) a pseudo-terminal of 120 columns: (exit code,
    what the terminal got, what the other stream's pipe got)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    child = subprocess.Popen([sys.executable, "-m", "kvproof", *args], stdin=subprocess.DEVNULL, cwd=CODE,
                             stdout=slave if stream == "stdout" else subprocess.PIPE,
                             stderr=slave if stream == "stderr" else subprocess.PIPE, env=_env(**env))
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    other = (child.stderr if stream == "stdout" else child.stdout).read()
    child.wait(timeout=300)
    os.close(master)
    return child.returncode, seen, other


def _piped(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvproof", *args], capture_output=True, cwd=CODE, env=_env(**env),
                          timeout=300)


def _plain(terminal: bytes) -> bytes:
    """What a terminal showed, without its escapes and with the line discipline's CRLF undone."""
    return ANSI.sub(b"", terminal).replace(b"\r\n", b"\n")


# -- colour ------------------------------------------------------------------------------------

def test_a_terminal_gets_the_pipes_report_in_colour() -> None:
    piped = _piped(["check", *REFUSED])
    code, shown, _ = _on_a_terminal(["check", *REFUSED])
    assert code == piped.returncode == 1
    assert b"\x1b[" not in piped.stdout  # a pipe: the plain bytes
    assert b"\x1b[1;36mRS004\x1b[0m" in shown and b"\x1b[1;31mrefused\x1b[0m" in shown  # rule IDs, the verdict
    assert _plain(shown) == piped.stdout  # colour adds escapes only


@pytest.mark.parametrize(("args", "env"), [
    (["check", *REFUSED], {"NO_COLOR": "1"}),
    (["check", "--color", "never", *REFUSED], {}),
    (["--color", "never", "check", *REFUSED], {}),
    (["check", *REFUSED], {"TERM": "dumb"}),
])
def test_no_colour_when_asked_not_to(args, env) -> None:
    code, shown, _ = _on_a_terminal(args, **env)
    assert code == 1 and b"RS004" in shown and b"\x1b[" not in shown


def test_color_always_colours_a_pipe_and_wins_over_no_color(capsys) -> None:
    plain = _piped(["check", *REFUSED])
    forced = _piped(["check", "--color", "always", *REFUSED], NO_COLOR="1")
    assert forced.returncode == plain.returncode == 1
    assert b"\x1b[1;36mRS004" in forced.stdout and ANSI.sub(b"", forced.stdout) == plain.stdout
    group = _piped(["--color", "always", "check", *REFUSED])  # the group's option too
    assert group.stdout == forced.stdout


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit", "github"])
def test_machine_formats_are_never_coloured(capsys, fmt) -> None:
    assert main(["check", "--format", fmt, *REFUSED]) == 1
    plain = capsys.readouterr()
    assert main(["check", "--color", "always", "--quiet", "--format", fmt, *REFUSED]) == 1
    assert capsys.readouterr() == plain  # byte-identical: no colour, --quiet changes nothing
    assert "\x1b" not in plain.out


def test_simulate_json_is_never_coloured(capsys) -> None:
    geometry = str(GEOMETRIES / "glm-like-packed.json")
    assert main(["simulate", geometry, "--format", "json"]) == 0
    plain = capsys.readouterr().out
    assert main(["simulate", geometry, "--format", "json", "--color", "always"]) == 0
    assert capsys.readouterr().out == plain


def test_a_pipe_never_imports_rich() -> None:
    script = ("import sys; from kvproof.cli import main; code = main(sys.argv[1:]); "
              "print('rich loaded' if 'rich' in sys.modules else 'rich not loaded', file=sys.stderr)")

    def loaded(*args: str) -> str:
        run = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=CODE,
                             env=_env(), timeout=120)
        return run.stderr.strip().splitlines()[-1]

    assert loaded("check", "examples") == "rich not loaded"
    assert loaded("check", "--quiet", "examples") == "rich not loaded"
    assert loaded("check", "--color", "always", "examples") == "rich loaded"  # the probe can tell


# -- --quiet -----------------------------------------------------------------------------------

def test_quiet_prints_only_the_verdict_line(capsys) -> None:
    assert main(["check", *REFUSED]) == 1
    full = capsys.readouterr().out.splitlines()
    assert len(full) > 1
    assert main(["check", "-q", *REFUSED]) == 1  # the exit code says the rest
    assert capsys.readouterr().out.splitlines() == full[-1:] == ["3 document(s): 0 accepted, 3 refused, 0 bad input"]


def test_quiet_fuzz_keeps_its_verdict_not_its_tables(capsys, tmp_path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "profile.json").write_text((CODE / "examples" / "minimax-m27-tp4" / "profile.json").read_text())
    args = ["fuzz", "--campaign", "mutation", "--count", "0", "-o", str(tmp_path / "out"), str(inputs)]
    assert main(args) == 0
    assert len(capsys.readouterr().out.splitlines()) > 5
    assert main([*args, "--quiet"]) == 0
    assert capsys.readouterr().out == "ok: no failure\n"


# -- progress ----------------------------------------------------------------------------------

def _profile_only(tmp_path: Path) -> Path:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "profile.json").write_text((CODE / "examples" / "minimax-m27-tp4" / "profile.json").read_text())
    return inputs


def _untimed(report: bytes) -> bytes:
    """The fuzz report without its seconds (a campaign's clock differs run to run)."""
    return re.sub(rb"\d+\.\d+ s\b", b"N s", report)


def test_fuzz_shows_progress_on_a_terminal_stderr_only(tmp_path) -> None:
    args = ["fuzz", "--campaign", "mutation", "--count", "2", "-o", str(tmp_path / "out"), str(_profile_only(tmp_path))]
    piped = _piped(args)
    code, bar, report = _on_a_terminal(args, stream="stderr")
    assert code == piped.returncode == 0
    assert b"fuzz mutation" in bar and re.search(rb"(\d+)/\1", ANSI.sub(b"", bar))  # drawn up to done/total
    assert b"fuzz mutation" not in piped.stderr  # stderr a pipe: nothing drawn
    assert _untimed(report) == _untimed(piped.stdout)  # the report does not change
    code, bar, _ = _on_a_terminal([*args, "--quiet"], stream="stderr")
    assert code == 0 and b"fuzz mutation" not in bar


def test_prove_shows_its_rules_done_on_a_terminal_stderr() -> None:
    args = ["prove", "PF001", "PF011", "--max-shape", "groups=1,layers=1,mutations=0"]
    code, bar, report = _on_a_terminal(args, stream="stderr")
    assert code == 0
    assert b"2/2" in ANSI.sub(b"", bar) and b"prove" in bar
    assert report.decode().splitlines()[-1].startswith("2 rule(s): 1 reachable, 1 dead, 0 unknown")


def test_report_lines_and_progress_share_one_terminal() -> None:
    """stdout and stderr the same terminal: every report line arrives whole, in order."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    args = ["prove", "PF001", "PF011", "--max-shape", "groups=1,layers=1,mutations=0", "--color", "never"]
    child = subprocess.Popen([sys.executable, "-m", "kvproof", *args], stdin=subprocess.DEVNULL, stdout=slave,
                             stderr=slave, cwd=CODE, env=_env())
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert child.wait(timeout=300) == 0
    os.close(master)
    lines = [line.rstrip(b"\r").split(b"\r")[-1] for line in ANSI.sub(b"", seen).split(b"\n")]
    report = [line.strip().decode() for line in lines if line.strip().startswith((b"PF0", b"2 rule"))]
    assert [line.split()[0] for line in report] == ["PF001", "PF011", "2"]


# -- numbers a person reads, and one stream for diagnostics ----------------------------------------

def test_text_reports_separate_thousands_and_json_keeps_digits(capsys) -> None:
    geometry = str(GEOMETRIES / "glm-like-packed.json")
    assert main(["simulate", geometry]) == 0
    text = capsys.readouterr().out
    assert main(["simulate", geometry, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_usable_blocks"] > 999
    assert f"({result['num_usable_blocks']:,} usable" in text
    assert f"kv_cache_size_tokens     {result['kv_cache_size_tokens']:,}" in text


def test_the_check_summary_separates_thousands_but_not_in_github() -> None:
    results = [FileResult(f"d{i}.json", "profile", "accepted") for i in range(1234)]
    assert render_text(results).endswith("1,234 document(s): 1,234 accepted, 0 refused, 0 bad input\n")
    assert render_github(results).endswith("1234 document(s): 1234 accepted, 0 refused, 0 bad input\n")


def test_loader_errors_go_to_stdout_with_the_report(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for args in (["check", str(bad)], ["simulate", str(bad)], ["plan", str(bad)], ["explore", str(bad), "--minimize", "1"]):
        assert main(args) == 2, args
        out, err = capsys.readouterr()
        assert f"{bad}: LD001 $: invalid JSON" in out and err == "", (args, out, err)
