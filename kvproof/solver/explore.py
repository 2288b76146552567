"""``kvproof explore``: z3 Optimize over the open fields of a document template.

The template is a profile or a runtime record (JSON). Every field keeps its value except the
``--open`` ones (JSON paths; a path opens every leaf under it), every rule must accept the
result, and the objective (an expression of :mod:`kvproof.solver.expression` over ``doc``, e.g.
``doc.cache.num_blocks`` or ``Sum(g.page_size_bytes for g in doc.resources.cache_groups)``) is
minimized or maximized. The optimum is replayed through the concrete checker like a witness.

Geometry templates: the simulator's planner (``kvproof.sim.plan``) runs on concrete values only
(it sorts, groups and takes ``math.lcm`` of Python ints), so a geometry is explored over the
planner itself by :mod:`kvproof.solver.explore_geometry` (``kvproof explore`` dispatches there);
:func:`explore` refuses one. The shared formulas (``kvproof.formulas``: ``blocks_per_request``, ``pages``,
``concurrency``) do run on z3 terms and can be used in the objective.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable

import attrs
import z3

from ..diagnostics import KvproofError

from ..models.codec import dumps, parse_json
from ..models.documents import detect_kind, read_document
from ..rules.registry import all_rules
from .calls import Config
from .expression import ExpressionError, describe, parse, symbolic_value
from .pins import DEFAULT_PINS
from .session import Session
from .shapes import Shape
from .witnesses import replay

__all__ = ["ExploreResult", "explore", "GeometryNotSymbolic"]


class GeometryNotSymbolic(ValueError, KvproofError):
    """The template is a geometry, which the planner cannot take as z3 terms."""


@attrs.define
class ExploreResult:
    status: str  # optimal | unbounded | infeasible | unknown | mismatch
    objective: str
    direction: str
    value: Any = None
    document: str | None = None
    reason: str = ""
    seconds: float = 0.0
    changed: list[str] = attrs.field(factory=list)

    def to_json(self) -> dict:
        return {"status": self.status, "objective": self.objective, "direction": self.direction,
                "value": self.value, "reason": self.reason, "seconds": round(self.seconds, 3),
                "changed": self.changed}


def explore(template_path: str | Path, objective: str, direction: str, open_paths: tuple[str, ...],
            timeout: float = 120.0, rlimit: int | None = None) -> ExploreResult:
    """Optimize ``objective`` (checked by :mod:`kvproof.solver.expression`; an
    :class:`~kvproof.solver.expression.ExpressionError` propagates) over the ``open_paths`` of the
    template. One status: ``optimal`` (with the replayed document), ``unbounded`` (no optimum:
    z3 reports an infinite or unattained bound), ``infeasible``, ``mismatch`` or ``unknown``."""
    start = time.perf_counter()
    tree = parse_json(read_document(template_path), str(template_path))  # bounded, strict (InputError)
    checked = parse(objective)  # the language (ExpressionError)
    kind = detect_kind(tree)
    if kind == "geometry":
        raise GeometryNotSymbolic(
            "kvproof.sim.plan runs on concrete values only: a geometry template is explored over the planner "
            "by kvproof.solver.explore_geometry (kvproof explore GEOMETRY --open ...; docs/solver.md)")
    if kind not in ("profile", "worker", "scheduler"):
        raise ValueError("the template is not a profile or a runtime record")
    paths = set(_json_paths(tree))
    unmatched = [path for path in open_paths if not any(_under(known, path) for known in paths)]
    if unmatched:
        raise ValueError(f"--open {unmatched[0]}: no field of the template is at or under this path")
    file = Path(template_path).name
    shape = Shape(f"explore {file}", ((kind, file, tree),), 0)
    config = Config(timeout=timeout) if rlimit is None else Config(timeout=timeout, rlimit=rlimit)
    session = Session(shape, all_rules(), config, set(DEFAULT_PINS))
    term = _objective_term(symbolic_value(session, lambda documents: checked.evaluate({"doc": documents[0].obj})))
    rule_terms = [t for e in session.encoded.values() if e.terms for t in e.terms]
    session.ensure_solver()
    session.touch(rule_terms + [term])
    optimizer = z3.Optimize()
    optimizer.set("timeout", max(1, int(timeout * 1000)))  # a safety net: the budget is the resource limit
    optimizer.set("rlimit", config.rlimit)
    for leaf in session.active:
        for _name, axiom in leaf.axioms:
            optimizer.add(axiom)
        opened = any(_under(leaf.path, path) for path in open_paths)
        equal = leaf.template_eq()
        if not opened and equal is not None:
            optimizer.add(equal)
    for rule in session.rules:
        encoded = session.encoded[rule.id]
        if encoded.terms:
            optimizer.add(z3.And(*encoded.terms))
    handle = optimizer.minimize(term) if direction == "minimize" else optimizer.maximize(term)
    # second priority (z3's default is lexicographic): keep the template's values where the optimum allows
    for leaf in session.active:
        equal = leaf.template_eq()
        if equal is not None and any(_under(leaf.path, path) for path in open_paths):
            optimizer.add_soft(equal, weight=1, id="keep")
    result = optimizer.check()
    out = ExploreResult("unknown", objective, direction)
    if result == z3.unsat:
        out.status, out.reason = "infeasible", "no document with these open fields passes every rule"
    elif result == z3.sat and not _finite(handle, direction):
        bound = handle.lower() if direction == "minimize" else handle.upper()
        out.status = "unbounded"
        out.reason = (f"unbounded: the objective has no {'minimum' if direction == 'minimize' else 'maximum'} "
                      f"over the accepted documents (z3's bound: {bound})")
    elif result == z3.sat:
        model = optimizer.model()
        out.value = _number(model.eval(term, model_completion=True))
        text = dumps(session.trees(model)[0][2])
        out.document = text
        out.status, out.reason = _accepted(replay([(file, text)], "explore"))
        out.changed = [leaf.name for leaf in session.active if _changed(model, leaf)]
    else:
        out.reason = optimizer.reason_unknown()
    out.seconds = time.perf_counter() - start
    return out


def _objective_term(value: Any) -> Any:
    """The objective's value as a z3 Int or Real; anything but a number is a bad objective."""
    if isinstance(value, bool) or (z3.is_expr(value) and z3.is_bool(value)):
        raise ExpressionError("the objective is a truth value, not a number")
    if isinstance(value, int):
        return z3.IntVal(value)
    if isinstance(value, (float, Fraction)):
        return z3.RealVal(Fraction(value))
    if z3.is_expr(value) and (z3.is_int(value) or z3.is_real(value)):
        return value
    raise ExpressionError(f"the objective is not a number: it is {describe(value)}")


def _accepted(replayed) -> tuple[str, str]:
    """``optimal`` when the optimum loads strictly and the concrete checker accepts it, else
    ``mismatch`` and why."""
    if not replayed.loaded:
        return "mismatch", replayed.not_loaded("document")
    if replayed.diagnostics:
        first = replayed.diagnostics[0]
        return "mismatch", f"the concrete checker refuses it with {first.rule} ({first.at()})"
    return "optimal", ""


def _json_paths(tree: Any, path: str = "$") -> Iterable[str]:
    """Every JSON path of a tree (objects, arrays and leaves), as the symbolic leaves name them."""
    yield path
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _json_paths(value, f"{path}.{key}")
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from _json_paths(value, f"{path}[{index}]")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or (path.startswith(prefix) and path[len(prefix)] in ".[")


def _number(value: Any) -> Any:
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        fraction = value.as_fraction()
        return int(fraction) if fraction.denominator == 1 else float(fraction)
    return str(value)


def _finite(handle: Any, direction: str) -> bool:
    """z3's bound of the objective is a number (not ``oo``, not an ``epsilon`` off one)."""
    bound = str(handle.upper() if direction == "maximize" else handle.lower())
    return "oo" not in bound and "epsilon" not in bound


def _changed(model: Any, leaf) -> bool:
    try:
        return leaf.decode(model) != leaf.template
    except Exception:  # noqa: BLE001
        return False
