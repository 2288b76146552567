"""z3 over the state support table (``kvproof/sim/startup/state_support.py``): every row reachable (with a
witness combination), no two rows overlapping, and no combination of the domain left undecided.

The finite axes are z3 integers indexing their values and the integer axes z3 integers, so the
queries are linear and small; :func:`prove_table` answers them for every revision and is what
``kvproof prove --table`` prints (a test replays each witness through the concrete table).
"""

from __future__ import annotations

from typing import Any

import attrs
import z3

from ..sim.startup.state_support import AXES, NUMBERS, REVISIONS, ROWS, Row, in_domain, matches

__all__ = ["TableResult", "RowResult", "prove_table", "Z3View"]


class Z3View:
    """The table's axes as z3 terms (``is_``/``num``, like :class:`~kvproof.sim.state_support.DictView`)."""

    def __init__(self) -> None:
        self.finite = {axis: z3.Int(f"ss.{axis}") for axis in AXES}
        self.numbers = {axis: z3.Int(f"ss.{axis}") for axis in NUMBERS}

    def is_(self, axis: str, value: Any):
        return self.finite[axis] == AXES[axis].index(value)

    def num(self, axis: str):
        return self.numbers[axis]

    def ranges(self) -> list:
        return [z3.And(term >= 0, term < len(AXES[axis])) for axis, term in self.finite.items()]

    def combination(self, model: z3.ModelRef) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for axis, term in self.finite.items():
            out[axis] = AXES[axis][model.eval(term, model_completion=True).as_long()]
        for axis, term in self.numbers.items():
            out[axis] = model.eval(term, model_completion=True).as_long()
        return out


@attrs.frozen
class RowResult:
    row: Row
    verdict: str  # reachable | dead | unknown
    witness: dict | None = None


@attrs.frozen
class TableResult:
    rows: list[RowResult]
    #: Pairs of rows some combination falls in both of, each with that combination.
    overlaps: list[tuple[str, str, dict]]
    #: Per revision: "total", or a combination no row decides, or "unknown".
    totality: dict[str, Any]

    @property
    def proved(self) -> bool:
        return (all(r.verdict == "reachable" for r in self.rows) and not self.overlaps
                and all(v == "total" for v in self.totality.values()))

    def lines(self) -> list[str]:
        out = []
        for result in self.rows:
            row = result.row
            verdict = row.rule or "supported"
            out.append(f"{row.revision[:12]:<12}  {row.name:<58} {verdict:<9} {result.verdict}")
        for a, b, witness in self.overlaps:
            out.append(f"overlap: {a} / {b} at {witness}")
        for revision, verdict in self.totality.items():
            out.append(f"{revision[:12]:<12}  {'total' if verdict == 'total' else f'NOT total: {verdict}'}")
        return out


def _label(row: Row) -> str:
    return f"{row.revision[:12]}:{row.name}"


def prove_table(timeout_ms: int = 10_000) -> TableResult:
    """Reachability of every row, pairwise disjointness and totality per revision."""
    view = Z3View()
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*view.ranges(), in_domain(view))
    terms = {id(row): matches(row, view) for row in ROWS}

    rows = []
    for row in ROWS:
        solver.push()
        solver.add(terms[id(row)])
        answer = solver.check()
        if answer == z3.sat:
            rows.append(RowResult(row, "reachable", view.combination(solver.model())))
        else:
            rows.append(RowResult(row, "dead" if answer == z3.unsat else "unknown"))
        solver.pop()

    overlaps = []
    for i, a in enumerate(ROWS):
        for b in ROWS[i + 1:]:
            if a.revision != b.revision:
                continue
            solver.push()
            solver.add(terms[id(a)], terms[id(b)])
            answer = solver.check()
            if answer != z3.unsat:
                overlaps.append((_label(a), _label(b), view.combination(solver.model()) if answer == z3.sat else {}))
            solver.pop()

    totality: dict[str, Any] = {}
    for revision in REVISIONS:
        solver.push()
        solver.add(view.is_("revision", revision), z3.Not(z3.Or(*[terms[id(r)] for r in ROWS if r.revision == revision])))
        answer = solver.check()
        totality[revision] = ("total" if answer == z3.unsat else
                              view.combination(solver.model()) if answer == z3.sat else "unknown")
        solver.pop()
    return TableResult(rows, overlaps, totality)
