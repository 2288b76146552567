"""Slices: a question asked with a subset of the rules on a fresh solver.

Unsat with fewer rules is unsat with all of them, and a slice is a much smaller query: the
rule's prerequisites (``after``), the rules that share a leaf with the goal (its cone), the
rules of an earlier shape's core. ``linear`` slices hold the small-domain leaves under a
nonlinear term at their template values (``SHAPE:pin`` in the core: dead *for those values*).
"""

from __future__ import annotations

from typing import Any

import z3

from ..rules.core import Rule
from .calls import ask_tracked
from .pins import nonlinear_consts, pin_label, pin_pairs, small_domain
from .symbolic import Leaf, collect_consts, per_conjunct
from .verdicts import Outcome

__all__ = ["Slices", "SLICE_FRACTION", "HELD_FRACTION"]

#: A slice question (a subset of the rules on a fresh solver) gets ``rlimit // SLICE_FRACTION``
#: (500,000 units by default). Every slice of ``prove --all`` that ends at all ends under 230,000
#: units; the two that do not ran to the limit, 1 s of nothing at a fifth (measured).
SLICE_FRACTION = 10
#: The unpinned look after the held values alone decided a goal (``_held``) gets ``rlimit //
#: HELD_FRACTION`` (100,000 units by default): VC007's products run to the limit there (unknown:
#: the held answer stands); at the slice budget that was a fifth of VC007's time. (At 1/500 the
#: looks were cheaper but the answers moved so that VC007 took twice as long: measured.)
HELD_FRACTION = 50


class Slices:
    """The slice questions of a :class:`~kvproof.solver.session.Session`."""

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
                    memo = cache[("nonlinear", term.get_id())] = (per_conjunct(nonlinear_consts, [term]), term)
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
            labels += [pin_label(leaf) for leaf in pinned if any(n in read for n in leaf.var_names)]
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
            if leaf is not None and id(leaf) not in seen and small_domain(leaf.spath) and pin_pairs(leaf):
                seen.add(id(leaf))
                out.append(leaf)
        return out

    def _check_parts(self, parts: list[tuple[str, Any]], timeout: float,
                     fraction: int = SLICE_FRACTION) -> tuple[Any, list[str]]:
        """Check named parts on a fresh solver with the axioms of the leaves they read. A slice
        is a short question: its budget is a fraction of the resource limit (deterministic),
        ``timeout`` only guards the wall clock."""
        result, core, _ = ask_tracked(parts, self.var_leaf, self.consts([term for _, term in parts]),
                                      timeout=timeout, rlimit=self.config.rlimit // fraction,
                                      seed=self.config.seed)
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
