"""Claims: invariants stated over the documents every rule accepts, proved or refuted by z3.

A claim is a function over a document (or a bundle of documents) written with the
:mod:`kvproof.logic` helpers, like a rule body, that returns whether the invariant holds. The
solver asks, shape by shape, for a document that passes every rule and violates the claim:

* none in any shape of the bound: the claim **holds** within the bound;
* one: the claim is **refuted**, and the counterexample (loaded strictly, accepted by the
  concrete checker, and violating the claim when the claim is evaluated on the loaded objects) is
  written as JSON documents;
* a timeout or resource limit, or no shape of the claim's kind at all: **unknown** (zero shapes
  prove nothing).

A claim that names its premises (``by``, the rules it follows from) has each shape asked against
them alone first (:mod:`.premises`): unsat there is unsat with every rule, and far cheaper.

Shipped claims live in this package (``profile.py``, ``records.py``); a claims file is any Python
file that declares more with :func:`claim`; an expression claim is written in the language of
:mod:`kvproof.solver.expression`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from pathlib import Path
from typing import Any, Callable, Literal

import attrs
import z3

from ...logic import concrete_bool
from ...models.codec import dumps
from ...rules.check import bundles
from ..expression import ExpressionError, describe, parse, symbolic_value
from ..symbolic import collect_consts
from ..verdicts import Outcome
from ..witnesses import replay
from .premises import against_premises, premise_rules

__all__ = ["Claim", "claim", "shipped_claims", "load_claims_file", "expression_claim", "ClaimResult", "ShapeAnswer",
           "prove_claim", "search_shape"]

#: Why a claim is ``unknown`` when its kind has no base shape (no example documents found).
NO_SHAPES = ("no base shape of kind {kind} (no example documents of that kind were found{where}): "
             "a claim checked over zero shapes is not proved")


@attrs.frozen
class Claim:
    id: str
    text: str
    kind: Literal["profile", "worker", "scheduler", "bundle"]
    formula: Callable[[Any], Any]
    #: "holds", or "refuted" for a known gap (with ``reason``); a contrary result fails the run.
    expect: str = "holds"
    reason: str | None = None
    #: The rules the claim follows from: each shape is asked against them alone first
    #: (:mod:`.premises`); a shape they do not decide gets the search with every rule.
    by: tuple[str, ...] = ()

    def apply(self, documents: tuple) -> Any:
        """The formula on a document set: the first document of the claim's kind, or the bundle."""
        if self.kind == "bundle":
            groups = bundles(documents)
            return self.formula(groups[0])
        for document in documents:
            if document.kind == self.kind:
                return self.formula(document.obj)
        raise ValueError(f"no {self.kind} document")


_DECLARED: dict[str, Claim] = {}


def claim(*, id: str, text: str, kind: str, expect: str = "holds", reason: str | None = None,
          by: tuple[str, ...] = ()):
    """Declare a claim; the decorated function is its formula. ``by``: the rule IDs it follows
    from (asked first, alone, on every shape: a speed-up that never changes a verdict)."""

    def wrap(formula: Callable[[Any], Any]) -> Claim:
        declared = Claim(id, text, kind, formula, expect, reason, tuple(by))  # type: ignore[arg-type]
        _DECLARED[id] = declared
        return declared

    return wrap


def shipped_claims() -> list[Claim]:
    # imported here, not at the top: they import ``claim`` from this package (a cycle at import)
    from . import profile, records  # noqa: F401 - importing declares the claims

    return [c for c in _DECLARED.values() if c.formula.__module__.startswith(__name__)]


def load_claims_file(path: str | Path) -> list[Claim]:
    """Every claim a Python file declares (``from kvproof.solver.claims import claim``)."""
    path = Path(path)
    before = set(_DECLARED)
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:16]  # not hash(): seeded per run
    spec = importlib.util.spec_from_file_location(f"kvproof_claims_{digest}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot load claims from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [_DECLARED[name] for name in _DECLARED if name not in before]


def expression_claim(expression: str, kind: str) -> Claim:
    """A claim from an expression of :mod:`kvproof.solver.expression` over ``doc`` (``bundle``
    too, for a bundle claim); raises :class:`~kvproof.solver.expression.ExpressionError`."""
    checked = parse(expression, ("doc", "bundle"))

    def formula(document: Any) -> Any:
        return checked.evaluate({"doc": document, "bundle": document})

    return Claim("EXPR", expression, kind, formula)  # type: ignore[arg-type]


@attrs.define
class ClaimResult:
    claim: str
    text: str
    verdict: str  # holds | refuted | unknown | mismatch | error
    expect: str = "holds"
    seconds: float = 0.0
    shapes: int = 0
    core: list[str] = attrs.field(factory=list)
    shape: str | None = None
    reason: str = ""
    documents: list[tuple[str, str]] = attrs.field(factory=list)
    counterexample: str | None = None

    @property
    def contrary(self) -> bool:
        if self.verdict in ("mismatch", "error"):
            return True
        return self.verdict in ("holds", "refuted") and self.verdict != self.expect

    def to_json(self, timings: bool = False) -> dict:
        out = {"claim": self.claim, "text": self.text, "verdict": self.verdict, "expect": self.expect,
               "shapes": self.shapes, "core": self.core, "shape": self.shape,
               "reason": self.reason, "counterexample": self.counterexample}
        if timings:  # the clock differs run to run: only on request (--timings)
            out["seconds"] = round(self.seconds, 3)
        return out


@attrs.define
class ShapeAnswer:
    """What one base shape says about a claim (plain values: a shape is a question of its own)."""

    verdict: str  # holds | refuted | mismatch | unknown | error
    shape: str
    core: list[str] = attrs.field(factory=list)
    reason: str = ""
    documents: list[tuple[str, str]] = attrs.field(factory=list)


def prove_claim(target: Claim, prover) -> ClaimResult:
    """Search every base shape of the claim's kind for an accepted document that violates it.

    The shapes are asked one after the other (:func:`search_shape`); the first refuting (or
    mismatching, or failing) shape decides and the shapes after it are not asked. Over zero
    shapes nothing is proved: the verdict is ``unknown`` (:data:`NO_SHAPES`). An
    :class:`~kvproof.solver.expression.ExpressionError` (a bad expression) propagates."""
    start = time.perf_counter()
    result = ClaimResult(target.id, target.text, "holds", target.expect)
    cores: list[str] = []
    unknown: list[str] = []
    try:
        premises = premise_rules(target.by, prover.rules)
    except ValueError as exc:
        result.verdict, result.reason = "error", f"{target.id}: {exc}"
        result.seconds = time.perf_counter() - start
        return result
    for shape in prover.bases(target.kind):
        result.shapes += 1
        answer = search_shape(target, prover, shape, premises)
        if answer.verdict in ("refuted", "mismatch", "error"):
            result.verdict, result.reason, result.documents = answer.verdict, answer.reason, answer.documents
            if answer.verdict == "refuted":
                result.shape = answer.shape
            break
        cores += answer.core
        if answer.verdict == "unknown":
            unknown.append(answer.reason)
    if result.verdict == "holds":
        if not result.shapes:
            where = f" in {prover.examples}" if getattr(prover, "examples", None) else ""
            result.verdict, result.reason = "unknown", NO_SHAPES.format(kind=target.kind, where=where)
        elif unknown:
            result.verdict, result.reason = "unknown", unknown[0]
        else:
            result.core = sorted(set(cores))
            result.reason = f"no accepted document violates it within {prover.bound.label()} ({result.shapes} shapes)"
    result.seconds = time.perf_counter() - start
    return result


def search_shape(target: Claim, prover, shape, premises: list) -> ShapeAnswer:
    """One shape's answer: against the claim's premises first (:mod:`.premises`), else with every
    rule. It depends on the shape alone, not on the shapes or claims asked before it in this
    process: the kind's pins are closed over all its shapes, the claim's own pins stay in a fork
    of the shape's session, and every question gets a fresh solver."""
    if premises:
        decided = against_premises(target, shape, premises, prover.config)
        if decided is not None:
            return ShapeAnswer("holds", shape.name, [c for c in decided.core if not c.startswith("not:")])
    session = prover.session(shape).fork()  # the claim's own pins never reach the next claim
    try:
        term = _as_claim_bool(symbolic_value(session, target.apply))
    except ExpressionError:
        raise
    except Exception as exc:  # noqa: BLE001 - a claim the solver cannot evaluate is reported
        return ShapeAnswer("error", shape.name,
                           reason=f"the claim cannot be evaluated on symbolic documents: {type(exc).__name__}: {exc}")
    if z3.is_true(z3.simplify(term)):
        return ShapeAnswer("holds", shape.name)
    force: set[str] = set()
    mismatch: ShapeAnswer | None = None
    outcome = session.check(z3.Not(term), label=f"not:{target.id}")
    for _round in range(3):
        if outcome.status != "sat":
            break
        documents = [(file, dumps(tree)) for _, file, tree in session.trees(outcome.model)]
        verdict, reason, refusing = validate(target, documents)
        if verdict == "refuted":
            return ShapeAnswer("refuted", shape.name, reason=reason, documents=documents)
        mismatch = ShapeAnswer("mismatch", shape.name, reason=f"{shape.name}: {reason}")
        if refusing is None or refusing not in session.order:
            break
        rule = next(r for r in prover.rules if r.id == refusing)
        names = collect_consts(session.encode(rule).terms or [])
        force |= {leaf.name for leaf in session.active if any(n in names for n in leaf.var_names)}
        outcome = _check_forced(session, z3.Not(term), target.id, force)
    if mismatch is not None:  # the symbolic and the concrete semantics disagreed: reported, whatever came after
        return mismatch
    if outcome.status == "unsat":
        return ShapeAnswer("holds", shape.name, [c for c in outcome.core if not c.startswith("not:")])
    if outcome.status == "unknown":
        return ShapeAnswer("unknown", shape.name, reason=f"{shape.name}: {outcome.reason}")
    return ShapeAnswer("holds", shape.name)


def _as_claim_bool(value: Any) -> Any:
    """A claim's value as a z3 Bool; anything but a truth value is a bad claim."""
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if z3.is_expr(value) and z3.is_bool(value):
        return value
    raise ExpressionError(f"a claim is true or false, but this one is {describe(value)}")


def _check_forced(session, extra, claim_id: str, force: set[str]):
    session.encode_all()
    session.ensure_solver()
    session.sync([extra] + [t for e in session.encoded.values() if e.terms for t in e.terms])
    session.close_prefix()
    solver = session.solver
    solver.push()
    try:
        for rule in session.rules:
            encoded = session.encoded[rule.id]
            if encoded.terms:
                solver.assert_and_track(z3.And(*encoded.terms), rule.id)
        solver.assert_and_track(extra, f"not:{claim_id}")
        for name in force:
            if f"pin {name}" in session.pin_leaf:
                solver.add(z3.Bool(f"pin {name}"))
        return session._relax()
    except Exception as exc:  # noqa: BLE001
        return Outcome("unknown", reason=str(exc))
    finally:
        solver.pop()


def validate(target: Claim, documents: list[tuple[str, str]]) -> tuple[str, str, str | None]:
    """("refuted", text, None) when the documents load, every rule accepts them and the claim is
    false on the loaded objects; ("mismatch", why, first refusing rule or None) otherwise."""
    replayed = replay(documents, "counterexample")
    if not replayed.loaded:
        return "mismatch", replayed.not_loaded("counterexample"), None
    if replayed.diagnostics:
        first = replayed.diagnostics[0]
        return "mismatch", f"the checker refuses the counterexample with {first.rule} ({first.path})", first.rule
    if concrete_bool(target.apply(tuple(replayed.documents))):
        return "mismatch", "the claim holds on the loaded counterexample (symbolic and concrete semantics differ)", None
    return "refuted", "an accepted document violates the claim", None
