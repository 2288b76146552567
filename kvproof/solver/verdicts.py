"""The questions a session answers and their answers.

:class:`Outcome` is one answer; :class:`Questions` (a part of :class:`~kvproof.solver.session.Session`)
asks them: :meth:`~Questions.reach` (some document of the shape passes every rule before R and
fails R: R is reachable), :meth:`~Questions.implied` (every document that passes the others
passes R: R is redundant) and :meth:`~Questions.check` (a claim's counterexample). Each asks
small slices first (:mod:`kvproof.solver.slices`), then the full question on the session's
solver with the relax loop (:meth:`~kvproof.solver.session.Session._relax`).
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs
import z3

from ..rules.core import Rule
from .pins import small_domain

__all__ = ["Outcome", "Questions"]


@attrs.define
class Outcome:
    """The answer of one session to one question."""

    status: str  # sat | unsat | unknown | trivial | vacuous | error | duplicate
    model: Any = None
    core: list[str] = attrs.field(factory=list)
    reason: str = ""
    released: list[str] = attrs.field(factory=list)  # soft pins released to reach the answer


class Questions:
    """The questions of a :class:`~kvproof.solver.session.Session` (its encodings, solver and
    slices are the session's)."""

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
        return [lit for lit in self.pin_lits if small_domain(self.pin_leaf[lit.decl().name()].spath)]

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



def _hint_sets(hints: Iterable) -> list[tuple[frozenset, bool]]:
    """``hints`` as ``(rule IDs, pinned)`` pairs: a flat collection of rule IDs is one set."""
    hints = list(hints)
    if not hints:
        return []
    if all(isinstance(h, str) for h in hints):
        return [(frozenset(hints), False)]
    return [(frozenset(ids), bool(pinned)) for ids, pinned in hints]

