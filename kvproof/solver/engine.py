"""One shape, one solver: encode the rules on a symbolic document set and ask z3 about them.

A :class:`Session` builds the symbolic documents of a shape, evaluates every rule's binding and
body on them (with z3's ``bool()`` made strict, so a symbolic value in Python control flow is
caught instead of silently compared by structure; the leaves involved are then *pinned* to their
template values and the shape is built again), and keeps one incremental solver:

* base level: the named domain axioms (``LD:*``, ``SHAPE:*``) via ``assert_and_track``, and one
  *soft pin* per leaf, ``pin <path> -> leaf == template value``, used only as an assumption;
* a prefix scope (``push``): ``assert_and_track(And(instances of Q), "Q")`` for every rule ``Q``
  before the one asked about, grown incrementally in registry order;
* per question a ``push``/``pop`` around the goal.

A question is first asked with every soft pin assumed (the search starts from the template, most
products have a constant factor and the answer reads as "the template with these fields
changed"); the pins in an unsat core are released and the question asked again, until it is sat
or the core holds no pin (then the core, rule IDs and axiom names only, is the proof).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

import attrs
import z3

from ..models.codec import ABSENT
from ..models.documents import Document
from ..rules.core import Rule
from ..rules.state_storage import REPLAY_ROLE
from .shapes import Shape, document_class
from .symbolic import Leaf, Policy, SymbolicDocument, SymbolicFlowError, build, collect_consts

__all__ = ["Config", "Session", "Outcome", "strict_bool", "targets", "DEFAULT_PINS"]

#: Leaves every shape pins: values that select structure (``block_axis`` picks a dimension).
DEFAULT_PINS = frozenset({"block_axis"})

#: Fields with a small finite domain in practice (token and kernel block sizes, element sizes,
#: tensor dimensions, head counts, parallel sizes): one factor of most products. A query that
#: runs past its limits is asked again with these held at their template values.
SMALL_DOMAIN = frozenset({
    "block_size", "block_size_tokens", "kernel_block_size", "kernel_block_size_tokens", "kernel_block_sizes",
    "element_size_bytes", "shape", "shapes", "num_kv_heads", "head_size", "head_size_v", "tokens_per_state",
    "decode_context_parallel_size", "tensor_parallel_size", "pipeline_parallel_size", "block_axis",
    "mamba_block_size", "hash_block_size", "scheduler_block_size", "num_speculative_blocks",
})


def _small_domain(spath: str) -> bool:
    return spath.rsplit(".", 1)[-1] in SMALL_DOMAIN


#: z3 operators that make a term nonlinear when two operands (a product) or the divisor (a
#: division, a modulo) are not constants.
_NONLINEAR_OPS = frozenset({z3.Z3_OP_MUL, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_REM, z3.Z3_OP_DIV, z3.Z3_OP_POWER})


def nonlinear_consts(terms: Iterable[Any]) -> set[str]:
    """Names of the constants that occur under a nonlinear node of the terms: a product with two
    or more non-constant factors, or a division/modulo by a non-constant (every operand's
    constants). Empty: the terms are linear."""
    from z3 import z3core as c

    ctx = z3.main_ctx().ref()
    app_kind = z3.Z3_APP_AST
    uninterpreted = z3.Z3_OP_UNINTERPRETED
    ground: dict[int, bool] = {}  # ast id -> no uninterpreted constant below
    out: set[str] = set()
    nonlinear: list = []
    stack = [(t.as_ast(), False) for t in terms]
    while stack:
        ast, done = stack.pop()
        ident = c.Z3_get_ast_id(ctx, ast)
        if ident in ground and not done:
            continue
        if c.Z3_get_ast_kind(ctx, ast) != app_kind:
            ground[ident] = True
            continue
        app = c.Z3_to_app(ctx, ast)
        count = c.Z3_get_app_num_args(ctx, app)
        decl = c.Z3_get_app_decl(ctx, app)
        if count == 0:
            ground[ident] = c.Z3_get_decl_kind(ctx, decl) != uninterpreted
            continue
        args = [c.Z3_get_app_arg(ctx, app, i) for i in range(count)]
        if not done:
            stack.append((ast, True))
            stack.extend((arg, False) for arg in args)
            continue
        flags = [ground[c.Z3_get_ast_id(ctx, arg)] for arg in args]
        ground[ident] = all(flags)
        kind = c.Z3_get_decl_kind(ctx, decl)
        if kind in _NONLINEAR_OPS:
            if kind == z3.Z3_OP_MUL:
                hit = sum(1 for flag in flags if not flag) >= 2
            else:
                hit = not flags[-1]
            if hit:
                nonlinear.extend(z3.z3._to_expr_ref(arg, z3.main_ctx()) for arg, flag in zip(args, flags) if not flag)
    if nonlinear:
        out = collect_consts(nonlinear)
    return out


_PIN_PAIRS: dict = {}


def pin_pairs(leaf: Leaf) -> list[tuple[Any, Any]]:
    """``(variable, template constant)`` pairs that substitute a leaf's template value (empty
    when the leaf has no comparable template value)."""
    key = (leaf.name, tuple(leaf.var_names), type(leaf.template).__name__, repr(leaf.template))
    pairs = _PIN_PAIRS.get(key)
    if pairs is None:
        pairs = _PIN_PAIRS[key] = _pin_pairs(leaf)
    return pairs


def _pin_pairs(leaf: Leaf) -> list[tuple[Any, Any]]:
    equal = leaf.template_eq()
    if equal is None:
        return []
    parts = equal.children() if z3.is_and(equal) else [equal]
    out = []
    for part in parts:
        if not z3.is_eq(part):
            return []
        a, b = part.children()
        if not (z3.is_const(a) and a.decl().kind() == z3.Z3_OP_UNINTERPRETED):
            a, b = b, a
        if not (z3.is_const(a) and a.decl().kind() == z3.Z3_OP_UNINTERPRETED) or collect_consts([b]):
            return []
        out.append((a, b))
    return out


#: A slice question (a subset of the rules on a fresh solver) gets ``rlimit // SLICE_FRACTION``.
SLICE_FRACTION = 5
#: The unpinned look after the held values alone decided a goal (``_held``) gets ``rlimit //
#: HELD_FRACTION`` (100,000 units by default): VC007's products run to the limit there (unknown:
#: the held answer stands); at the slice budget that was a fifth of VC007's time. (At 1/500 the
#: looks were cheaper but the answers moved so that VC007 took twice as long: measured.)
HELD_FRACTION = 50

#: Term ids -> (their constants, the terms kept alive): :meth:`Session.consts`.
_CONSTS_OF: dict[tuple, tuple] = {}

#: The z3 context of the solver call running now (one at a time per process), for Ctrl-C.
_CHECKING: Any = None


def interrupt() -> None:
    """Stop the running solver call at once (thread-safe: ``Context.interrupt``). The CLI's
    SIGINT watcher calls it; the call returns unknown and the interrupt ends the command."""
    ctx = _CHECKING
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
        global _CHECKING
        terms = [self._in(a) for a in assumptions]
        _CHECKING = self.ctx
        try:
            return self.solver.check(*terms)
        finally:
            _CHECKING = None

    def model(self) -> Any:
        return self.solver.model().translate(z3.main_ctx())

    def unsat_core(self) -> list:
        return list(self.solver.unsat_core())

    def reason_unknown(self) -> str:
        return self.solver.reason_unknown()


#: Directory name the symbolic documents pretend to live in (the checker bundles by directory).
VIRTUAL_DIR = "witness"


@attrs.define
class Config:
    """The budget of one solver call. ``rlimit`` (z3 resource units, machine independent)
    decides when a call gives up; ``timeout`` (wall-clock seconds) is only a safety net, far
    above what the resource limit takes even on a loaded machine (a call that reaches it gives
    ``unknown``, never a verdict, but then a run can differ from the next). Every decided call
    of ``prove --all`` takes under 0.5 M units; 5 M take about 3-7 s on a loaded 2-core machine."""

    timeout: float = 60.0  # wall-clock safety net per solver call (seconds)
    rlimit: int = 5_000_000  # deterministic resource limit per solver call
    relax_rounds: int = 12
    seed: int = 0


@attrs.define
class Outcome:
    """The answer of one session to one question."""

    status: str  # sat | unsat | unknown | trivial | vacuous | error
    model: Any = None
    core: list[str] = attrs.field(factory=list)
    reason: str = ""
    released: list[str] = attrs.field(factory=list)  # soft pins released to reach the answer


class NeedPins(Exception):
    def __init__(self, spaths: set[str]):
        super().__init__(", ".join(sorted(spaths)))
        self.spaths = spaths


@attrs.define
class Encoded:
    terms: list | None = None
    error: str | None = None
    #: JSON paths of the instances (subject and blame): where the rule looks.
    subjects: list[str] = attrs.field(factory=list)


# --------------------------------------------------------------------------------------------


def _strict(self):
    if z3.is_true(self):
        return True
    if z3.is_false(self):
        return False
    raise SymbolicFlowError(f"symbolic term used in Python control flow: {self}", term=self)


class strict_bool:  # noqa: N801 - used as ``with strict_bool():``, a context like the others
    """Make ``bool(z3 term)`` raise unless the term is literally true or false.

    z3's own ``__bool__`` answers ``x == y`` by *structural* equality, so a binding that wrote
    ``if a.dp_rank == b.dp_rank`` would silently see False on symbolic ranks. A class, not a
    generator context: it is entered once per rule and shape (thousands of times a run).
    Re-entrant (an inner ``with`` changes nothing).
    """

    _depth = 0
    _saved: Any = None

    def __enter__(self) -> None:
        cls = strict_bool
        if cls._depth == 0:
            cls._saved = (z3.AstRef.__bool__, _patch_concrete_helpers())
            z3.AstRef.__bool__ = _strict
        cls._depth += 1

    def __exit__(self, *exc: Any) -> None:
        cls = strict_bool
        cls._depth -= 1
        if cls._depth == 0:
            original, patched = cls._saved
            z3.AstRef.__bool__ = original
            for module, name, value, _replacement in patched:
                setattr(module, name, value)


_REPLACEMENTS: dict[str, Any] = {}


def _patch_concrete_helpers() -> list[tuple[Any, str, Any, Any]]:
    """``gcd``/``lcm`` need concrete operands: while rules are encoded, the copies the rule and
    simulator modules imported raise a :class:`SymbolicFlowError` naming the symbolic operands, so
    the prover pins those leaves (as it does for a symbolic ``if``) instead of giving up.
    Returns ``(module, name, original, replacement)`` of each copy replaced."""
    import sys

    from .. import logic

    def strict(helper):
        def wrapped(*values):
            items = logic._flatten(values)
            symbolic = [v for v in items if logic.is_symbolic(v)]
            if symbolic:
                raise SymbolicFlowError(f"{helper.__name__} needs concrete operands", terms=symbolic)
            return helper(*values)

        wrapped.__name__ = helper.__name__
        return wrapped

    replacements = _REPLACEMENTS.get("helpers")
    if replacements is None:
        replacements = _REPLACEMENTS["helpers"] = {id(logic.gcd): strict(logic.gcd), id(logic.lcm): strict(logic.lcm)}
    # the copies in the rule and simulator modules, found again only when a module was imported since
    count, found = _REPLACEMENTS.get("found", (-1, []))
    if count != len(sys.modules):
        found = []
        for module_name, module in list(sys.modules.items()):
            if module is None or not module_name.startswith(("kvproof.rules", "kvproof.sim")):
                continue
            for name in ("gcd", "lcm"):
                value = getattr(module, name, None)
                if value is not None and id(value) in replacements:
                    found.append((module, name, value, replacements[id(value)]))
        _REPLACEMENTS["found"] = (len(sys.modules), found)
    for module, name, _value, replacement in found:
        setattr(module, name, replacement)
    return found


def targets(rule: Rule, documents: tuple[Document, ...], groups: Any = None) -> Iterable[tuple[str | None, Any]]:
    """What the concrete checker hands the rule's binding (the same function, so the same order).
    ``groups``: the checker's bundles of these documents, when the caller keeps them."""
    from ..rules import check as checker

    if groups is None and hasattr(checker, "bundles"):
        groups = checker.bundles(documents)
    if groups is None:
        yield from checker._targets(rule, documents)  # type: ignore[call-arg]
    else:
        yield from checker._targets(rule, documents, groups)


#: The folders of a shape's (and a stored witness's) documents that give them a role other than
#: ``checked``: ``probe/`` the accepted probe (``check --probe``), ``replay/`` a profile being
#: sized or replayed (``kvproof plan``: ST028).
ROLE_FOLDERS = {"probe": "probe", "replay": REPLAY_ROLE}


def role_of(file: str) -> str:
    """The role of a shape's document by its folder (:data:`ROLE_FOLDERS`), else ``checked``."""
    folder, sep, _ = file.partition("/")
    return ROLE_FOLDERS.get(folder, "checked") if sep else "checked"


def as_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if z3.is_expr(value) and z3.is_bool(value):
        return value
    raise TypeError(f"rule body returned {type(value).__name__}, not a bool or a z3 Bool")


# --------------------------------------------------------------------------------------------


class Session:
    """A shape's symbolic documents, its encoded rules and its solver."""

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
        self.build_seconds = 0.0
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
        start = time.perf_counter()
        self.builds += 1
        self.built_pins = frozenset(self.pins)
        policy = Policy(pinned=self.built_pins)
        multi = len(self.shape.documents) > 1
        self.docs = []
        for kind, file, tree in self.shape.documents:
            label = f"{file}:" if multi else ""
            self.docs.append((kind, file, build(document_class(kind), tree, label, policy)))
        self.documents = tuple(Document(kind, doc.obj, f"{VIRTUAL_DIR}/{file}", role=role_of(file))
                               for kind, file, doc in self.docs)
        from ..rules.check import bundles

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
        self.build_seconds += time.perf_counter() - start

    def rebuild(self) -> None:
        """Build the documents again with the current pins (every encoding is dropped)."""
        self._build()

    def fork(self) -> "Session":
        """A session on this one's build and encodings with pins (and a solver) of its own: what
        it learns (a claim read in Python control flow) stays in it, so the base session, and
        every later question on it, do not depend on what was asked on the fork."""
        import copy

        twin = copy.copy(self)
        twin.pins = set(self.pins)
        twin.encoded = dict(self.encoded)
        twin._goals = dict(self._goals)
        twin.reset_solver()
        return twin

    def encode(self, rule: Rule) -> Encoded:
        """The rule's instance verdicts as z3 Bools (pins and rebuilds on control-flow reads)."""
        for _attempt in range(50):
            if rule.id in self.encoded:
                return self.encoded[rule.id]
            if self.built_pins != self.pins:
                self._build()  # another session learned pins since this one was built
            try:
                self.encoded[rule.id] = self._encode(rule)
            except NeedPins as need:
                self.pins |= need.spaths
                self._build()
                continue
            return self.encoded[rule.id]
        return Encoded(error="too many pin rounds")

    def _encode(self, rule: Rule) -> Encoded:
        from . import symbolic

        start = time.perf_counter()
        terms = []
        subjects: list[str] = []
        log: list = []
        symbolic.ACCESS_LOG = log
        try:
            with strict_bool():
                for _file, target in targets(rule, self.documents, self.groups):
                    for instance in rule.over(target):
                        log.clear()
                        terms.append(as_bool(rule.holds(instance)))
                        subjects.append(instance.subject)
                        if instance.blame:
                            subjects.append(instance.blame)
        except SymbolicFlowError as exc:
            spaths = self._spaths(exc)
            if spaths - self.built_pins:
                raise NeedPins(spaths - self.built_pins) from None
            return Encoded(error=f"{exc}")
        except Exception as exc:  # noqa: BLE001 - a body the solver cannot run is reported, not fatal
            # A helper refused a symbolic value: pin the leaf read last and try again.
            for leaf in reversed(log):
                if leaf.spath not in self.built_pins:
                    raise NeedPins({leaf.spath}) from None
            return Encoded(error=f"{type(exc).__name__}: {exc}")
        finally:
            symbolic.ACCESS_LOG = None
            self.build_seconds += time.perf_counter() - start
        return Encoded(terms=terms, subjects=subjects)

    def evaluate(self, fn) -> Any:
        """``fn(documents)`` as a z3 Bool, with the pinning protocol of rule bodies (a claim)."""
        from . import symbolic

        for _attempt in range(50):
            if self.built_pins != self.pins:
                self._build()
            log: list = []
            symbolic.ACCESS_LOG = log
            try:
                with strict_bool():
                    return as_bool(fn(self.documents))
            except SymbolicFlowError as exc:
                spaths = self._spaths(exc) - self.built_pins
                if not spaths:
                    raise
                self.pins |= spaths
            except Exception:
                fresh = [leaf.spath for leaf in reversed(log) if leaf.spath not in self.built_pins]
                if not fresh:
                    raise
                self.pins.add(fresh[0])
            finally:
                symbolic.ACCESS_LOG = None
        raise RuntimeError("too many pin rounds")

    def _spaths(self, exc: SymbolicFlowError) -> set[str]:
        if exc.leaf is not None:
            return {exc.leaf.spath}
        if exc.terms:
            leaves = [self.var_leaf.get(name) for name in collect_consts(exc.terms)]
            return {leaf.spath for leaf in leaves if leaf is not None}
        return set()

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
        their ids are never reused for other terms."""
        key = tuple(term.get_id() for term in terms)
        known = _CONSTS_OF.get(key)
        if known is None:
            known = _CONSTS_OF[key] = (frozenset(collect_consts(terms)), list(terms))
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
        from .symbolic import _concretize_template

        saved = [(leaf, leaf.template) for leaf in self.leaves()]
        builds = self.builds
        self.reset_solver()
        try:
            self.ensure_solver(repair=True)
            return [_concretize_template(doc) for _, _, doc in self.docs]
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
        solver = self.solver
        for leaf in fresh:
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
        if upto:
            self._open_prefix(upto)

    def _repair(self) -> None:
        """Move the templates' values to the nearest values that pass every rule (a shrunk
        example no longer sums its pages right, for instance)."""
        solver = self.solver
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
        known = {id(x) for x in self.active}
        fresh = [leaf for leaf in leaves if id(leaf) not in known]
        self.active += fresh
        self.touched |= {n for leaf in fresh for n in leaf.var_names}
        solver = self.solver
        for leaf in fresh:
            for name, axiom in leaf.axioms:
                solver.assert_and_track(axiom, name)
            equal = leaf.template_eq()
            if equal is None:
                continue
            literal = z3.Bool(f"pin {leaf.name}")
            solver.add(z3.Implies(literal, equal))
            self.pin_lits.append(literal)
            self.pin_leaf[f"pin {leaf.name}"] = leaf

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

    # -- questions --------------------------------------------------------------------------
    def goal(self, rule: Rule) -> tuple[Any, Outcome | None]:
        """``Or(not instance)`` of the rule, or an outcome when there is nothing to solve."""
        encoded = self.encode(rule)
        known = self._goals.get(rule.id)
        if known is not None and known[0] is encoded:  # the same encoding: the same goal
            return known[1], (None if known[2] is None else attrs.evolve(known[2]))
        if encoded.error is not None:
            return None, Outcome("error", reason=encoded.error)
        if not encoded.terms:
            goal, early = None, Outcome("vacuous", reason="no instance of the rule in this shape")
        else:
            # simplified only to see that it is false: z3.simplify orders the arguments of
            # and/or by term id, which depends on every term the process made before
            goal, early = z3.Or(*[z3.Not(t) for t in encoded.terms]), None
            if z3.is_false(z3.simplify(goal)):
                goal, early = None, Outcome("trivial", reason="the rule holds by the shape's structure")
        self._goals[rule.id] = (encoded, goal, early)
        return goal, (None if early is None else attrs.evolve(early))

    def structural_blockers(self, rule: Rule, others: Iterable[Rule] | None = None) -> list[str]:
        """Earlier rules that fail by the shape's structure alone (no value can help)."""
        out = []
        for earlier in (self.rules[: self.order[rule.id]] if others is None else others):
            encoded = self.encode(earlier)
            if encoded.terms and any(z3.is_false(z3.simplify(t)) for t in encoded.terms):
                out.append(earlier.id)
        return out

    def fingerprint(self, rule: Rule, every: bool = False) -> tuple:
        """The formula of ``reach(rule)`` (``every``: of ``implied(rule)``) as z3 term ids
        (equal ids: the same question)."""
        index = len(self.rules) - 1 if every else self.order[rule.id]
        out = []
        for other in self.rules[: index + 1]:
            encoded = self.encode(other)
            if encoded.terms:
                out.append((other.id, tuple(sorted(t.get_id() for t in encoded.terms))))
            elif encoded.error:
                out.append((other.id, encoded.error))
        terms = [t for other in self.rules[: index + 1] for t in (self.encode(other).terms or [])]
        out.append(("axioms", self._axiom_ids(terms)))
        return tuple(out)

    def reach(self, rule: Rule, force: Iterable[str] = (), free_first: bool = False,
              hints: Iterable = (), seen: dict | None = None) -> Outcome:
        """Some document of the shape passes every rule before ``rule`` and fails it. ``force``:
        leaf names that keep their template value (no relaxing). ``free_first``: the answer is
        probably unsat (the rule was unsat in a smaller shape, or is expected dead): try slices of
        the prefix first. ``hints``: the cores of earlier shapes, each ``(rule IDs, pinned)``
        (or plain rule IDs): if those rules alone (with the goal) are unsat here, so is the whole
        prefix, and the much smaller query answers it; a core that needed small-domain values
        held (``pinned``) is asked linearized right away. ``seen``: fingerprints of the full
        questions already asked (an identical one is answered ``duplicate``)."""
        goal, early = self.goal(rule)
        if early is not None:
            return early
        index = self.order[rule.id]
        force = sorted(set(force))  # canonical order (the solver's answer depends on it)
        self.reset_solver()
        prefix = self.rules[:index]
        hint_sets = [] if force else _hint_sets(hints)
        outcome = self._from_hints(rule, hint_sets, prefix)
        if outcome is not None:
            return outcome
        blockers = self.structural_blockers(rule)
        if blockers:
            return Outcome("trivial", core=blockers, reason="an earlier rule fails by structure")
        self.advance(rule)
        goal, early = self.goal(rule)  # a rebuild during advance makes new terms
        if early is not None:
            return early
        if seen is not None and not force:
            fingerprint = self.fingerprint(rule)
            if fingerprint in seen:
                return Outcome("duplicate", reason="the same formula as a shape already answered")
            seen[fingerprint] = [t for r in self.rules[: index + 1] for t in (self.encoded[r.id].terms or [])]
        if free_first and not force:
            slices = self._slices(rule, goal, prefix)
            if any(pinned for _, pinned in hint_sets):
                slices.append([r for r in prefix if self.encoded[r.id].terms])  # the whole prefix, linearized
            held = False
            # a rule whose earlier cores needed small-domain values held asks linearized first,
            # as its hints are (a linear sat is a sat of the plain slice too); otherwise plain
            # first, linearized when that runs past the limits (nonlinear)
            linear_first = any(pinned for _, pinned in hint_sets)
            for rules in slices:
                outcome = self.slice_check(rule, goal, rules, linear=linear_first, pool=prefix)
                if outcome.status == "unknown" and outcome.reason != "held":
                    outcome = self.slice_check(rule, goal, rules, linear=not linear_first, pool=prefix)
                if outcome.status == "unsat":
                    return outcome
                held = held or outcome.reason == "held"
            if held and slices:
                # the held values alone make the goal impossible (a property of the goal): the
                # full question could only reach it with other small-domain values, so it is
                # asked only when the unpinned look finds a way, as for a hint (_held)
                outcome = self._held(rule, goal, slices[-1], prefix)
                if outcome.status == "unsat":
                    return outcome
            self.advance(rule)
        outcome = self._ask(rule, goal, force, prefix_scope=True)
        if outcome.status == "unknown" and not force:
            for rules in self._slices(rule, goal, prefix) + [prefix]:
                sliced = self.slice_check(rule, goal, rules, linear=True, pool=prefix, held_goal=True)
                if sliced.status == "unsat":
                    return sliced
            self.advance(rule)
            outcome = self._ask(rule, goal, force, prefix_scope=True, fixed_only=True, previous=outcome)
        return outcome

    def _hinted(self, rule: Rule, goal: Any, rules: list[Rule], pinned: bool, pool: list[Rule]) -> Outcome:
        """The slice of an earlier core; linearized when that core needed small-domain values
        held. When the held values alone decide the goal, the slice is asked unpinned with a
        small budget first: sat there means another small-domain value might reach the goal (so
        the full question is asked); otherwise the held answer stands, as after an unknown."""
        outcome = self.slice_check(rule, goal, rules, linear=pinned, pool=pool)
        if outcome.status != "unknown" or outcome.reason != "held":
            return outcome
        return self._held(rule, goal, rules, pool)

    def _held(self, rule: Rule, goal: Any, rules: list[Rule], pool: list[Rule]) -> Outcome:
        """The held values alone make the goal impossible: the slice asked unpinned with a small
        budget (:data:`HELD_FRACTION`); its sat or unsat answers, else the held answer stands
        (unsat, the core naming the goal and those pins: dead *for those values*)."""
        plain = self.slice_check(rule, goal, rules, pool=pool, fraction=HELD_FRACTION)
        if plain.status != "unknown":
            return plain
        return self.slice_check(rule, goal, rules, linear=True, pool=pool, held_goal=True)

    def _after_slice(self, rule: Rule, pool: list[Rule], linear: bool) -> Outcome | None:
        """The goal against the rule's prerequisites (``after``, transitively) alone."""
        closure = _after_closure(rule, pool)
        if not closure:
            return None
        rules = self._encoded_rules([r for r in pool if r.id in closure])
        goal, early = self.goal(rule)
        if rules is None or early is not None:
            return None
        outcome = self.slice_check(rule, goal, rules, linear=linear, pool=pool)
        return outcome if outcome.status == "unsat" else None

    def _ask(self, rule: Rule, goal: Any, force: list, prefix_scope: bool, pool: list[Rule] | None = None,
             fixed_only: bool = False, previous: Outcome | None = None) -> Outcome:
        """The full question on the session solver: the prefix scope (or ``pool`` asserted in a
        scope of its own), the goal, the relax loop; ``fixed_only``: with the small-domain leaves
        held (the fallback of a query past its limits)."""
        solver = self.solver
        solver.push()
        try:
            if pool is not None:
                for other in pool:
                    solver.assert_and_track(z3.And(*self.encoded[other.id].terms), other.id)
            solver.assert_and_track(goal, f"goal:{rule.id}")
            for name in force:
                literal = f"pin {name}"
                if literal in self.pin_leaf:
                    solver.add(z3.Bool(literal))
            if fixed_only:
                fixed = self._fixed()
                outcome = self._relax(fixed) if fixed else (previous or Outcome("unknown"))
                if outcome.status == "unknown" and previous is not None:
                    outcome.reason = outcome.reason or previous.reason
            else:
                outcome = self._relax()
        finally:
            solver.pop()
        if outcome.status == "unsat" and not force:
            outcome = self._minimize_rules(rule, goal, outcome, pool)
        return outcome

    def _fixed(self) -> list:
        return [lit for lit in self.pin_lits if _small_domain(self.pin_leaf[lit.decl().name()].spath)]

    def _encoded_rules(self, rules: list[Rule]) -> list[Rule] | None:
        """Encode ``rules`` (None when one cannot run on this shape)."""
        for _ in range(50):
            builds = self.builds
            for other in rules:
                self.encode(other)
            if builds == self.builds:
                break
        out = []
        for other in rules:
            encoded = self.encoded.get(other.id)
            if encoded is None or encoded.error is not None:
                return None
            if encoded.terms:
                out.append(other)
        return out

    def _slices(self, rule: Rule, goal: Any, pool: list[Rule]) -> list[list[Rule]]:
        """Subsets of ``pool`` worth asking alone: the rule's prerequisites (``after``, closed
        transitively), then every rule that shares a leaf with the goal."""
        closure = _after_closure(rule, pool)
        out = []
        after = [r for r in pool if r.id in closure and self.encoded.get(r.id) and self.encoded[r.id].terms]
        if after:
            out.append(after)
        cone = self._cone(rule, goal, pool)
        if cone and [r.id for r in cone] != [r.id for r in after]:
            out.append(cone)
        return out

    # -- slices: a subset of the rules on a fresh solver ------------------------------------
    def slice_check(self, rule: Rule, goal: Any, rules: list[Rule], linear: bool = False,
                    timeout: float | None = None, pool: list[Rule] | None = None,
                    held_goal: bool = False, fraction: int = SLICE_FRACTION) -> Outcome:
        """Unsat of the goal with only ``rules`` asserted (then it is unsat with every rule of a
        larger set too): an ``unsat`` Outcome with the core minimized over ``rules``; otherwise
        ``sat`` (of the slice only: no witness) or ``unknown``.

        The question goes to a fresh solver with only the domain axioms of the leaves it reads.
        ``linear``: the small-domain leaves (:data:`SMALL_DOMAIN`) that occur under a nonlinear
        term (a product of two symbolic factors, a division by a symbolic value) are replaced by
        their template values first, so the query is linear, and the core names them
        ``SHAPE:pin <path> = <value>`` (dead *for those values*). When the held values alone make
        the goal impossible, the answer is ``unknown`` with ``reason`` "held" unless
        ``held_goal`` (then the core is the goal and those pins). Identical questions (same
        terms) are answered once per run (``cache``)."""
        parts = [(other.id, z3.And(*self.encoded[other.id].terms)) for other in rules]
        parts.append((f"goal:{rule.id}", goal))
        pinned: list[Leaf] = []
        cache = self.cache
        # the domain axioms belong to the question (a float leaf's grid axiom keeps its template)
        named_rules = frozenset(other.id for other in rules)
        minimize = not named_rules <= self.known_core  # see known_core
        key: tuple = (linear, held_goal, fraction, minimize, tuple((name, term.get_id()) for name, term in parts),
                      self._axiom_ids([term for _, term in parts]))
        if linear:
            names: set[str] = set()
            for _name, term in parts:
                memo = cache.get(("nonlinear", term.get_id()))
                if memo is None:
                    memo = cache[("nonlinear", term.get_id())] = (nonlinear_consts([term]), term)
                names |= memo[0]
            pinned = self._small_leaves(names)
            if not pinned:
                return Outcome("unknown", reason="linear already")  # the plain question was the linear one
            key += (tuple((leaf.name, repr(leaf.template)) for leaf in pinned),)
        if key in cache:
            status, core, _alive = cache[key]
            return Outcome(status, core=list(core))
        alive = list(parts)
        if linear:
            pairs = [pair for leaf in pinned for pair in pin_pairs(leaf)]
            parts = [(name, z3.substitute(term, *pairs)) for name, term in parts]  # not simplified: see goal()
            if z3.is_false(z3.simplify(parts[-1][1])) and not held_goal:
                cache[key] = ("unknown", [], alive)
                return Outcome("unknown", reason="held")
        limit = self.config.timeout if timeout is None else timeout
        result, core = self._check_parts(parts, limit, fraction)
        if result != z3.unsat:
            status = "sat" if result == z3.sat else "unknown"
            cache[key] = (status, [], alive)
            return Outcome(status)
        if linear and not held_goal:
            # the pins alone must leave the goal possible (else they, not the rules, kill it)
            alone, _ = self._check_parts(parts[-1:], limit)
            if alone == z3.unsat:
                cache[key] = ("unknown", [], alive)
                return Outcome("unknown", reason="held")
        named = [name for name in core if name in self.order]
        if len(named) > 1 and minimize:
            kept = [(name, term) for name, term in parts if name in named]
            goal_part = parts[-1]
            for candidate in list(kept):
                trial = [p for p in kept if p is not candidate]
                trial_result, trial_core = self._check_parts(trial + [goal_part], limit)
                if trial_result == z3.unsat:
                    kept, core = trial, trial_core
        labels = list(core)
        if pinned:
            by_name = dict(zip([r.id for r in rules] + [f"goal:{rule.id}"],
                               [z3.And(*self.encoded[r.id].terms) for r in rules] + [goal]))
            read = collect_consts([by_name[name] for name in core if name in by_name])
            labels += [_pin_label(leaf) for leaf in pinned if any(n in read for n in leaf.var_names)]
        cache[key] = ("unsat", labels, alive)
        return Outcome("unsat", core=labels)

    def _axiom_ids(self, terms: list) -> tuple:
        """The ids of the domain axioms of the leaves the terms read (part of a question's key)."""
        key = ("axioms",) + tuple(term.get_id() for term in terms)
        known = self._axiom_memo.get(key)
        if known is not None:
            return known[0]
        ids = set()
        done: set[int] = set()
        alive = self.cache.setdefault(("alive",), {})  # axiom terms stay alive: ids never recycled
        for name in self.consts(terms):
            leaf = self.var_leaf.get(name)
            if leaf is None or id(leaf) in done:
                continue
            done.add(id(leaf))
            for axiom_name, axiom in leaf.axioms:
                alive.setdefault(axiom.get_id(), axiom)
                ids.add((axiom_name, axiom.get_id()))
        out = tuple(sorted(ids))
        self._axiom_memo[key] = (out, list(terms))
        return out

    def _small_leaves(self, names: set[str]) -> list[Leaf]:
        out, seen = [], set()
        for name in sorted(names):
            leaf = self.var_leaf.get(name)
            if leaf is not None and id(leaf) not in seen and _small_domain(leaf.spath) and pin_pairs(leaf):
                seen.add(id(leaf))
                out.append(leaf)
        return out

    def _check_parts(self, parts: list[tuple[str, Any]], timeout: float,
                     fraction: int = SLICE_FRACTION) -> tuple[Any, list[str]]:
        """Check named parts on a fresh solver with the axioms of the leaves they read. A slice
        is a short question: its budget is a fraction of the resource limit (deterministic),
        ``timeout`` only guards the wall clock."""
        solver = IsolatedSolver()
        solver.set("timeout", max(1, int(timeout * 1000)))
        solver.set("rlimit", max(1, self.config.rlimit // fraction))
        solver.set("random_seed", self.config.seed)
        names = self.consts([term for _, term in parts])
        done: set[int] = set()
        for name in sorted(names):  # a set's order follows PYTHONHASHSEED; z3's answer follows the order
            leaf = self.var_leaf.get(name)
            if leaf is None or id(leaf) in done:
                continue
            done.add(id(leaf))
            for axiom_name, axiom in leaf.axioms:
                solver.assert_and_track(axiom, axiom_name)
        for name, term in parts:
            solver.assert_and_track(term, name)
        result = solver.check()
        core = [c.decl().name() for c in solver.unsat_core()] if result == z3.unsat else []
        return result, core

    def _cone(self, rule: Rule, goal: Any, pool: list[Rule] | None = None) -> list[Rule]:
        """Earlier rules (or the rules of ``pool``) that read a leaf the goal reads."""
        names = self.consts([goal])
        out = []
        for earlier in (self.rules[: self.order[rule.id]] if pool is None else pool):
            encoded = self.encoded.get(earlier.id)
            if encoded is not None and encoded.terms and self.consts(encoded.terms) & names:
                out.append(earlier)
        return out

    def _minimize_rules(self, rule: Rule, goal: Any, outcome: Outcome, pool: list[Rule] | None = None) -> Outcome:
        """Drop the rules an unsat core does not need (deletion on a fresh solver, one short check
        each), so the core names the rules that kill ``rule``; a core with ``SHAPE:pin`` is
        minimized linearized (the same values held)."""
        names = {c for c in outcome.core if c in self.order and c != rule.id}
        if len(names) <= 1:
            return outcome
        pinned = any(c.startswith("SHAPE:pin ") for c in outcome.core)
        keep = [r for r in (self.rules if pool is None else pool) if r.id in names]
        smaller = self.slice_check(rule, goal, keep, linear=pinned)
        if smaller.status != "unsat":
            return outcome
        return Outcome("unsat", core=smaller.core, released=outcome.released)

    def _from_hints(self, rule: Rule, hint_sets: list[tuple[frozenset, bool]], pool: list[Rule]) -> Outcome | None:
        """The cores of earlier shapes asked first, as slices over ``pool`` (the rules before
        ``rule`` for :meth:`reach`, all others for :meth:`implied`): an unsat (or early) Outcome,
        else None. When a core needed small-domain values held, the prerequisites are asked
        linearized too."""
        pinned_any = any(pinned for _, pinned in hint_sets)
        if self.known_core and len(hint_sets) > 1:
            # the union of the earlier cores first (one question where each hint would be one):
            # unsat answers it; sat means no hint can be unsat either (each is a subset of its
            # rules, asked linearized only when this is); unknown leaves the hints to ask
            rules = [r for r in pool if r.id in self.known_core and self._encoded_rules([r])]
            if rules:
                goal, early = self.goal(rule)
                if early is not None:
                    return early
                outcome = self._hinted(rule, goal, rules, pinned_any, pool)
                if outcome.status == "unsat":
                    return outcome
                if outcome.status == "sat":
                    hint_sets = []
        for ids, pinned in hint_sets:
            rules = self._encoded_rules([r for r in pool if r.id in ids])
            if rules is None:
                continue
            goal, early = self.goal(rule)
            if early is not None:
                return early
            outcome = self._hinted(rule, goal, rules, pinned, pool)
            if outcome.status == "unsat":
                return outcome
        if pinned_any:
            return self._after_slice(rule, pool, linear=True)
        return None

    def implied(self, rule: Rule, hints: Iterable = (), force: Iterable[str] = (), seen: dict | None = None) -> Outcome:
        """Every document of the shape that passes every other rule passes ``rule`` (unsat).
        Like :meth:`reach`, slices first: the cores of ``hints``, the rule's prerequisites,
        the goal's cone (in the earlier rules, then in all others); a query past its limits is
        asked linearized (``SHAPE:pin`` in the core)."""
        goal, early = self.goal(rule)
        if early is not None:
            return early
        force = sorted(set(force))
        self.reset_solver()
        if not force:
            outcome = self._from_hints(rule, _hint_sets(hints), [other for other in self.rules if other.id != rule.id])
            if outcome is not None:
                return outcome
        self.encode_all()
        goal, early = self.goal(rule)
        if early is not None:
            return early
        if seen is not None and not force:
            fingerprint = self.fingerprint(rule, every=True)
            if fingerprint in seen:
                return Outcome("duplicate", reason="the same formula as a shape already answered")
            seen[fingerprint] = [t for e in self.encoded.values() for t in (e.terms or [])]
        others = [other for other in self.rules if other.id != rule.id]
        blockers = self.structural_blockers(rule, others)
        if blockers:
            return Outcome("trivial", core=blockers[:1], reason="another rule fails by structure")
        self.ensure_solver()
        self.sync([t for e in self.encoded.values() if e.terms for t in e.terms])
        self.close_prefix()
        pool = [other for other in others if self.encoded[other.id].terms]
        slices = self._slices(rule, goal, self.rules[: self.order[rule.id]])
        cone_all = self._cone(rule, goal, pool)
        if cone_all and all([r.id for r in cone_all] != [r.id for r in s] for s in slices):
            slices.append(cone_all)
        if not force:
            for rules in slices:
                outcome = self.slice_check(rule, goal, rules, pool=pool)
                if outcome.status == "unknown":
                    outcome = self.slice_check(rule, goal, rules, linear=True, pool=pool)
                if outcome.status == "unsat":
                    return outcome
        outcome = self._ask(rule, goal, force, prefix_scope=False, pool=pool)
        if outcome.status == "unknown" and not force:
            for rules in slices + [pool]:
                sliced = self.slice_check(rule, goal, rules, linear=True, pool=pool, held_goal=True)
                if sliced.status == "unsat":
                    return sliced
            outcome = self._ask(rule, goal, force, prefix_scope=False, pool=pool, fixed_only=True, previous=outcome)
        return outcome

    def check(self, extra: Any, label: str = "claim", prefix_all: bool = True) -> Outcome:
        """Some document of the shape passes every rule (when ``prefix_all``) and satisfies
        ``extra``."""
        if prefix_all:
            self.encode_all()
        self.reset_solver()
        self.ensure_solver()
        terms = [extra] + ([t for e in self.encoded.values() if e.terms for t in e.terms] if prefix_all else [])
        self.sync(terms)
        self.close_prefix()
        solver = self.solver
        solver.push()
        try:
            if prefix_all:
                for rule in self.rules:
                    encoded = self.encoded[rule.id]
                    if encoded.terms:
                        solver.assert_and_track(z3.And(*encoded.terms), rule.id)
            solver.assert_and_track(extra, label)
            return self._solve()
        finally:
            solver.pop()

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
                return Outcome("unsat", core=self._label(self._minimal_core(fixed + active, core)), released=released)
            released += sorted(pinned)
            active = [lit for lit in active if lit.decl().name() not in pinned]
            if not active:
                break
        result = solver.check(*fixed)
        if result == z3.sat:
            model = solver.model()
            return Outcome("sat", model=model, released=sorted(n for n in names if not _agrees(model, self.pin_leaf[n])))
        if result == z3.unsat:
            core = [c.decl().name() for c in solver.unsat_core()]
            return Outcome("unsat", core=self._label(self._minimal_core(fixed, core)), released=sorted(names))
        return Outcome("unknown", reason=solver.reason_unknown() or reason)

    def _label(self, core: list[str]) -> list[str]:
        """Core names for people: a held pin becomes ``SHAPE:pin <path> = <value>``."""
        out = []
        for name in core:
            leaf = self.pin_leaf.get(name)
            if leaf is None:
                out.append(name)
            else:
                out.append(_pin_label(leaf))
        return out

    def _minimal_core(self, assumptions: list, fallback: list[str]) -> list[str]:
        """The unsat core again, minimized by z3 (names of tracked assertions)."""
        return fallback  # z3's core.minimize ignores time limits; see _minimize_rules

    # -- witnesses --------------------------------------------------------------------------
    def concretize(self, model: Any) -> list[tuple[str, str, Any]]:
        """(kind, file, attrs object) for every document of the shape."""
        return [(kind, file, doc.concretize(model, self.touched)) for kind, file, doc in self.docs]

    def trees(self, model: Any) -> list[tuple[str, str, Any]]:
        return [(kind, file, doc.tree(model, self.touched)) for kind, file, doc in self.docs]


def _agrees(model: Any, leaf: Leaf) -> bool:
    """The model keeps the leaf's template value."""
    try:
        return leaf.decode(model) == leaf.template and type(leaf.decode(model)) is type(leaf.template)
    except Exception:  # noqa: BLE001
        return False


def _pin_label(leaf: Leaf) -> str:
    value = leaf.template
    shown = "absent" if value is ABSENT else json.dumps(value)
    return f"SHAPE:pin {leaf.name} = {shown}"


def _hint_sets(hints: Iterable) -> list[tuple[frozenset, bool]]:
    """``hints`` as ``(rule IDs, pinned)`` pairs: a flat collection of rule IDs is one set."""
    hints = list(hints)
    if not hints:
        return []
    if all(isinstance(h, str) for h in hints):
        return [(frozenset(hints), False)]
    return [(frozenset(ids), bool(pinned)) for ids, pinned in hints]


def _after_closure(rule: Rule, pool: list[Rule]) -> set[str]:
    """The IDs of ``pool`` that ``rule`` names in ``after``, closed transitively."""
    by_id = {r.id: r for r in pool}
    closure: set[str] = set()
    todo = list(rule.after)
    while todo:
        name = todo.pop()
        if name in by_id and name not in closure:
            closure.add(name)
            todo += list(by_id[name].after)
    return closure
