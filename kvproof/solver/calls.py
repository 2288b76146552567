"""One solver call: its budget (:class:`Config`), a z3 context of its own (:class:`IsolatedSolver`),
a tracked question asked once (:func:`ask_tracked`) and stopping it from the CLI's Ctrl-C watcher
(:func:`interrupt`)."""

from __future__ import annotations

from typing import Any, Iterable

import attrs
import z3

__all__ = ["Config", "IsolatedSolver", "interrupt", "interruptible_check", "ask_tracked"]


@attrs.define
class Config:
    """The budget of one solver call. ``rlimit`` (z3 resource units, machine independent)
    decides when a call gives up; ``timeout`` (wall-clock seconds) is only a safety net, far
    above what the resource limit takes even on a loaded machine (a call that reaches it gives
    ``unknown``, never a verdict, but then a run can differ from the next). Every decided call
    of ``prove --all`` takes under 0.5 M units; 5 M take about 3-7 s on a loaded 2-core machine."""

    timeout: float = 120.0  # wall-clock safety net per solver call (seconds; the CLI's --timeout default)
    rlimit: int = 5_000_000  # deterministic resource limit per solver call
    relax_rounds: int = 12
    seed: int = 0


class _Running:
    """The z3 context of the solver call running now. Process state by nature: a signal reaches
    the process, not a session, and a process runs one solver call at a time."""

    context: Any = None
    #: Set by the first interrupt and kept: a signal that lands between two calls (or whose
    #: KeyboardInterrupt Python swallowed in a destructor) must stop the next call too, not let
    #: it run its tens of seconds.
    interrupted: bool = False


def interrupt() -> None:
    """Stop the running solver call at once (thread-safe: ``Context.interrupt``), and every
    later one before it starts. The CLI's SIGINT watcher calls it; the call raises
    ``KeyboardInterrupt``, which ends the command."""
    _Running.interrupted = True
    ctx = _Running.context
    if ctx is not None:
        ctx.interrupt()


class IsolatedSolver:
    """A z3 solver in a z3 context of its own; terms of the main context are translated on the
    way in, models on the way out.

    z3's search depends on the identities of its terms (their ids, the addresses they live at),
    and in the main context those depend on every term the process made before: the same
    question asked after other questions (another rule first, or another ``--jobs`` split) got
    another model or core. A fresh context holds only this question's terms, made in the order
    they are asserted, so the same question gets the same answer in every run and process."""

    def __init__(self) -> None:
        self.ctx = z3.Context()
        self.solver = z3.Solver(ctx=self.ctx)

    def _in(self, term: Any) -> Any:
        return term.translate(self.ctx)

    def set(self, *args: Any) -> None:
        self.solver.set(*args)

    def add(self, term: Any) -> None:
        self.solver.add(self._in(term))

    def assert_and_track(self, term: Any, name: str) -> None:
        self.solver.assert_and_track(self._in(term), z3.Bool(name, self.ctx))

    def push(self) -> None:
        self.solver.push()

    def pop(self) -> None:
        self.solver.pop()

    def check(self, *assumptions: Any) -> Any:
        return interruptible_check(self.solver, self.ctx, [self._in(a) for a in assumptions])

    def model(self) -> Any:
        return self.solver.model().translate(z3.main_ctx())

    def unsat_core(self) -> list:
        return list(self.solver.unsat_core())

    def reason_unknown(self) -> str:
        return self.solver.reason_unknown()


def interruptible_check(solver: Any, ctx: Any, assumptions: Iterable[Any] = ()) -> Any:
    """``solver.check(*assumptions)`` (``solver`` of z3 context ``ctx``) that Ctrl-C stops at once
    (:func:`interrupt`): raises ``KeyboardInterrupt`` instead of z3's unknown."""
    if _Running.interrupted:
        raise KeyboardInterrupt
    _Running.context = ctx
    try:
        answer = solver.check(*assumptions)
    finally:
        _Running.context = None
    if _Running.interrupted:  # z3 answered unknown because it was stopped: not an answer
        raise KeyboardInterrupt
    return answer


def ask_tracked(parts: list[tuple[str, Any]], leaves: dict, names: Iterable[str], *, timeout: float,
                rlimit: int, seed: int) -> tuple[Any, list[str], str]:
    """One question on a fresh solver: the domain axioms of the leaves ``names`` reads (``leaves``:
    constant name -> leaf with ``axioms``), then the named ``parts``, each tracked by its name.
    Returns z3's answer, the unsat core's names (empty unless unsat) and the reason it gives."""
    solver = IsolatedSolver()
    solver.set("timeout", max(1, int(timeout * 1000)))
    solver.set("rlimit", max(1, rlimit))
    solver.set("random_seed", seed)
    done: set[int] = set()
    for name in sorted(names):  # a set's order follows PYTHONHASHSEED; z3's answer follows the order
        leaf = leaves.get(name)
        if leaf is None or id(leaf) in done:
            continue
        done.add(id(leaf))
        for axiom_name, axiom in leaf.axioms:
            solver.assert_and_track(axiom, axiom_name)
    for name, term in parts:
        solver.assert_and_track(term, name)
    answer = solver.check()
    core = [c.decl().name() for c in solver.unsat_core()] if answer == z3.unsat else []
    return answer, core, solver.reason_unknown()
