"""``kvproof prove``: every rule reachable (with a witness the concrete checker refuses with
that rule first), dead within the shape bound (with an unsat core of rule IDs and axiom names), or
unknown; and ``--redundant``: the rules the others imply.

The search for one rule walks its candidate shapes smallest first (:mod:`kvproof.solver.shapes`):
the base shapes of the document kinds its binding reads, then their one-edit structural
mutations. Sessions (one solver per shape) are shared by every rule, so the prefix of rules grows
incrementally in registry order.

*Reachable* means: a document set in which every instance of every rule before R holds and some
instance of R fails. The checker's prerequisite suppression cannot hide the first failing instance
(only a failure that is already reported suppresses anything), so the first diagnostic of such a
witness is R's; the round trip through the cattrs codec, the strict loader and
:func:`kvproof.rules.check.check` confirms it, and a witness it does not confirm fails the run.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import attrs

from ..models.codec import dumps
from ..rules.core import Rule
from ..rules.registry import all_rules
from .calls import Config
from .core_check import session_question
from .pins import DEFAULT_PINS
from .session import Session
from .shapes import Bound, Shape, alternatives as shape_alternatives, base_shapes, mutations, no_shapes_reason, relevance
from .symbolic import collect_consts, per_conjunct
from .verdicts import Outcome
from .witnesses import replay, replay_refusal

__all__ = ["Prover", "RuleResult", "Redundancy", "VERDICTS", "job_groups"]

VERDICTS = ("reachable", "dead", "unknown", "mismatch", "error")

#: The document kinds of the base shapes (:func:`kvproof.solver.shapes.base_shapes`).
SHAPE_KINDS = ("profile", "worker", "scheduler", "bundle")


@attrs.define
class RuleResult:
    rule: str
    verdict: str
    expect: str
    witness: str | None = None
    core: list[str] = attrs.field(factory=list)
    seconds: float = 0.0
    shape: str | None = None
    shapes_tried: int = 0
    reason: str = ""
    documents: list[tuple[str, str]] = attrs.field(factory=list)  # (file, canonical text) of the witness
    changed: list[str] = attrs.field(factory=list)  # template fields the witness changed
    #: Earlier rules whose concrete verdict differed from their symbolic one on a candidate witness.
    gaps: list[str] = attrs.field(factory=list)
    first_rule: str | None = None
    #: A dead verdict's proof, shape by shape: ``(shape, pins it was built with, unsat core labels,
    #: the core's question)`` of every shape whose question was unsat (the proof cache stores it and
    #: re-checks it on a hit); the question (:func:`~kvproof.solver.core_check.session_question`)
    #: only when the prover keeps proofs, else None.
    steps: list = attrs.field(factory=list, eq=False, repr=False)
    #: The stored form of ``steps`` (:func:`~kvproof.solver.core_check.proof_payload`), made where
    #: the rule was proved when the run keeps a proof cache; None: not made; False: not storable.
    proof: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def contrary(self) -> bool:
        if self.verdict in ("mismatch", "error"):
            return True
        return self.verdict in ("reachable", "dead") and self.verdict != self.expect

    def to_json(self, timings: bool = False) -> dict:
        """The report entry; ``timings`` adds ``seconds`` (the clock: it differs run to run, so
        only on request, ``--timings``)."""
        out = {
            "rule": self.rule, "verdict": self.verdict, "expect": self.expect, "witness": self.witness,
            "core": self.core, "shape": self.shape,
            "shapes_tried": self.shapes_tried, "reason": self.reason, "changed": self.changed,
            "gaps": self.gaps,
            "core_rules": [c for c in self.core if ":" not in c.split(" ")[0]],
        }
        if timings:
            out["seconds"] = round(self.seconds, 3)
        return out


@attrs.define
class Redundancy:
    rule: str
    verdict: str  # redundant | needed | unknown
    implied_by: list[str] = attrs.field(factory=list)
    seconds: float = 0.0
    shape: str | None = None
    reason: str = ""
    #: SHAPE:pin entries of the cores (small-domain values held to keep the query linear)
    pinned: int = 0

    def to_json(self, timings: bool = False) -> dict:
        out = {"rule": self.rule, "verdict": self.verdict, "implied_by": self.implied_by,
               "shape": self.shape, "reason": self.reason, "pinned": self.pinned}
        if timings:
            out["seconds"] = round(self.seconds, 3)
        return out


class Prover:
    """Shared state of one ``prove`` run: the rules, the shapes, the sessions."""

    def __init__(self, rules: list[Rule] | None = None, bound: Bound | None = None, config: Config | None = None,
                 examples: Path | None = None):
        if rules is None:
            rules = all_rules()
        self.rules = rules
        self.bound = bound or Bound()
        self.config = config or Config()
        self.examples = examples
        #: the closed pins of each document kind's base shapes (:meth:`pins_of`), built lazily
        self._pins: dict[str, set[str]] = {}
        self.sessions: dict[str, Session] = {}
        self._bases: dict[str, list[Shape]] = {}
        self._kind_of: dict[str, str] = {}  # base shape name -> its kind (whose pins it shares)
        self._repaired: dict[str, Shape] = {}
        self._alternatives: dict | None = None
        #: answers of slice questions by their z3 terms, shared by every session (the terms are
        #: kept alive with them, so their ids are never reused)
        self.slice_cache: dict = {}
        #: A dead verdict's steps also keep each core's question, taken from the session that
        #: answered it (the proof cache writes them; ``prove --cache``). Never changes a result.
        self.keep_proofs = False
        self._rules_by_id = {r.id: r for r in rules}

    # -- shapes -----------------------------------------------------------------------------
    def alternatives(self) -> dict:
        if self._alternatives is None:
            self._alternatives = shape_alternatives(self.examples)
        return self._alternatives

    def bases(self, kind: str) -> list[Shape]:
        if kind not in self._bases:
            self._bases[kind] = base_shapes(kind, self.bound, self.examples)
            for shape in self._bases[kind]:
                self._kind_of.setdefault(shape.key(), kind)
        return self._bases[kind]

    @property
    def closed_kinds(self) -> list[str]:
        """The kinds whose pins are closed (in the order they were)."""
        return list(self._pins)

    @property
    def pins(self) -> set[str]:
        """Every pin closed so far, of every kind (for people and tests)."""
        return set().union(DEFAULT_PINS, *self._pins.values())

    def shapeless(self, kinds: Iterable[str]) -> str | None:
        """None when some base shape of ``kinds`` exists; else why none does. A search over no
        shape proves nothing: its verdict is ``unknown`` with this reason (``prove``, ``claim``)."""
        kinds = list(kinds)
        if any(self.bases(kind) for kind in kinds):
            return None
        return no_shapes_reason(kinds, self.examples)

    def candidates(self, rule: Rule, pairs: bool = False) -> Iterable[Shape]:
        """Base shapes of the rule's kinds (smallest first), then mutations of the smallest.
        ``pairs``: only the mutations of the two-group base shapes (for a rule that is
        structural in every one-group shape: its failure needs two groups that differ)."""
        kinds = list(rule.over.kinds)
        bases: list[Shape] = []
        for kind in kinds:
            bases += self.bases(kind)
        bases.sort(key=lambda s: s.size)
        if not pairs:
            yield from bases
        if self.bound.mutations:
            seeds = _pair_seeds(bases) if pairs else _mutation_seeds(bases)
            for base in seeds:
                session = self.session(base)
                encoded = session.encode(rule)
                paths = list(encoded.subjects)
                if encoded.terms:
                    names = per_conjunct(collect_consts, encoded.terms)
                    paths += [leaf.path for leaf in session.leaves() if any(n in names for n in leaf.var_names)]
                mutated = mutations(self.repaired(base), self.pins_of(self._kind_of[base.key()]), self.alternatives())
                mutated.sort(key=lambda s: (-relevance(s.edit, paths), s.size))
                yield from mutated[: self.bound.mutations]

    def close_pins(self, kinds: Iterable[str] = SHAPE_KINDS) -> None:
        """Close the pins of these kinds now (before a fork, so the processes inherit them)."""
        for kind in kinds:
            self.pins_of(kind)

    def pins_of(self, kind: str) -> set[str]:
        """The pins of a kind's base shapes: learned once, before the first question on that
        kind, by encoding every rule on every base shape of the kind (in one fixed order) until
        no new pin appears. A shape's formulas then depend on its kind's shapes alone: not on
        which rules were asked before, nor which were requested (``prove PF001`` closes the
        profile shapes only), nor which process asks (``--jobs``)."""
        pins = self._pins.get(kind)
        if pins is not None:
            return pins
        pins = self._pins[kind] = set(DEFAULT_PINS)
        for _round in range(50):
            before = set(pins)
            # largest first: its pins are (nearly always) those of the smaller shapes too, so
            # these are built once, with them (a pin learned late rebuilds what was built before)
            for shape in sorted(self.bases(kind), key=lambda s: (-s.size, s.name)):
                session = self._session(shape, pins, keep=True)
                if session.built_pins != pins:
                    session.rebuild()  # a pin learned on a later shape: encode this one again
                session.encode_all()
            if pins == before:
                break
        return pins

    def session(self, shape: Shape, keep: bool = True) -> Session:
        """The session of a base shape (kept, built with its kind's closed pins), or a fresh
        one for a mutation (``keep=False``) that starts from its base's pins and keeps what it
        learns to itself."""
        kind = self._kind_of.get(shape.parent or shape.key())
        if kind is None:
            raise KeyError(f"not a shape of this prover: {shape.name}")
        pins = self.pins_of(kind)
        return self._session(shape, pins if keep else set(pins), keep)

    def _session(self, shape: Shape, pins: set[str], keep: bool) -> Session:
        session = self.sessions.get(shape.key()) if keep else None
        if session is None:
            session = Session(shape, self.rules, self.config, pins)
            session.cache = self.slice_cache
            if keep:
                self.sessions[shape.key()] = session
        return session

    def repaired(self, shape: Shape) -> Shape:
        """The shape with template values that pass every rule (mutations start from it)."""
        if shape.key() not in self._repaired:
            trees = self.session(shape).repaired_templates()
            documents = tuple((kind, file, tree) for (kind, file, _), tree in zip(shape.documents, trees))
            self._repaired[shape.key()] = attrs.evolve(shape, documents=documents)
        return self._repaired[shape.key()]

    # -- one rule ---------------------------------------------------------------------------
    def prove(self, rule: Rule) -> RuleResult:
        """The verdict of one rule. The shapes are searched in one fixed order by one process
        (the cores of earlier shapes steer the later questions), so the result does not depend
        on ``--jobs``."""
        start = time.perf_counter()
        result = RuleResult(rule.id, "dead", rule.expect)
        cores: set[str] = set()  # the labels of every unsat core so far
        hints: list[tuple[frozenset, bool]] = []  # the rule sets of earlier cores, latest first
        unknown: list[str] = []
        errors: list[str] = []
        tried = 0
        instances = 0
        asked = 0
        seen: dict = {}
        steps: list = []
        for pairs in (False, True):
            if pairs and (asked or result.verdict != "dead" or errors):
                break  # the two-group mutations only for a rule no one-group shape could ask about
            for shape in self.candidates(rule, pairs=pairs):
                tried += 1
                is_base = shape.parent is None
                session = self.session(shape, keep=is_base)
                goal, early = session.goal(rule)
                if early is None or early.status != "vacuous":
                    instances += 1
                if early is not None and early.status in ("trivial", "vacuous"):
                    continue
                asked += 1
                session.known_core = frozenset(c for c in cores if c in session.order)
                try:
                    outcome = session.reach(rule, free_first=bool(cores) or rule.expect == "dead", hints=hints, seen=seen)
                finally:
                    session.known_core = frozenset()
                if outcome.status == "sat":
                    self._witness(rule, session, outcome, result)
                    if result.verdict == "mismatch":
                        self._refine(rule, session, result)
                    break
                if outcome.status == "unsat":
                    cores.update(c for c in outcome.core if not c.startswith("goal:"))
                    _add_hint(hints, outcome.core, session.order)
                    pins, core = sorted(session.built_pins), list(outcome.core)
                    question = session_question(session, rule, self._rules_by_id, set(pins), core) if self.keep_proofs \
                        else None
                    steps.append((shape, pins, core, question))
                elif outcome.status == "unknown":
                    unknown.append(f"{shape.name}: {outcome.reason}")
                elif outcome.status == "error":
                    errors.append(outcome.reason)
                    break
        result.shapes_tried = tried
        if result.verdict == "dead":
            if errors:
                result.verdict = "error"
                result.reason = f"the rule body cannot be evaluated on symbolic documents: {errors[0]}"
            elif unknown:
                result.verdict = "unknown"
                result.reason = f"{len(unknown)} shape(s) unknown, first: {unknown[0]}"
            elif not tried:
                result.verdict = "unknown"  # dead over no shape would be vacuous
                result.reason = self.shapeless(rule.over.kinds) or "no shapes"
            elif not instances:
                result.verdict = "unknown"  # dead over no instance would be vacuous
                result.reason = f"no instance of the rule in any shape within {self.bound.label()} ({tried} shapes)"
            elif not [c for c in cores if not c.startswith("goal:")]:
                # dead with no rule and no axiom in any core: the shapes alone decide it
                result.reason = (f"holds by the structure of every shape within {self.bound.label()} ({tried} "
                                 "shapes): no shape of the bound can make it fail")
            else:
                result.core = sorted(set(cores), key=_core_key)
                result.reason = f"unsat in every shape within {self.bound.label()} ({tried} shapes)"
            if result.verdict == "dead":
                result.steps = steps
        result.seconds = time.perf_counter() - start
        return result

    def _refine(self, rule: Rule, session: Session, result: RuleResult, rounds: int = 3) -> None:
        """A witness the concrete checker refuses with an earlier rule Q first shows a place
        where Q's symbolic and concrete verdicts differ (a semantic gap, reported in
        ``result.gaps``). Ask again with the leaves Q reads kept at their template values."""
        force: set[str] = set()
        for _ in range(rounds):
            culprit = result.first_rule
            if culprit is None or culprit == rule.id or culprit not in session.order:
                return
            result.gaps.append(culprit)
            encoded = session.encode(self._rule(culprit))
            if not encoded.terms:
                return
            names = collect_consts(encoded.terms)
            force |= {leaf.name for leaf in session.active if any(n in names for n in leaf.var_names)}
            outcome = session.reach(rule, force=force)
            if outcome.status != "sat":
                return
            self._witness(rule, session, outcome, result)
            if result.verdict == "reachable":
                return

    def _rule(self, rule_id: str) -> Rule:
        return next(r for r in self.rules if r.id == rule_id)

    def _witness(self, rule: Rule, session: Session, outcome: Outcome, result: RuleResult) -> None:
        result.shape = session.shape.name
        result.changed = [name.removeprefix("pin ") for name in outcome.released]
        try:
            trees = session.trees(outcome.model)
        except Exception as exc:  # noqa: BLE001 - a model that does not concretize is a solver bug to report
            result.verdict = "mismatch"
            result.reason = f"the model does not concretize: {type(exc).__name__}: {exc}"
            return
        result.documents = [(file, dumps(tree)) for _, file, tree in trees]
        verdict, reason, first = replay_refusal(rule.id, result.documents, self.rules)
        result.verdict = verdict
        result.reason = reason
        result.first_rule = first

    # -- redundancy ---------------------------------------------------------------------------
    def redundancy(self, rule: Rule) -> Redundancy:
        """Is ``rule`` implied by the others within the bound? ``needed`` comes with a document
        the concrete checker refuses with that rule alone. An implication that needed
        small-domain values held (``SHAPE:pin`` in a core, as for a dead rule) is ``redundant``
        with ``pinned`` counting those pins and the reason saying so. A rule no shape of the
        bound can ask about (every shape vacuous, or another rule fails by structure) tries the
        two-group mutations as :meth:`prove` does, and is ``unknown`` if none can either."""
        start = time.perf_counter()
        cores: list[str] = []
        hints: list[tuple[frozenset, bool]] = []
        structural: list[str] = []
        unknown: list[str] = []
        gaps: list[str] = []
        seen: dict = {}
        out = Redundancy(rule.id, "redundant")
        asked = 0
        candidates = [(position, shape) for position, shape in enumerate(self.candidates(rule))]
        for _position, shape in _then_pairs(self, rule, candidates, lambda: asked or out.verdict != "redundant"):
            is_base = shape.parent is None
            session = self.session(shape, keep=is_base)
            _goal, early = session.goal(rule)
            if early is not None and early.status in ("trivial", "vacuous"):
                continue
            asked += 1
            outcome = session.implied(rule, hints=hints, seen=seen)
            if outcome.status == "duplicate":
                continue
            if outcome.status == "trivial":
                structural += outcome.core  # another rule fails by this shape's structure whenever this one can
                continue
            force: set[str] = set()
            for _round in range(4):
                if outcome.status != "sat":
                    break
                documents = [(file, dumps(tree)) for _, file, tree in session.trees(outcome.model)]
                refused = replay(documents, "witness", self.rules).refusing
                if refused == {rule.id}:
                    out.verdict, out.shape = "needed", shape.name
                    break
                others = [r for r in self.rules if r.id in refused and r.id != rule.id and r.id in session.order]
                if not others:
                    gaps.append(f"{shape.name}: the checker refuses the candidate with {sorted(refused) or 'nothing'}")
                    break
                names = collect_consts([t for r in others for t in (session.encode(r).terms or [])])
                force |= {leaf.name for leaf in session.active if any(n in names for n in leaf.var_names)}
                outcome = session.implied(rule, force=force)
            else:
                gaps.append(f"{shape.name}: no candidate the checker confirms")
            if out.verdict == "needed":
                break
            if outcome.status == "unsat" and not force:
                cores += [c for c in outcome.core if not c.startswith("goal:")]
                _add_hint(hints, outcome.core, session.order)
            elif outcome.status == "unsat":
                gaps.append(f"{shape.name}: every candidate is refused by other rules concretely")
            elif outcome.status == "unknown":
                unknown.append(f"{shape.name}: {outcome.reason}")
            elif outcome.status == "error":
                out.verdict, out.reason = "unknown", outcome.reason
                break
        if out.verdict == "redundant":
            pinned = sorted({c for c in cores if c.startswith("SHAPE:pin ")})
            if unknown or gaps:
                out.verdict, out.reason = "unknown", (unknown or gaps)[0]
            elif not asked:
                out.verdict = "unknown"
                out.reason = "no shape of the bound can ask: the rule has no instance, or another rule fails by structure"
            else:
                # the rules of the unsat cores; when every shape was decided by structure, the
                # rules that failed by it
                out.implied_by = sorted({c for c in (cores or structural) if not c.startswith("SHAPE:pin ")},
                                        key=_core_key)
                out.pinned = len(pinned)
                if pinned:
                    out.reason = (f"implied with small-domain values held where the query is nonlinear ({len(pinned)} "
                                  f"SHAPE:pin, e.g. {pinned[0]})")
        out.seconds = time.perf_counter() - start
        return out


#: The rules of a kind whose pins cost at most this share of a run's estimate are spread one by one
#: over whichever process is free (their pins are cheap to close twice): the profile kind's.
FILLER_SHARE = 0.01


def job_groups(prover: "Prover", rules: list[Rule], jobs: int) -> list[list[Rule]]:
    """The rules split into units for at most ``jobs`` processes, in the order to submit them. A
    process closes the pins of the kinds its rules read itself, lazily (:meth:`Prover.pins_of`):
    closing them is a large part of a kind's cost (the bundle kind encodes every rule on its 115
    base shapes), which a parent closing every kind before it forks paid serially, and which two
    processes sharing a kind both pay. Only the balance depends on this split, never a result: a
    rule's result is a function of its kinds' shapes and pins alone.

    The rules that read the same kinds form one item. Items are packed largest first into one
    unit per process, each where it adds least, counting the pins of each kind the unit does not
    close yet; those units come first, the ones holding a rule expected dead before the others.
    The rules of items whose pins are cheap (:data:`FILLER_SHARE` of the whole estimate) follow,
    one unit each, largest first: a process that finishes its unit early takes them, which evens
    out what the estimate gets wrong. The estimate is in units of template size (about 0.17 ms of
    one core each, measured on the bundle kind's pins): closing a kind costs its base shapes'
    size; a rule expected dead walks every shape and ``mutations`` mutations of its seeds (about
    ``mutations / 10`` times that); any other rule about three of its kinds' average base shapes
    (``prove --all --timings``: most are found on the first shapes, a few walk hundreds)."""
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}

    def size(kinds) -> int:
        for kind in kinds:
            if kind not in sizes:
                bases = prover.bases(kind)
                sizes[kind], counts[kind] = sum(shape.size for shape in bases), len(bases)
        return sum(sizes[kind] for kind in kinds)

    def cost(rule: Rule) -> int:
        kinds = rule.over.kinds
        if rule.expect == "dead":
            return size(kinds) * max(1, prover.bound.mutations // 10)
        shapes = sum(counts[kind] for kind in kinds) if size(kinds) else 0
        return 3 * size(kinds) // max(1, shapes)

    order = {rule.id: index for index, rule in enumerate(prover.rules)}
    items: dict[tuple[str, ...], list[Rule]] = {}
    for rule in rules:
        items.setdefault(tuple(sorted(rule.over.kinds)), []).append(rule)
    weights = {kinds: sum(cost(rule) for rule in members) for kinds, members in items.items()}
    total = sum(weights.values()) + size({kind for kinds in items for kind in kinds})
    fillers = [kinds for kinds in items if jobs > 1 and len(items) > 1 and size(kinds) <= FILLER_SHARE * total]
    ordered = sorted((kinds for kinds in items if kinds not in fillers),
                     key=lambda kinds: (-weights[kinds], order[items[kinds][0].id]))
    bins: list[tuple[int, set[str], list[Rule]]] = [(0, set(), []) for _ in range(min(jobs, len(ordered)))]
    for kinds in ordered:
        def added(index: int) -> int:
            return weights[kinds] + size(set(kinds) - bins[index][1])

        index = min(range(len(bins)), key=lambda i: (bins[i][0] + added(i), i))
        load, closed, group = bins[index]
        bins[index] = (load + added(index), closed | set(kinds), group + items[kinds])
    units = [sorted(group, key=lambda r: order[r.id]) for _, _, group in bins if group]
    units.sort(key=lambda unit: all(rule.expect != "dead" for rule in unit))  # the long poles first
    spread = sorted((rule for kinds in fillers for rule in items[kinds]), key=lambda r: (-cost(r), order[r.id]))
    return units + [[rule] for rule in spread]


def _then_pairs(prover: "Prover", rule: Rule, candidates: list, done) -> Iterable[tuple[int, Shape]]:
    """The candidates, then (when ``done()`` is false) the two-group mutations, numbered on."""
    yield from candidates
    if done():
        return
    offset = len(candidates)
    for position, shape in enumerate(prover.candidates(rule, pairs=True)):
        yield offset + position, shape


def _pair_seeds(bases: list[Shape]) -> list[Shape]:
    """The two-group record base shapes (per example and selection, the one with the most
    layers), smallest first."""
    seeds: dict[str, Shape] = {}
    for shape in bases:
        if shape.seed_key is not None or shape.parent is not None or not re.search(r"groups\[\d+, \d+\]", shape.name):
            continue
        if shape.name.startswith(("probe ", "bundle+profile ")):
            continue
        key = re.sub(r" layers<=\d+", "", shape.name)
        if key not in seeds or shape.size > seeds[key].size:
            seeds[key] = shape
    return sorted(seeds.values(), key=lambda s: s.size)


def _mutation_seeds(bases: list[Shape]) -> list[Shape]:
    """The base shapes whose mutations are tried: per example, document set and single-group
    selection, the one with the most layers (a profile: the one-group shapes)."""
    seeds: dict[tuple, Shape] = {}
    for shape in bases:
        if shape.seed_key is None:
            continue
        if shape.seed_key not in seeds or shape.size > seeds[shape.seed_key].size:
            seeds[shape.seed_key] = shape
    return sorted(seeds.values(), key=lambda s: s.size)


def _add_hint(hints: list, core: list[str], order: dict) -> None:
    """Remember the rule set of an unsat core (latest first, no repeats)."""
    entry = (frozenset(c for c in core if c in order), any(c.startswith("SHAPE:pin ") for c in core))
    if entry in hints:
        hints.remove(entry)
    hints.insert(0, entry)
    del hints[8:]


def _core_key(name: str) -> tuple:
    return (0 if ":" not in name.split(" ")[0] else 1, name)


def summary_line(result: RuleResult, timings: bool = False) -> str:
    head = f"{result.rule}  {result.verdict:<9} (expect {result.expect})"
    if timings:
        head += f"  {result.seconds:6.2f}s"
    if result.verdict == "reachable":
        return f"{head}  shape: {result.shape}" + (f"  witness: {result.witness}" if result.witness else "")
    if result.verdict == "dead":
        if not result.core:  # by structure alone: the reason says so
            return f"{head}  {result.reason}"
        return f"{head}  core: {core_text(result.core)}"
    return f"{head}  {result.reason}"


def core_text(core: list[str]) -> str:
    """A core for people: its rules, then its axioms counted by kind, e.g.
    ``BO007, BO008, BO009 + SHAPE:pin ×72 (block_size, shape) + LD:int-range ×4`` or
    ``loader axioms only (LD:signed-range ×3)``."""
    rules = [c for c in core if ":" not in c.split(" ")[0] and not c.startswith("goal:")]
    axioms = [c for c in core if c not in rules and not c.startswith("goal:")]
    kinds = Counter(c.split(" ")[0] for c in axioms)
    parts = []
    for kind in sorted(kinds, key=lambda k: (k != "SHAPE:pin", k)):
        text = f"{kind} ×{kinds[kind]}"
        if kind == "SHAPE:pin":
            fields = sorted({re.sub(r"\[\d+\]$", "", c.split(" ")[1].split(" = ")[0]).rsplit(".", 1)[-1]
                             for c in axioms if c.startswith("SHAPE:pin ")})
            text += f" ({', '.join(fields)} held)"
        parts.append(text)
    if not rules:
        if not parts:
            return "(structure)"
        only = "loader axioms only" if all(k.startswith("LD:") for k in kinds) else "axioms only"
        return f"{only} ({', '.join(parts)})"
    return ", ".join(rules) + "".join(f" + {p}" for p in parts)


def to_json(results: list[RuleResult], timings: bool = False) -> str:
    return json.dumps({"rules": [r.to_json(timings) for r in results]}, indent=2) + "\n"
