"""A session: one shape's symbolic documents, its encoded rules and its solver.

A :class:`Session` builds the symbolic documents of a shape, encodes every rule's binding and
body on them (:func:`kvproof.solver.encode.encode_rule`: a leaf read in Python control flow is
*pinned* to its template value and the shape built again, :mod:`kvproof.solver.pins`), and keeps
one incremental solver (:class:`~kvproof.solver.calls.IsolatedSolver`):

* base level: the named domain axioms (``LD:*``, ``SHAPE:*``) via ``assert_and_track``, and one
  *soft pin* per leaf, ``pin <path> -> leaf == template value``, used only as an assumption;
* a prefix scope (``push``): ``assert_and_track(And(instances of Q), "Q")`` for every rule ``Q``
  before the one asked about, grown incrementally in registry order;
* per question a ``push``/``pop`` around the goal (:mod:`kvproof.solver.verdicts`).

A question is first asked with every soft pin assumed (the search starts from the template, most
products have a constant factor and the answer reads as "the template with these fields
changed"); the pins in an unsat core are released and the question asked again, until it is sat
or the core holds no pin (then the core, rule IDs and axiom names only, is the proof).
"""

from __future__ import annotations

import copy
from typing import Any

import z3

from ..models.documents import Document
from ..rules.check import bundles
from ..rules.core import Rule
from .calls import Config, IsolatedSolver
from .encode import Encoded, as_bool, encode_rule, read_symbolically, role_of
from .pins import PIN_ROUNDS, agrees, learning_pins, pin_label
from .shapes import Shape, document_class
from .slices import Slices
from .symbolic import Leaf, Policy, ReadLog, SymbolicDocument, build, collect_consts, per_conjunct, template_tree
from .verdicts import Outcome, Questions

__all__ = ["Session", "VIRTUAL_DIR"]

#: Directory name the symbolic documents pretend to live in (the checker bundles by directory).
VIRTUAL_DIR = "witness"

#: A template repair (:meth:`Session._repair`) gets ``rlimit // REPAIR_FRACTION`` per call (500,000
#: units by default). A repair is best effort (a seed it cannot repair keeps its templates), and
#: every repair ``prove --all`` makes that ends at all ends under 210,000 units; the one that does
#: not (a scheduler seed of the hybrid example) ran to the full limit, 2 s of nothing (measured).
REPAIR_FRACTION = 10


class Session(Questions, Slices):
    """A shape's symbolic documents, its encoded rules and its solver (the questions it answers:
    :class:`~kvproof.solver.verdicts.Questions`, :class:`~kvproof.solver.slices.Slices`)."""

    def __init__(self, shape: Shape, rules: list[Rule], config: Config, pins: set[str]):
        self.shape = shape
        self.rules = rules
        self.order = {rule.id: index for index, rule in enumerate(rules)}
        self.config = config
        self.pins = pins  # shared, grows as control-flow reads are found
        self.encoded: dict[str, Encoded] = {}
        self.docs: list[tuple[str, str, SymbolicDocument]] = []
        self.documents: tuple[Document, ...] = ()
        self.solver: IsolatedSolver | None = None
        self.pin_lits: list = []
        self.pin_leaf: dict[str, Leaf] = {}
        self.prefix_upto = 0
        self.prefix_open = False
        self.builds = 0
        #: answers of slice questions by their terms (a Prover shares one dict among its sessions)
        self.cache: dict = {}
        #: The rules of the cores the asking rule found in earlier shapes (``Prover.prove`` sets
        #: it per question). A slice of those rules only is not minimized: the rules of the
        #: rule's core (the union over its shapes) are the same either way, and deletion costs
        #: one check per rule (half of VC007's checks).
        self.known_core: frozenset = frozenset()
        self._build()

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        self.builds += 1
        self.built_pins = frozenset(self.pins)
        policy = Policy(pinned=self.built_pins)
        multi = len(self.shape.documents) > 1
        self.reads = ReadLog()  # this build's leaves record their reads here
        self.docs = []
        for kind, file, tree in self.shape.documents:
            label = f"{file}:" if multi else ""
            self.docs.append((kind, file, build(document_class(kind), tree, label, policy, self.reads)))
        self.documents = tuple(Document(kind, doc.obj, f"{VIRTUAL_DIR}/{file}", role=role_of(file))
                               for kind, file, doc in self.docs)
        self.groups = bundles(self.documents)  # what the checker binds bundle rules over, once per build
        self.var_leaf: dict[str, Leaf] = {}
        for _, _, doc in self.docs:
            self.var_leaf.update(doc.var_map())
        self.encoded = {}
        self._goals: dict[str, tuple] = {}  # rule id -> (its encoding, goal, early outcome)
        self._axiom_memo: dict[tuple, tuple] = {}  # term ids -> (their axioms' ids, the terms)
        self.solver = None
        self.touched: set[str] = set()
        self.active: list[Leaf] = []
        self.prefix_upto = 0
        self.prefix_open = False

    def rebuild(self) -> None:
        """Build the documents again with the current pins (every encoding is dropped)."""
        self._build()

    def fork(self) -> "Session":
        """A session on this one's build and encodings with pins (and a solver) of its own: what
        it learns (a claim read in Python control flow) stays in it, so the base session, and
        every later question on it, do not depend on what was asked on the fork (the build, and
        the read log of its leaves, are shared until one of them builds again)."""
        twin = copy.copy(self)
        twin.pins = set(self.pins)
        twin.encoded = dict(self.encoded)
        twin._goals = dict(self._goals)
        twin.reset_solver()
        return twin

    def encode(self, rule: Rule) -> Encoded:
        """The rule's instance verdicts as z3 Bools (pins and rebuilds on control-flow reads)."""

        def attempt() -> Encoded:
            if rule.id not in self.encoded:
                if self.built_pins != self.pins:
                    self._build()  # pins learned since this build (here, or by a session sharing them)
                self.encoded[rule.id] = encode_rule(rule, self.documents, self.var_leaf, self.built_pins,
                                                    self.reads, self.groups)
            return self.encoded[rule.id]

        return learning_pins(attempt, self.pins, PIN_ROUNDS) or Encoded(error="too many pin rounds")

    def evaluate(self, fn) -> Any:
        """``fn(documents)`` as a z3 Bool, with the pinning protocol of rule bodies (a claim)."""

        def attempt() -> Any:
            if self.built_pins != self.pins:
                self._build()
            return read_symbolically(lambda: as_bool(fn(self.documents)), self.var_leaf, self.built_pins, self.reads)

        value = learning_pins(attempt, self.pins, PIN_ROUNDS)
        if value is None:
            raise RuntimeError("too many pin rounds")
        return value

    def encode_all(self) -> None:
        # a rebuild (new pins) during the loop drops earlier encodings: loop until none happens
        for _ in range(50):
            builds = self.builds
            for rule in self.rules:
                self.encode(rule)
            if self.builds == builds:
                return

    # -- the solver -------------------------------------------------------------------------
    def leaves(self) -> list[Leaf]:
        return [leaf for _, _, doc in self.docs for leaf in doc.leaves]

    def consts(self, terms: list) -> frozenset:
        """:func:`collect_consts` of the terms, remembered by their ids (a rule's terms are asked
        about in every slice and hint of every question on the shape, and a mutation shares most
        of its base's terms: z3 makes one term of equal ones). The memo keeps them alive, so
        their ids are never reused for other terms. Kept in :attr:`cache`, which a Prover shares
        among its sessions."""
        key = ("consts",) + tuple(term.get_id() for term in terms)
        known = self.cache.get(key)
        if known is None:
            known = self.cache[key] = (frozenset(per_conjunct(collect_consts, terms)), list(terms))
        return known[0]

    def touch(self, terms: list) -> list[Leaf]:
        """Mark the leaves the terms read; return the newly read ones."""
        names = self.consts(terms) - self.touched
        if not names:
            return []
        self.touched |= names
        fresh = []
        known = {id(leaf) for leaf in self.active}
        for leaf in self.leaves():
            if id(leaf) not in known and any(n in names for n in leaf.var_names):
                fresh.append(leaf)
        self.active += fresh
        return fresh

    def _new_solver(self) -> IsolatedSolver:
        solver = IsolatedSolver()
        solver.set("timeout", max(1, int(self.config.timeout * 1000)))
        solver.set("rlimit", self.config.rlimit)
        solver.set("random_seed", self.config.seed)
        solver.set("core.minimize", False)
        return solver

    def reset_solver(self) -> None:
        """Drop the solver: the next question starts from an empty one. Every question (one
        rule on one shape) gets its own, so its answer (model, core) does not depend on which
        questions this session answered before: the same in every run and for every ``--jobs``."""
        self.solver = None
        self.pin_lits = []
        self.pin_leaf = {}
        self.touched = set()
        self.active = []
        self.prefix_upto = 0
        self.prefix_open = False
        self.repaired = False

    def ensure_solver(self, repair: bool = False) -> IsolatedSolver:
        """The session's solver (created empty; leaves get their axioms and pins when a rule first
        reads them). ``repair`` first moves the templates to values that pass every rule."""
        if self.solver is None:
            self.reset_solver()
            self.solver = self._new_solver()
        if repair and not self.repaired:
            self.encode_all()
            if self.solver is None:
                return self.ensure_solver(repair=True)
            self.sync([t for e in self.encoded.values() if e.terms for t in e.terms])
            self._repair()
            self.repaired = True
        return self.solver

    def repaired_templates(self) -> list[Any]:
        """The template trees moved to values that pass every rule (mutations start from them),
        asked on a fresh solver; the session keeps its own templates (what it answers later
        must not depend on whether a repair ran first)."""
        saved = [(leaf, leaf.template) for leaf in self.leaves()]
        builds = self.builds
        self.reset_solver()
        try:
            self.ensure_solver(repair=True)
            return [template_tree(doc) for _, _, doc in self.docs]
        finally:
            for leaf, template in saved:
                leaf.template = template
            if self.builds != builds:
                self._build()  # new leaves were retemplated: build them from the shape again
            self.reset_solver()

    def sync(self, terms: list) -> None:
        """Give the leaves the terms read their domain axioms (tracked) and soft pins, at the
        base level (the prefix scope is closed and rebuilt around them)."""
        fresh = self.touch(terms)
        if not fresh:
            return
        upto = self.prefix_upto if self.prefix_open else 0
        self.close_prefix()
        self._assert_leaves(fresh)
        if upto:
            self._open_prefix(upto)

    def _repair(self) -> None:
        """Move the templates' values to the nearest values that pass every rule (a shrunk
        example no longer sums its pages right, for instance)."""
        solver = self.solver
        solver.set("rlimit", max(1, self.config.rlimit // REPAIR_FRACTION))
        rules = [rule for rule in self.rules if self.encoded[rule.id].terms]
        self.close_prefix()
        active_rules = list(rules)
        for _ in range(len(rules) + 1):
            solver.push()
            try:
                for rule in active_rules:
                    solver.assert_and_track(z3.And(*self.encoded[rule.id].terms), f"repair:{rule.id}")
                outcome = self._relax()
            finally:
                solver.pop()
            if outcome.status == "sat":
                self._retemplate(outcome.model)
                return
            if outcome.status != "unsat":
                return
            blamed = [rule for rule in active_rules if f"repair:{rule.id}" in outcome.core]
            if not blamed:
                return
            active_rules.remove(blamed[-1])

    def _retemplate(self, model: Any) -> None:
        """New template values from a model; the soft pins are rebuilt on the new values."""
        for leaf in self.active:
            leaf.template = leaf.decode(model)
        self.solver = None
        active = list(self.active)
        self.ensure_solver()
        self.repaired = True
        self.sync_leaves(active)

    def sync_leaves(self, leaves: list[Leaf]) -> None:
        """Give these leaves (not yet active) their axioms and soft pins (after a repair)."""
        known = {id(x) for x in self.active}
        fresh = [leaf for leaf in leaves if id(leaf) not in known]
        self.active += fresh
        self.touched |= {n for leaf in fresh for n in leaf.var_names}
        self._assert_leaves(fresh)

    def _assert_leaves(self, leaves: list[Leaf]) -> None:
        """Each leaf's domain axioms (tracked) and its soft pin ``pin <leaf>`` (an assumption)."""
        solver = self.solver
        for leaf in leaves:
            for name, axiom in leaf.axioms:
                solver.assert_and_track(axiom, name)
            equal = leaf.template_eq()
            if equal is None:
                continue
            name = f"pin {leaf.name}"
            literal = z3.Bool(name)
            solver.add(z3.Implies(literal, equal))
            self.pin_lits.append(literal)
            self.pin_leaf[name] = leaf

    def _open_prefix(self, upto: int) -> None:
        self.solver.push()
        self.prefix_open = True
        self.prefix_upto = 0
        self._extend_prefix(upto)

    def _extend_prefix(self, upto: int) -> None:
        while self.prefix_upto < upto:
            earlier = self.rules[self.prefix_upto]
            encoded = self.encoded[earlier.id]
            if encoded.terms:
                self.solver.assert_and_track(z3.And(*encoded.terms), earlier.id)
            self.prefix_upto += 1

    def advance(self, rule: Rule) -> None:
        """Assert every rule before ``rule`` in the prefix scope (encoding them first)."""
        index = self.order[rule.id]
        for _ in range(50):
            builds = self.builds
            for earlier in self.rules[: index + 1]:
                self.encode(earlier)
            if builds == self.builds:
                break
        self.ensure_solver()
        self.sync([t for earlier in self.rules[: index + 1] for t in (self.encoded[earlier.id].terms or [])])
        if self.prefix_open and index < self.prefix_upto:
            self.close_prefix()
        if not self.prefix_open:
            self._open_prefix(index)
        else:
            self._extend_prefix(index)

    def close_prefix(self) -> None:
        if self.prefix_open and self.solver is not None:
            self.solver.pop()
        self.prefix_open = False
        self.prefix_upto = 0


    def _solve(self) -> Outcome:
        """Answer the question on the solver's current scope (a claim's check).

        1. The relax loop from the template (:meth:`_relax`).
        2. When that gives up (a nonlinear query past the time or resource limit), again with the
           small-domain leaves (block sizes, kernel blocks, element sizes, dimensions: see
           :data:`SMALL_DOMAIN`) held at their template values: products with one such factor
           are linear. An unsat core then names those pins (``SHAPE:pin``): dead *with those
           values*, which is what "within the shape bound" means for such a rule.
        """
        fixed = self._fixed()
        outcome = self._relax()
        if outcome.status != "unknown" or not fixed:
            return outcome
        second = self._relax(fixed)
        if second.status == "unknown":
            second.reason = second.reason or outcome.reason
        return second

    def _relax(self, fixed: list | None = None) -> Outcome:
        """Check with every soft pin assumed; release the pins of each unsat core until sat, or
        until a core holds no releasable pin (then that core, minimized, is the answer).
        ``fixed`` pins are assumed throughout and never released."""
        solver = self.solver
        fixed = list(fixed or [])
        fixed_names = {lit.decl().name() for lit in fixed}
        names = set(self.pin_leaf) - fixed_names
        active = [lit for lit in self.pin_lits if lit.decl().name() in names]
        released: list[str] = []
        reason = ""
        for _round in range(self.config.relax_rounds):
            result = solver.check(*fixed, *active)
            if result == z3.sat:
                return Outcome("sat", model=solver.model(), released=released)
            if result == z3.unknown:
                return Outcome("unknown", reason=solver.reason_unknown())
            core = [c.decl().name() for c in solver.unsat_core()]
            pinned = {c for c in core if c in names}
            if not pinned:
                return Outcome("unsat", core=self._label(core), released=released)
            released += sorted(pinned)
            active = [lit for lit in active if lit.decl().name() not in pinned]
            if not active:
                break
        result = solver.check(*fixed)
        if result == z3.sat:
            model = solver.model()
            return Outcome("sat", model=model, released=sorted(n for n in names if not agrees(model, self.pin_leaf[n])))
        if result == z3.unsat:
            core = [c.decl().name() for c in solver.unsat_core()]
            return Outcome("unsat", core=self._label(core), released=sorted(names))
        return Outcome("unknown", reason=solver.reason_unknown() or reason)

    def _label(self, core: list[str]) -> list[str]:
        """Core names for people: a held pin becomes ``SHAPE:pin <path> = <value>``."""
        out = []
        for name in core:
            leaf = self.pin_leaf.get(name)
            if leaf is None:
                out.append(name)
            else:
                out.append(pin_label(leaf))
        return out

    # -- an answer's documents --------------------------------------------------------------
    def trees(self, model: Any) -> list[tuple[str, str, Any]]:
        return [(kind, file, doc.tree(model, self.touched)) for kind, file, doc in self.docs]

