"""Shared helpers of the bench scripts (timing, machine description). Not a benchmark itself."""

from __future__ import annotations

import datetime
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "glm53flash-tp4"

if str(ROOT) not in sys.path:  # run as `python bench/<name>.py` from a source checkout
    sys.path.insert(0, str(ROOT))


def glm_records() -> list[Path]:
    """The GLM-5.3-Flash TP4 record set: 4 workers and the scheduler (no profile)."""
    files = sorted(GLM.glob("worker-*.json")) + sorted(GLM.glob("scheduler-*.json"))
    assert len(files) == 5, files
    return files


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def machine() -> str:
    return (
        f"machine: {cores()} cores (nproc), CPU {cpu_model()!r}, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.system()} {platform.release()}, "
        f"{datetime.date.today().isoformat()}, load average {load()} (1/5/15 min)"
    )


def interleaved(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Time every case once per round, cases alternating, so that load on a shared machine hits
    all of them alike. Returns seconds per call, per case."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return samples


def interleaved_with_cpu(cases: dict[str, Callable[[], object]], rounds: int) -> tuple[dict, dict]:
    """Like :func:`interleaved`, also recording the process CPU time of every call: on a shared
    machine other processes stretch the wall clock, much less the CPU time.

    A call's result is freed after its times are read, and the garbage collector then runs outside
    the timing: freeing one case's objects is not part of the answer, and must not land in the next
    case's time (the requests oracle times vLLM's scheduling loop the same way, before its
    scheduler is freed)."""
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            result = fn()
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
            del result
            gc.collect()
    return wall, cpu


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def spread(values: list[float]) -> str:
    """Median with the interquartile range, in milliseconds."""
    q = statistics.quantiles(values, n=4)
    return f"median {median_ms(values):8.2f} ms  (IQR {q[0] * 1000:.2f}-{q[2] * 1000:.2f} ms, n={len(values)})"
