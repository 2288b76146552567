"""Run the kvproof CLI in a child process with a time limit and an address-space limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
EXAMPLES = ROOT / "examples"

#: Address space of one kvproof process (a normal check peaks near 100 MB, a 50 MB input near 250 MB).
MEMORY_LIMIT = 1 << 30
#: Wall-clock limit of one kvproof process; a run that needs it is a hang.
TIME_LIMIT = 60.0


@attrs.frozen
class Run:
    args: tuple[str, ...]
    code: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "backslashreplace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "backslashreplace")

    def assert_handled(self, codes: tuple[int, ...] = (1, 2)) -> None:
        """Exit code in ``codes``, a diagnostic printed, and no traceback anywhere."""
        shown = f"kvproof {' '.join(self.args)} -> {self.code}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}"
        assert b"Traceback" not in self.stdout + self.stderr, shown
        assert b"internal error" not in self.stdout + self.stderr, shown
        assert self.code in codes, shown
        if self.code != 0:
            assert (self.stdout + self.stderr).strip(), f"no diagnostic printed\n{shown}"


def _limits(memory: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def kvproof(*args: str | os.PathLike, memory: int = MEMORY_LIMIT, timeout: float = TIME_LIMIT,
            stdin: bytes | None = None, env: dict[str, str] | None = None, cwd: Path = ROOT) -> Run:
    """``python -m kvproof ARGS`` under the limits; a timeout fails the calling test."""
    argv = [os.fspath(a) for a in args]
    child_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    child_env.pop("KVPROOF_DEBUG", None)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kvproof", *argv], input=stdin if stdin is not None else b"",
            capture_output=True, timeout=timeout, preexec_fn=_limits(memory), env=child_env, cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"kvproof {' '.join(argv)} did not finish within {timeout} s (a hang)") from exc
    return Run(tuple(argv), proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start)


def has_command(name: str) -> bool:
    """Whether the CLI module of a command exists yet (commands land one by one)."""
    return (ROOT / "kvproof" / "commands" / f"{name}.py").exists()


def kvproof_many(calls: dict[str, tuple], **limits) -> dict[str, Run]:
    """Several independent runs at once (one per core): the cases of a parametrized test share
    one batch, so the suite pays for processes, not for waiting on them one by one."""
    from concurrent.futures import ThreadPoolExecutor

    workers = max(2, min(8, os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(kvproof, *args, **limits) for key, args in calls.items()}
        return {key: future.result() for key, future in futures.items()}
