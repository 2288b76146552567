"""The one seam campaigns run their independent units through (issue #19, docs/scale.md).

A campaign (the rules of ``prove``, the mutant batches of ``fuzz``, the geometries of
``scripts/conformance-campaign.py``) is a list of units: a top-level function and plain, picklable
arguments, whose result depends on nothing else (no state of the submitting process). They run on
a :class:`concurrent.futures.Executor` from :func:`executor_for`:

* ``local`` (the default), one job: in this process, one unit at a time, as results are asked for;
* ``local``, ``jobs`` > 1: a process pool (forked where the platform forks, so the workers start
  from what this process built: see :func:`seed_state`);
* any other address (``tcp://host:8786``): a Dask distributed cluster, the ``cluster`` extra
  (``pip install 'kvproof[cluster]'``), through ``Client.get_executor``.

:func:`results_in_order` hands the results back by unit index, never by completion order, so a
report is the same bytes whichever executor ran it. A unit sent to a cluster first checks that its
worker runs the same kvproof and solver as this process (:func:`fingerprint`), and holds a process
lock while it runs: kvproof's units are not thread-safe (z3 sessions, fuzz's read tracing), so a
worker started with several threads stays correct, only not parallel.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import multiprocessing
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .diagnostics import KvproofError

__all__ = ["LOCAL", "ExecutorError", "executor_for", "is_local", "results_in_order", "ProcessState", "PROCESS_STATE", "process_state",
           "seed_state", "seeded", "fingerprint", "folder_digest"]

LOCAL = "local"
#: How long connecting to a scheduler may take before ``--executor ADDRESS`` is refused.
CONNECT_TIMEOUT_S = 20
#: How long closing the client may take after Ctrl-C (the command exits 130 right after).
CLOSE_TIMEOUT_S = 2


class ExecutorError(KvproofError, RuntimeError):
    """The campaign cannot run on the executor asked for (no cluster extra, no scheduler at the
    address, a worker with other code): the commands print it and exit 2."""


def is_local(address: str | None) -> bool:
    return address in (None, "", LOCAL)


class InProcess(Executor):
    """``local`` with one job: every unit runs here (:func:`results_in_order` runs them one at a
    time, as asked for, so a report streams as before)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def executor_for(address: str | None = LOCAL, jobs: int = 1) -> Iterator[Executor]:
    """The executor of ``--executor ADDRESS`` (``jobs`` is the local pool's size; a cluster's
    workers are its own). Leaving the block normally waits for the units; leaving it by an
    exception (Ctrl-C, a broken pipe) drops the queued units and ends the local workers at once."""
    if is_local(address):
        if jobs <= 1:
            yield InProcess()
            return
        context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_ignore_sigint)
        try:
            yield pool
        except BaseException:
            _stop(pool)
            raise
        pool.shutdown(wait=True)
        return
    client = _connect(address)
    executor = client.get_executor(pure=False)  # pure=False: no hashing of the arguments into keys
    executor.kvproof_address = address
    try:
        yield executor
    except BaseException:
        with contextlib.suppress(Exception):
            executor.shutdown(wait=False)  # cancels what is queued; a running unit ends on its worker
            client.close(timeout=CLOSE_TIMEOUT_S)
        raise
    executor.shutdown(wait=True)
    client.close()


def _connect(address: str):
    try:
        import distributed
    except ImportError:
        raise ExecutorError(f"--executor {address}: the cluster engine is not installed "
                            "(pip install 'kvproof[cluster]'); --executor local runs the local pool") from None
    from distributed.comm import get_address_host_port

    try:  # before a Client exists: one made from a bad address hangs the interpreter's exit in its __del__
        get_address_host_port(address)
    except ValueError as exc:
        raise ExecutorError(f"--executor {address}: not a scheduler address ({exc}); expected local or "
                            "SCHEME://HOST:PORT, e.g. tcp://host:8786") from None
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise ExecutorError(f"--executor {address}: no Dask scheduler answered there ({exc})") from None


def _ignore_sigint() -> None:
    """In a local worker: Ctrl-C is the parent's to handle. It ends the workers itself (a worker
    that raised KeyboardInterrupt would only hand it back as a result and take the next unit)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool now: drop the queued units and terminate the workers this run started (by
    their process ids; a worker inside a z3 call would otherwise finish it first)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=1)


def results_in_order(executor: Executor, fn: Callable, units: Sequence[tuple],
                     first: Sequence[int] | None = None) -> Iterator[Any]:
    """``fn(*unit)`` of every unit, yielded in unit order. ``first``: the order to submit them in
    (the long poles first); it never changes the order of the results."""
    if isinstance(executor, InProcess):
        for unit in units:
            yield fn(*unit)
        return
    order = list(first) if first is not None else list(range(len(units)))
    if sorted(order) != list(range(len(units))):
        raise ValueError("first must order every unit exactly once")
    address = getattr(executor, "kvproof_address", None)
    if address is not None:  # a cluster: the unit checks its worker first
        expected = fingerprint()
        futures = {i: executor.submit(run_checked, expected, address, fn, units[i]) for i in order}
    else:
        futures = {i: executor.submit(fn, *units[i]) for i in order}
    for index in range(len(units)):
        yield futures.pop(index).result()


# -- on a worker ---------------------------------------------------------------------------------

_UNIT_LOCK = threading.Lock()


def run_checked(expected: str, address: str, fn: Callable, unit: tuple) -> Any:
    """A unit on a cluster worker: refuse a worker whose kvproof differs (its results could), and
    run one unit at a time per process."""
    with _UNIT_LOCK:
        mine = fingerprint()
        if mine != expected:
            import socket

            raise ExecutorError(f"--executor {address}: the worker on {socket.gethostname()} runs other code "
                                f"(fingerprint {mine[:12]}, this process {expected[:12]}): install the same "
                                "kvproof and the same z3 on every worker (docs/scale.md)")
        return fn(*unit)


STATE_ENTRIES = 16


class ProcessState:
    """What the units of a process built and keep for the next ones (a prover and its z3
    sessions, loaded record sets), by key, most recently used last. Bounded: a long-lived worker
    serves many campaigns. One per process (:data:`PROCESS_STATE`): the local pool's workers
    inherit it when they fork, a cluster's workers each hold their own."""

    def __init__(self, entries: int = STATE_ENTRIES):
        self.entries = entries
        self._values: collections.OrderedDict = collections.OrderedDict()

    def __contains__(self, key: Any) -> bool:
        return key in self._values

    def keys(self) -> list:
        return list(self._values)

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        value = build()
        self.seed(key, value)
        return value

    def seed(self, key: Any, value: Any) -> None:
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.entries:
            self._values.popitem(last=False)

    def drop(self, key: Any) -> None:
        self._values.pop(key, None)


#: This process's state (module-level because a unit runs as a plain function in whatever
#: process the executor picked: the state is the process's, not a campaign's).
PROCESS_STATE = ProcessState()


def process_state(key: Any, build: Callable[[], Any]) -> Any:
    """This process's value for ``key``, built by ``build()`` the first time. A unit's result
    must not depend on whether the value was built here or inherited (:func:`seed_state`)."""
    return PROCESS_STATE.get(key, build)


def seed_state(key: Any, value: Any) -> None:
    """Give ``key`` this value (before the local pool forks, its workers inherit it instead of
    building their own)."""
    PROCESS_STATE.seed(key, value)


@contextlib.contextmanager
def seeded(key: Any, value: Any) -> Iterator[None]:
    """:func:`seed_state` for the length of a campaign (the parent's prover, its pins closed and
    its shapes built; the record sets it loaded), dropped after it: this process keeps nothing."""
    seed_state(key, value)
    try:
        yield
    finally:
        PROCESS_STATE.drop(key)


def folder_digest(root: Path, pattern: str = "*") -> str:
    """SHA-256 of the files under ``root`` matching ``pattern``: relative names and bytes."""
    digest = hashlib.sha256()
    if root.is_dir():
        for path in sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint() -> str:
    """What a unit's result depends on besides its arguments: kvproof's code and package data, and
    the versions of Python and of the libraries that decide (z3, attrs, cattrs, Hypothesis)."""
    return process_state("kvproof.executor.fingerprint", _fingerprint)


def _fingerprint() -> str:
    import platform
    from importlib import metadata

    versions = [platform.python_implementation(), ".".join(platform.python_version_tuple()[:2])]
    for name in ("z3-solver", "attrs", "cattrs", "hypothesis"):
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=absent")
    digest = hashlib.sha256("\n".join(versions).encode("utf-8"))
    package = Path(__file__).resolve().parent
    for pattern in ("*.py", "*.json"):  # what a wheel installs: the code and the package data
        digest.update(folder_digest(package, pattern).encode("ascii"))
    return digest.hexdigest()
