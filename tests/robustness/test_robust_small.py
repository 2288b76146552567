"""Issue #13 item 10: a FIFO whose writer never writes, Ctrl-C, a symbolic link loop, a closed
stdout pipe and ``--probe`` naming the checked folder (each in a real process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kvproof

ROOT = Path(__file__).resolve().parents[2]
CODE = Path(kvproof.__file__).resolve().parents[1]  # the checkout under test (the children run it too)
EXAMPLES = ROOT / "examples"
GEOMETRY = EXAMPLES / "geometries" / "plain-32-full-attention.json"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(CODE), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("KVPROOF_DEBUG", None)
    return env


def _sigint_default() -> None:
    """In the child: Ctrl-C does what it does at a terminal, also when this suite runs in the
    background (a shell's ``&`` starts it with SIGINT ignored, and children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvproof", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=CODE, env=_env())


@pytest.fixture
def silent_fifo(tmp_path):
    """A FIFO with a writer attached that never writes (O_RDWR holds a writer end open)."""
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    writer = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    yield path
    os.close(writer)


def _fifo_calls(fifo: Path, tmp_path: Path) -> dict[str, tuple]:
    examples = tmp_path / "examples"
    (examples / "set").mkdir(parents=True)
    os.symlink(fifo, examples / "set" / "profile.json")
    return {
        "check": ("check", fifo),
        "check --probe": ("check", EXAMPLES / "gemma-like-swa", "--probe", fifo),
        "simulate": ("simulate", fifo),
        "synth": ("synth", fifo, "-o", tmp_path / "out"),
        "prove --examples": ("prove", "PF010", "--examples", examples),
    }


def test_a_fifo_whose_writer_never_writes_does_not_hang(silent_fifo, tmp_path) -> None:
    # the readers wait side by side (each gives up after its 5 s of silence), not one after another
    start = time.perf_counter()
    children = {name: subprocess.Popen([sys.executable, "-m", "kvproof", *map(str, args)], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, cwd=CODE, env=_env())
                for name, args in _fifo_calls(silent_fifo, tmp_path).items()}
    try:
        for name, child in children.items():
            try:
                out, err = child.communicate(timeout=max(1.0, 30 - (time.perf_counter() - start)))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{name} hangs on a FIFO whose writer never writes")
            assert time.perf_counter() - start < 20, name
            assert child.returncode == 2, (name, out, err)
            assert "LD001 $: cannot read file: a pipe or device that sent no data for 5 s" in out + err, name
            assert "Traceback" not in err
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs /proc to read the child's CPU time")
def test_ctrl_c_inside_a_solver_call_exits_130_at_once() -> None:
    """z3 used to swallow SIGINT: the call returned unknown and prove went on to exit 0."""
    child = subprocess.Popen([sys.executable, "-m", "kvproof", "prove", "VC007", "SC011"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=CODE, env=_env(), preexec_fn=_sigint_default)
    # start-up and the worker kind's pins take ~1.5 s of CPU; then VC007 asks the solver for ~5 s
    # (510 shapes) and SC011 for ~2 s more: the signal lands inside that search, however busy the
    # machine (its CPU seconds, not the wall clock)
    deadline = time.monotonic() + 120
    while child.poll() is None and _cpu_of(child.pid) < 3.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, "prove finished before the signal: the test needs longer solver calls"
    before = _children_cpu()
    at_signal = _cpu_of(child.pid)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 130, (out, err)
    # "at once" in the child's own CPU seconds, which a busy machine does not stretch the way it
    # stretches wall time: finishing the search would take several seconds more
    assert _children_cpu() - before - at_signal < 2.0, err
    assert b"kvproof: interrupted" in err and b"Traceback" not in err, err


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_ctrl_c_while_checking_exits_130(tmp_path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # check waits on it: a moment to interrupt
    try:
        child = subprocess.Popen([sys.executable, "-m", "kvproof", "check", str(fifo)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=CODE, env=_env(), preexec_fn=_sigint_default)
        time.sleep(2)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        os.close(writer)
    assert child.returncode == 130, (out, err)
    assert b"Traceback" not in err


def test_a_symbolic_link_loop_is_named(tmp_path) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    run = _run("check", tmp_path / "a.json", tmp_path / "dangling.json")
    assert run.returncode == 2
    assert f"{tmp_path / 'a.json'}: LD001 $: a symbolic link loop (too many levels of symbolic links)" in run.stdout
    assert f"{tmp_path / 'dangling.json'}: LD001 $: a symbolic link to {tmp_path / 'nowhere.json'}, which does not exist" in run.stdout
    run = _run("simulate", tmp_path / "a.json")
    assert run.returncode == 2
    assert "LD001 $: cannot read file: a symbolic link loop" in run.stdout  # with the report (docs/cli.md)


@pytest.mark.parametrize("args, code", [
    (("rules",), 0),
    (("rules", "--format", "json"), 0),
    (("schema", "geometry"), 0),
    (("check", EXAMPLES / "glm53flash-tp4"), 0),
    (("simulate", GEOMETRY), 0),
])
def test_a_closed_pipe_keeps_the_exit_code(args, code) -> None:
    """`kvproof rules | head -1` exited 1 (click's own broken-pipe exit)."""
    child = subprocess.Popen([sys.executable, "-m", "kvproof", *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=CODE, env=_env())
    child.stdout.close()  # the reader goes away before kvproof writes its first line
    err = child.stderr.read()
    assert child.wait(timeout=60) == code, err
    assert b"Traceback" not in err and b"Exception ignored" not in err


def test_probe_naming_the_checked_folder_is_a_usage_error() -> None:
    """It used to check nothing: every checked file was dropped as a probe file."""
    folder = EXAMPLES / "glm53flash-tp4"
    run = _run("check", folder, "--probe", folder)
    assert run.returncode == 2
    assert (f"{folder / 'profile.json'}: LD001 $: named both as a document to check and by --probe; the probe's "
            "records are the reference a phase is compared with") in run.stdout
    run = _run("check", folder, "--probe", folder / "worker-dp0-tp0-pp0.json")
    assert run.returncode == 2 and "named both as a document to check and by --probe" in run.stdout
