"""Parity: every rule's concrete verdict equals its z3 verdict on the same values.

Built on :mod:`kvproof.solver.symbolic` (the solver's symbolic instance of the attrs models):

1. a *shape* (a few shrunk documents of a record set: a worker and its scheduler, a profile, a
   worker and scheduler with an accepted probe of themselves) is built once as a symbolic
   document set, and every rule's binding and body are run on it (under
   :func:`kvproof.solver.encode.strict_bool`; a leaf that Python control flow reads is pinned to
   its template value and the shape built again, as the prover does), giving one z3 term per rule
   instance;
2. an *input* assigns a concrete value to every symbolic leaf (Hypothesis draws them: most leaves
   keep the template's value, a few take boundary, random, wrong-type or other-vocabulary values);
3. the concrete documents are those values put into the shape's model objects, written to JSON
   and loaded strictly (so every input is a loadable document), and every rule instance is
   evaluated concretely;
4. every instance's term is evaluated under the same values (exactly: strings are lifted without
   z3's escape processing, floats as exact rationals); the two verdicts must be equal.

Instances are matched by file, subject and blame (bindings that only prune on concrete values,
like BO006's candidate page pairs, yield a superset symbolically: the extra instances must hold).
A rule whose body cannot be run symbolically is reported with the exception.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import time
from fractions import Fraction
from typing import Any, Iterable

import attrs
import z3
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from ..diagnostics import InputError
from ..logic import _string_val, concrete_bool
from ..models.codec import ABSENT, MAX_SAFE_INT, unstructure
from ..models.documents import Document
from ..rules.core import Rule
from ..solver import symbolic as sym
from ..solver.encode import encode_rule, instance_key, targets
from ..solver.pins import DEFAULT_PINS, PIN_ROUNDS, learning_pins
from ..solver.shapes import shrink_profile, shrink_record
from ..solver.symbolic import Policy, ReadLog, SymValue, build
from ..solver.witnesses import load_documents
from .mutate import UNKNOWN, VOCABULARY, document_class

__all__ = [
    "ParityShape", "Mismatch", "ParityReport", "build_shape", "shapes_from_sets", "value_strategy",
    "run_parity", "KNOWN_PARITY", "compare", "exact_string",
]

VIRTUAL_DIR = "parity"


@attrs.frozen
class KnownParity:
    """A parity difference reported in docs/fuzz-findings.md (not a failure while it persists)."""

    rule: str
    kind: str  # mismatch | error
    id: str
    reason: str
    #: A substring of the mismatch's detail that must occur (None: any).
    detail: str | None = None
    #: A predicate over the mismatch (None: any).
    when: Any = attrs.field(default=None, eq=False)

    def matches(self, mismatch: "Mismatch") -> bool:
        return (mismatch.rule == self.rule and mismatch.kind == self.kind
                and (self.detail is None or self.detail in mismatch.detail)
                and (self.when is None or bool(self.when(mismatch))))


#: Parity differences under review (docs/fuzz-findings.md).
KNOWN_PARITY: tuple[KnownParity, ...] = (
    # F101 (PC005 had no z3 verdict: OrDefault(field, None)), F102 (SymInt.is_int shadowed z3's
    # ArithRef.is_int()) and F104 (SameScalar's symbolic branch compared presence, int-ness and
    # ValueOf only) are fixed: OrDefault and SameScalar delegate to the solver's leaves.
    KnownParity("BO007", "mismatch", "F103", "the symbolic body takes the non-block dimensions in reversed shape "
                "order, the concrete body sorts them by stride"),
)


@attrs.define
class Mismatch:
    rule: str
    #: mismatch | error | binding | undetermined | crash
    kind: str
    shape: str
    detail: str
    subject: str = ""
    file: str = ""
    concrete: bool | None = None
    symbolic: bool | None = None
    #: The concrete documents (file, tree) of the input.
    documents: list = attrs.field(factory=list, repr=False)
    changed: list[str] = attrs.field(factory=list)
    known: str | None = None
    #: The input (leaf index -> (tag, value)) and its shape, for minimizing.
    values: dict = attrs.field(factory=dict, repr=False)
    shape_ref: Any = attrs.field(default=None, repr=False)

    def key(self) -> tuple:
        return (self.rule, self.kind, self.shape if self.kind in ("error", "binding") else "", self.known)

    def to_json(self) -> dict:
        return {"rule": self.rule, "kind": self.kind, "shape": self.shape, "subject": self.subject, "file": self.file,
                "concrete": self.concrete, "symbolic": self.symbolic, "detail": self.detail,
                "changed": self.changed, "known": self.known}


# --------------------------------------------------------------------------------------------
# Exact lifting of concrete values


def exact_string(value: str):
    """A z3 string constant equal to ``value`` character by character (``z3.StringVal`` would read
    ``\\u{..}`` sequences in it as escapes)."""
    return _string_val(value)


# --------------------------------------------------------------------------------------------
# Shapes


@attrs.define(eq=False)
class ParityShape:
    """A symbolic document set and its encoded rule instances."""

    name: str
    #: (kind, file, template tree, role)
    documents: list[tuple[str, str, Any, str]]
    symbolic: list = attrs.field(factory=list, repr=False)  # SymbolicDocument per document
    pins: set[str] = attrs.field(factory=set)
    #: rule ID -> list of (file, subject, blame, str names, term) | error text
    encoded: dict[str, Any] = attrs.field(factory=dict, repr=False)
    leaves: list = attrs.field(factory=list, repr=False)
    seconds: float = 0.0
    _variables: list | None = attrs.field(default=None, repr=False)
    _model: Any = attrs.field(default=None, repr=False)

    @property
    def files(self) -> list[str]:
        return [f"{VIRTUAL_DIR}/{file}" for _, file, _, _ in self.documents]


def build_shape(name: str, documents: list[tuple[str, str, Any, str]], rules: list[Rule]) -> ParityShape:
    """Build the symbolic documents of a shape and encode every rule on them, with the prover's
    encoder and pinning protocol (:func:`kvproof.solver.encode.encode_rule`)."""
    start = time.perf_counter()
    shape = ParityShape(name, documents, pins=set(DEFAULT_PINS))
    learning_pins(lambda: _encode(shape, rules), shape.pins, PIN_ROUNDS)
    shape.seconds = time.perf_counter() - start
    return shape


def _build_symbolic(shape: ParityShape) -> tuple[tuple[Document, ...], ReadLog]:
    policy = Policy(pinned=frozenset(shape.pins))
    multi = len(shape.documents) > 1
    reads = ReadLog()
    shape.symbolic = []
    out = []
    for kind, file, tree, role in shape.documents:
        label = f"{role}:{file}:" if multi else ""
        doc = build(document_class(kind), tree, label, policy, reads)
        shape.symbolic.append(doc)
        out.append(Document(kind, doc.obj, f"{VIRTUAL_DIR}/{file}", role))
    shape.leaves = [leaf for doc in shape.symbolic for leaf in doc.leaves]
    return tuple(out), reads


def _encode(shape: ParityShape, rules: list[Rule]) -> bool:
    documents, reads = _build_symbolic(shape)
    var_leaf = {name: leaf for doc in shape.symbolic for name, leaf in doc.var_map().items()}
    pinned = frozenset(shape.pins)
    shape.encoded = {}
    for rule in rules:
        encoded = encode_rule(rule, documents, var_leaf, pinned, reads)
        shape.encoded[rule.id] = encoded.error if encoded.error is not None else [
            (*key, term) for key, term in zip(encoded.keys, encoded.terms)]
    return True


def _group_signature(tree: dict, index: int) -> tuple:
    group = tree["cache"]["groups"][index]
    specs = group.get("layer_specs") or {}
    spec = group.get("spec") or {}
    return (group.get("spec_type"), group.get("kind"), tuple(sorted({s.get("spec_type") for s in specs.values()})),
            spec.get("spec_type"), "state" in group)


def shapes_from_sets(record_sets, max_groups: int = 2, layers: int = 1, probe: bool = True) -> list[tuple[str, list]]:
    """Shape templates ``(name, [(kind, file, tree, role)])`` of record sets: per distinct cache
    group (and the first pair of distinct groups), the first worker and the scheduler shrunk to it
    (with the accepted probe of themselves once per set), and each profile's groups one by one."""
    out: list[tuple[str, list]] = []
    seen: set[str] = set()

    def add(name: str, documents: list) -> None:
        key = json.dumps([d[2] for d in documents] + [d[3] for d in documents], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append((name, documents))

    for record_set in record_sets:
        workers = [d for d in record_set.documents if d.kind == "worker"]
        schedulers = [d for d in record_set.documents if d.kind == "scheduler"]
        profiles = [d for d in record_set.documents if d.kind == "profile"]
        base = record_set.name.rstrip("/").rsplit("/", 1)[-1]
        record = workers[0].tree if workers else (schedulers[0].tree if schedulers else None)
        selections: list[list[int]] = []
        if record is not None:
            signatures: dict[tuple, int] = {}
            for index in range(len(record["cache"]["groups"])):
                signatures.setdefault(_group_signature(record, index), index)
            singles = [[i] for i in signatures.values()]
            selections = singles + ([[singles[0][0], singles[1][0]]] if len(singles) > 1 and max_groups > 1 else [])
        for number, selection in enumerate(selections):
            documents = []
            if workers:
                documents.append(("worker", "worker.json", shrink_record(workers[0].tree, selection, layers), "checked"))
            if schedulers:
                documents.append(("scheduler", "scheduler.json", shrink_record(schedulers[0].tree, selection, layers),
                                  "checked"))
            add(f"{base} groups{selection}", documents)
            if probe and number == 0 and documents:
                add(f"{base} groups{selection} +probe",
                    documents + [(k, f"probe-{f}", copy.deepcopy(t), "probe") for k, f, t, _ in documents])
        for document in profiles:
            groups = (document.tree.get("resources") or {}).get("cache_groups") or []
            for index in range(len(groups)):
                add(f"{base} profile groups[{index}]",
                    [("profile", "profile.json", shrink_profile(document.tree, [index]), "checked")])
    return out


# --------------------------------------------------------------------------------------------
# Values


_TRICKY_STRINGS = ("", " ", "\\u{4d}ambaSpec", "MambaSpec ", "mambaspec", "attention\x00")


def value_strategy(leaf) -> Any:
    """A Hypothesis strategy of ``(tag, value)`` for a symbolic leaf (tag None for a required leaf)."""
    template = leaf.template
    field = leaf.spath.rsplit(".", 1)[-1]

    def ints(low: int, high: int):
        base = template if type(template) is int else 0
        near = st.integers(-3, 3).map(lambda d: min(max(base + d, low), high))
        return st.one_of(near, st.sampled_from(sorted({low, min(high, 0) if low <= 0 else low, min(1, high), high})),
                         st.integers(low, high), st.integers(max(low, -64), min(high, 1 << 16)))

    def floats():
        base = template if type(template) in (int, float) and not isinstance(template, bool) else 0.5
        return st.one_of(
            st.sampled_from([0.0, 1.0, 0.5, -0.5, 2.0, float(base), math.nextafter(float(base), math.inf),
                             math.nextafter(float(base), -math.inf)]),
            st.integers(-4096, 4096).map(lambda g: g / 1024),
            st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
            st.integers(-3, 3),  # an int where a float belongs loads
        )

    def strings():
        known = sorted(set(leaf.literal or ()) | set(VOCABULARY.get(field, ())) | ({template} if isinstance(template, str) else set()))
        if leaf.literal:
            return st.sampled_from(sorted(leaf.literal))
        return st.one_of(st.sampled_from(known or [UNKNOWN]), st.sampled_from([UNKNOWN, *_TRICKY_STRINGS]),
                         st.text(max_size=6))

    def payload(tag: int):
        if tag == sym.INT_T:
            return ints(0, MAX_SAFE_INT) if leaf.kind == "int" else ints(-MAX_SAFE_INT, MAX_SAFE_INT)
        if tag == sym.BOOL_T:
            return st.booleans()
        if tag == sym.FLOAT_T:
            return floats().filter(lambda v: isinstance(v, float)) if leaf.kind == "scalar" else floats()
        if tag == sym.STR_T:
            return strings()
        raise ValueError(tag)

    if not leaf.optional:
        base = {"int": sym.INT_T, "signed": sym.INT_T, "bool": sym.BOOL_T, "float": sym.FLOAT_T, "str": sym.STR_T}[leaf.kind]
        return payload(base).map(lambda v: (None, v))
    choices = []
    for tag in leaf.tags:
        if tag == sym.ABSENT_T:
            choices.append(st.just((tag, ABSENT)))
        elif tag == sym.NULL_T:
            choices.append(st.just((tag, None)))
        else:
            choices.append(payload(tag).map(lambda v, t=tag: (t, v)))
    return st.one_of(*choices)


def template_value(leaf) -> tuple[Any, Any]:
    """``(tag, value)`` of the leaf's template value."""
    value = leaf.template
    if not leaf.optional:
        return None, value
    if value is ABSENT:
        return sym.ABSENT_T, ABSENT
    if value is None:
        return sym.NULL_T, None
    if isinstance(value, bool):
        return sym.BOOL_T, value
    if isinstance(value, int):
        return sym.INT_T, value
    if isinstance(value, float):
        return sym.FLOAT_T, value
    return sym.STR_T, value


# --------------------------------------------------------------------------------------------
# One input


def concrete_documents(shape: ParityShape, values: dict[int, tuple[Any, Any]]) -> list[tuple[str, Any]]:
    """``(file, JSON tree)`` of every document with the leaves' values put in."""
    by_id: dict[int, Any] = {}
    for index, leaf in enumerate(shape.leaves):
        tag, value = values.get(index, template_value(leaf))
        by_id[id(leaf.term)] = value
    out = []
    for (kind, file, _tree, _role), doc in zip(shape.documents, shape.symbolic):
        obj = _rebuild(doc.obj, by_id, SymValue)
        out.append((file, unstructure(obj)))
    return out


def _rebuild(value: Any, by_id: dict, symvalue: type) -> Any:
    if value is ABSENT or value is None:
        return value
    if id(value) in by_id and (isinstance(value, symvalue) or type(value).__module__.startswith("z3")):
        return by_id[id(value)]
    if isinstance(value, list):
        return [_rebuild(item, by_id, symvalue) for item in value]
    if isinstance(value, dict):
        return {key: _rebuild(item, by_id, symvalue) for key, item in value.items()}
    if attrs.has(type(value)):
        return type(value)(**{(f.alias or f.name): _rebuild(getattr(value, f.name), by_id, symvalue)
                              for f in attrs.fields(type(value))})
    return value


def _sort_kind(sort) -> str:
    if sort == z3.BoolSort():
        return "bool"
    if sort == z3.IntSort():
        return "int"
    if sort == z3.RealSort():
        return "real"
    return "str"


def _lift(value: Any, kind: str) -> Any:
    if kind == "bool":
        return z3.BoolVal(bool(value))
    if kind == "int":
        return z3.IntVal(int(value))
    if kind == "real":
        return z3.RealVal(Fraction(value))
    return exact_string(value)


def _variables(shape: ParityShape) -> list:
    """Per leaf: ``(var, kind)`` for a required leaf, ``(tag var, [(tag, var, kind)])`` for an
    optional one (cached on the shape)."""
    cached = getattr(shape, "_variables", None)
    if cached is not None:
        return cached

    out = []
    for leaf in shape.leaves:
        if not leaf.optional:
            var = z3.Const(leaf.var_names[0], leaf.term.sort())
            out.append((var, _sort_kind(var.sort())))
            continue
        payloads = []
        for payload_tag, term in leaf.payload.items():
            var = z3.Const(term.decl().name(), term.sort())
            payloads.append((payload_tag, var, _sort_kind(var.sort())))
        out.append((z3.Int(leaf.var_names[0]), payloads))
    shape._variables = out
    return out


@functools.cache  # pure memoization: the z3 default value of a sort kind (z3 terms are immutable)
def _default(kind: str) -> Any:
    return _lift({"bool": False, "int": 0, "real": 0, "str": ""}[kind], kind)


def _leaf_pairs(shape: ParityShape, index: int, tag: Any, value: Any) -> list[tuple[Any, Any]]:
    """(z3 constant, z3 value) for the variables of one leaf."""
    leaf, variables = shape.leaves[index], _variables(shape)[index]
    if not leaf.optional:
        var, kind = variables
        return [(var, _lift(value, kind))]
    tag_var, payloads = variables
    return [(tag_var, z3.IntVal(tag))] + [
        (var, _lift(value, kind) if payload_tag == tag else _default(kind)) for payload_tag, var, kind in payloads]


def _template_model(shape: ParityShape):
    """A z3 model holding every leaf's template value (cached on the shape)."""
    model = getattr(shape, "_model", None)
    if model is None:
        model = z3.Model()
        for index, leaf in enumerate(shape.leaves):
            for var, value in _leaf_pairs(shape, index, *template_value(leaf)):
                model.update_value(var, value)
        shape._model = model
    return model


def _show(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    return json.dumps(value, ensure_ascii=True)


@attrs.define
class InputResult:
    mismatches: list[Mismatch] = attrs.field(factory=list)
    instances: int = 0
    loaded: bool = True
    #: ``(rule ID, subject, concrete verdict, z3 verdict)`` of every instance compared.
    verdicts: list[tuple[str, str, bool, bool | None]] = attrs.field(factory=list)


def compare(shape: ParityShape, values: dict[int, tuple[Any, Any]], rules: list[Rule]) -> InputResult:
    """Evaluate every rule instance of the shape both ways on one input."""
    result = _compare(shape, values, rules)
    for mismatch in result.mismatches:
        mismatch.values, mismatch.shape_ref = dict(values), shape
    return result


def _compare(shape: ParityShape, values: dict[int, tuple[Any, Any]], rules: list[Rule]) -> "InputResult":
    result = InputResult()
    trees = concrete_documents(shape, values)
    changed = [f"{shape.leaves[i].name} = {_show(values[i][1])}" for i in sorted(values)]
    try:
        documents = tuple(load_documents(trees, VIRTUAL_DIR, [role for _k, _f, _t, role in shape.documents]))
    except InputError as exc:
        result.loaded = False
        result.mismatches.append(Mismatch("LD", "unloadable", shape.name, "; ".join(d.render() for d in exc.diagnostics[:3]),
                                          documents=trees, changed=changed))
        return result
    solver_terms = []
    for rule in rules:
        encoded = shape.encoded.get(rule.id)
        if isinstance(encoded, str):
            continue
        concrete = []
        try:
            for file, target in targets(rule, documents):
                for instance in rule.over(target):
                    concrete.append((instance_key(instance, file), instance))
        except Exception as exc:  # noqa: BLE001 - a binding that crashes on a loadable document
            result.mismatches.append(Mismatch(rule.id, "crash", shape.name, f"binding raised {type(exc).__name__}: {exc}",
                                              documents=trees, changed=changed))
            continue
        symbolic = [((f, s, b, n), term) for f, s, b, n, term in encoded]
        pairs, extra_symbolic, extra_concrete = _match(concrete, symbolic)
        if extra_concrete:
            result.mismatches.append(Mismatch(rule.id, "binding", shape.name,
                                              f"{len(extra_concrete)} concrete instance(s) without a symbolic one, "
                                              f"e.g. {extra_concrete[0][0][1]}", documents=trees, changed=changed))
        for key, instance, term in pairs:
            try:
                verdict = concrete_bool(rule.holds(instance))
            except Exception as exc:  # noqa: BLE001 - reported as a crash of the body
                result.mismatches.append(Mismatch(rule.id, "crash", shape.name,
                                                  f"body raised {type(exc).__name__}: {exc}", key[1], key[0],
                                                  documents=trees, changed=changed))
                continue
            solver_terms.append((rule, key, verdict, term))
        for key, term in extra_symbolic:
            solver_terms.append((rule, key, True, term))
        result.instances += len(pairs)
    if solver_terms:
        evaluated = _evaluate(shape, values, [t for _, _, _, t in solver_terms])
        for (rule, key, verdict, _term), value in zip(solver_terms, evaluated):
            result.verdicts.append((rule.id, key[1], verdict, value))
            if value is None:
                result.mismatches.append(Mismatch(rule.id, "undetermined", shape.name,
                                                  "the z3 verdict is not determined by the input's values", key[1],
                                                  key[0], concrete=verdict, documents=trees, changed=changed))
            elif value != verdict:
                result.mismatches.append(Mismatch(rule.id, "mismatch", shape.name,
                                                  f"concrete {'holds' if verdict else 'fails'}, z3 "
                                                  f"{'holds' if value else 'fails'}", key[1], key[0],
                                                  concrete=verdict, symbolic=value, documents=trees, changed=changed))
    return result


def _match(concrete: list, symbolic: list) -> tuple[list, list, list]:
    """Pair instances by (file, subject, blame) in order; within a group of unequal sizes by the
    instances' string placeholders."""
    groups_c: dict[tuple, list] = {}
    groups_s: dict[tuple, list] = {}
    for key, instance in concrete:
        groups_c.setdefault(key[:3], []).append((key, instance))
    for key, term in symbolic:
        groups_s.setdefault(key[:3], []).append((key, term))
    pairs, extra_s, extra_c = [], [], []
    for group, items in groups_c.items():
        mine = groups_s.get(group, [])
        if len(mine) == len(items):
            pairs += [(key, instance, term) for (key, instance), (_k, term) in zip(items, mine)]
            continue
        by_names: dict[tuple, list] = {}
        for key, term in mine:
            by_names.setdefault(key[3], []).append(term)
        for key, instance in items:
            options = by_names.get(key[3])
            if options:
                pairs.append((key, instance, options.pop(0)))
            else:
                extra_c.append((key, instance))
        extra_s += [((group[0], group[1], group[2], names), term) for names, terms in by_names.items() for term in terms]
    for group, mine in groups_s.items():
        if group not in groups_c:
            extra_s += mine
    return pairs, extra_s, extra_c


def _evaluate(shape: ParityShape, values: dict, terms: list) -> list[bool | None]:
    """Each term's truth value under the input (None when it is not a constant): the template
    model, with the changed leaves' variables updated (and restored afterwards), evaluates every
    term in z3's own evaluator."""
    model = _template_model(shape)
    changed = [pair for index, (tag, value) in values.items() for pair in _leaf_pairs(shape, index, tag, value)]
    restore = [pair for index in values for pair in _leaf_pairs(shape, index, *template_value(shape.leaves[index]))]
    for var, value in changed:
        model.update_value(var, value)
    try:
        out = []
        for term in terms:
            value = model.eval(term, model_completion=True)
            if z3.is_true(value):
                out.append(True)
            elif z3.is_false(value):
                out.append(False)
            else:
                value = z3.simplify(value)
                out.append(True if z3.is_true(value) else False if z3.is_false(value) else None)
        return out
    finally:
        for var, value in restore:
            model.update_value(var, value)


# --------------------------------------------------------------------------------------------
# The campaign


@attrs.define
class ParityReport:
    examples: int = 0
    instances: int = 0
    shapes: list[str] = attrs.field(factory=list)
    shape_seconds: float = 0.0
    seconds: float = 0.0
    #: First mismatch per (rule, kind[, shape]).
    mismatches: list[Mismatch] = attrs.field(factory=list)
    counts: dict[str, int] = attrs.field(factory=dict)
    #: rule ID -> number of instances compared
    compared: dict[str, int] = attrs.field(factory=dict)
    unloadable: int = 0
    stale_known: list[str] = attrs.field(factory=list)

    @property
    def failures(self) -> list[Mismatch]:
        return [m for m in self.mismatches if m.known is None]

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    def never_compared(self, rules: Iterable[Rule]) -> list[str]:
        return [rule.id for rule in rules if not self.compared.get(rule.id)]

    def summary(self) -> dict:
        return {"examples": self.examples, "instances": self.instances, "shapes": len(self.shapes),
                "mismatches": len(self.failures), "known": sum(1 for m in self.mismatches if m.known),
                "unloadable_inputs": self.unloadable, "seconds": round(self.seconds, 2),
                "shape_seconds": round(self.shape_seconds, 2), "examples_per_second": round(self.rate, 1)}


def known_id(mismatch: Mismatch) -> str | None:
    for known in KNOWN_PARITY:
        if known.matches(mismatch):
            return known.id
    return None


def _record(report: ParityReport, mismatch: Mismatch) -> None:
    mismatch.known = known_id(mismatch)
    key = mismatch.key()
    report.counts[str(key)] = report.counts.get(str(key), 0) + 1
    for index, existing in enumerate(report.mismatches):
        if existing.key() == key:
            if len(mismatch.changed) < len(existing.changed):
                report.mismatches[index] = mismatch  # keep the smallest example
            return
    report.mismatches.append(mismatch)


def input_strategy(shapes: list[ParityShape]):
    """A Hypothesis strategy of ``(shape index, {leaf index: (tag, value)})``: usually one to three
    leaves changed, sometimes many."""
    @st.composite
    def draw(draw_):
        index = draw_(st.integers(0, len(shapes) - 1))
        shape = shapes[index]
        count = len(shape.leaves)
        values: dict[int, tuple] = {}
        if count:
            mode = draw_(st.sampled_from(["few", "few", "few", "many"]))
            if mode == "few":
                chosen = draw_(st.lists(st.integers(0, count - 1), min_size=0, max_size=3, unique=True))
            else:
                chosen = [i for i in range(count) if draw_(st.integers(0, 3)) == 0]
            for leaf_index in sorted(chosen):
                values[leaf_index] = draw_(value_strategy(shape.leaves[leaf_index]))
        return index, values

    return draw()


def run_parity(shapes: list[ParityShape], rules: list[Rule], examples: int, seed: int,
               progress=None) -> ParityReport:
    """``examples`` Hypothesis-drawn inputs over the shapes (deterministic for a seed)."""
    report = ParityReport(shapes=[s.name for s in shapes], shape_seconds=sum(s.seconds for s in shapes))
    for shape in shapes:
        for rule in rules:
            encoded = shape.encoded.get(rule.id)
            if isinstance(encoded, str):
                _record(report, Mismatch(rule.id, "error", shape.name, f"no z3 verdict: {encoded}"))
    start = time.perf_counter()
    if shapes and examples > 0:
        @hypothesis_seed(seed)
        @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None,
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(input_strategy(shapes))
        def run(drawn) -> None:
            index, values = drawn
            one_input(report, shapes[index], values, rules)
            if progress is not None:
                progress(report.examples, examples)

        run()
    report.seconds = time.perf_counter() - start
    by_id = {rule.id: rule for rule in rules}
    report.mismatches = [minimize(m, by_id) for m in report.mismatches]
    _stale_known(report)
    return report


def one_input(report: ParityReport, shape: ParityShape, values: dict, rules: list[Rule]) -> InputResult:
    result = compare(shape, values, rules)
    report.examples += 1
    report.instances += result.instances
    if not result.loaded:
        report.unloadable += 1
    for mismatch in result.mismatches:
        _record(report, mismatch)
    for rule in rules:
        encoded = shape.encoded.get(rule.id)
        if isinstance(encoded, list) and encoded and result.loaded:
            report.compared[rule.id] = report.compared.get(rule.id, 0) + len(encoded)
    return result


def minimize(mismatch: Mismatch, rules_by_id: dict[str, Rule]) -> Mismatch:
    """Revert the input's changed leaves one by one to their template values while the same rule
    still shows the same kind of difference (a greedy one-minimal input)."""
    shape, values = mismatch.shape_ref, dict(mismatch.values)
    rule = rules_by_id.get(mismatch.rule)
    if shape is None or rule is None or not values or mismatch.kind in ("error",):
        return mismatch
    best = mismatch
    target = known_id(mismatch)
    for index in sorted(values):
        trial = {k: v for k, v in values.items() if k != index}
        found = [m for m in compare(shape, trial, [rule]).mismatches
                 if m.rule == mismatch.rule and m.kind == mismatch.kind and known_id(m) == target]
        if found:
            values = trial
            best = found[0]
    best.known = known_id(best)
    return best


def _stale_known(report: ParityReport) -> None:
    seen = {m.known for m in report.mismatches if m.known}
    report.stale_known = sorted({k.id for k in KNOWN_PARITY} - seen)
