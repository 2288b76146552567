"""``kvproof explore``: z3 Optimize over the open fields of a document template.

The template is a profile or a runtime record (JSON). Every field keeps its value except the
``--open`` ones (JSON paths; a path opens every leaf under it), every rule must accept the
result, and the objective (a Python expression over ``doc`` written with the logic helpers, e.g.
``doc.cache.num_blocks`` or ``sum(g.page_size_bytes for g in doc.resources.cache_groups)``) is
minimized or maximized. The optimum is replayed through the concrete checker like a witness.

Geometry templates: the simulator's planner (``kvproof.sim.plan``) runs on concrete values only
(it sorts, groups and takes ``math.lcm`` of Python ints), so a geometry cannot be optimized
symbolically yet; ``explore`` says so instead of guessing. The per-formula functions of
``kvproof.sim.demand``/``pages``/``concurrency`` do run on z3 terms and can be used in the
objective.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs
import z3

from .engine import Config, Session
from .shapes import Shape

__all__ = ["ExploreResult", "explore", "GeometryNotSymbolic"]


class GeometryNotSymbolic(ValueError):
    """The template is a geometry, which the planner cannot take as z3 terms."""


@attrs.define
class ExploreResult:
    status: str  # optimal | infeasible | unknown | mismatch
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
            timeout: float = 30.0) -> ExploreResult:
    from ..models.documents import detect_kind
    from ..rules.registry import all_rules
    from .claims import namespace
    from .engine import DEFAULT_PINS
    from .prove import replay_accepts

    from ..commands.explore import check_objective
    from ..models.codec import parse_json
    from ..models.documents import read_document

    start = time.perf_counter()
    tree = parse_json(read_document(template_path), str(template_path))  # bounded, strict (InputError)
    names = namespace()
    code = compile(check_objective(objective, names), "<objective>", "eval")  # restricted (ObjectiveError)
    kind = detect_kind(tree)
    if kind == "geometry":
        raise GeometryNotSymbolic(
            "geometry templates cannot be explored yet: kvproof.sim.plan runs on concrete values only "
            "(see docs/solver.md, 'explore'); explore a record or profile template instead")
    if kind not in ("profile", "worker", "scheduler"):
        raise ValueError("the template is not a profile or a runtime record")
    file = Path(template_path).name
    shape = Shape(f"explore {file}", ((kind, file, tree),), 0)
    session = Session(shape, all_rules(), Config(timeout=timeout), set(DEFAULT_PINS))
    session.encode_all()

    def formula(documents):
        scope = dict(names)
        scope["doc"] = documents[0].obj
        return eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - the user's own expression

    term = _evaluate(session, formula)
    rule_terms = [t for e in session.encoded.values() if e.terms for t in e.terms]
    session.ensure_solver()
    session.touch(rule_terms + [term])
    optimizer = z3.Optimize()
    optimizer.set("timeout", max(1, int(timeout * 1000)))
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
    elif result == z3.sat:
        model = optimizer.model()
        value = model.eval(handle.value() if hasattr(handle, "value") else term, model_completion=True)
        out.value = _number(model.eval(term, model_completion=True))
        if not _finite(handle, direction):
            out.reason = f"unbounded: the objective has no {'minimum' if direction == 'minimize' else 'maximum'}"
        from ..models.codec import dumps

        text = dumps(session.trees(model)[0][2])
        ok, why = replay_accepts([(file, text)])
        out.document = text
        out.status = "optimal" if ok else "mismatch"
        out.reason = out.reason or why
        out.changed = [leaf.name for leaf in session.active if _changed(model, leaf)]
        del value
    else:
        out.reason = optimizer.reason_unknown()
    out.seconds = time.perf_counter() - start
    return out


def _evaluate(session: Session, formula) -> Any:
    from .engine import as_bool  # noqa: F401 - same protocol, but an objective is a number
    from . import symbolic
    from .engine import strict_bool

    for _ in range(20):
        log: list = []
        symbolic.ACCESS_LOG = log
        try:
            with strict_bool():
                value = formula(session.documents)
        finally:
            symbolic.ACCESS_LOG = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return z3.RealVal(value) if isinstance(value, float) else z3.IntVal(value)
        if z3.is_expr(value) and (z3.is_int(value) or z3.is_real(value)):
            return value
        raise TypeError(f"the objective is not a number: {value!r}")
    raise RuntimeError("unreachable")


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
    try:
        bound = handle.upper() if direction == "maximize" else handle.lower()
        return "oo" not in str(bound)
    except Exception:  # noqa: BLE001
        return True


def _changed(model: Any, leaf) -> bool:
    try:
        return leaf.decode(model) != leaf.template
    except Exception:  # noqa: BLE001
        return False
