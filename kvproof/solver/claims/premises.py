"""A claim asked against its premises first: the rules it says it follows from (``by``).

No document that passes the premises violates the claim ⇒ no document that passes every rule
does (every rule includes the premises), so a shape on which the premises alone leave the
claim's negation unsat needs no search with all the rules. That search is what costs: with every
rule asserted the products of the worker kind run z3 for seconds per shape (CL004 took 30 s over
30 shapes; against BO001, BO004 and BO008 alone, 2 s).

The question is asked on a session of the premises alone, built with the pins they and the claim
learn, not with the kind's closed pins (closing those encodes every rule on every shape of the
kind: about 4 s for the worker or scheduler kind). A pin holds a field at its template value:
the fields read in Python control flow along the template's path, which every rule (so the
premises too) takes the same way in either build. The premises' pins are therefore among the
kind's, and their build has every document the full search's build has, and more: unsat there
is unsat for the full search. Sat or unknown proves nothing (a document the premises accept may
fail another rule): the shape then gets the full search.
"""

from __future__ import annotations

from typing import Any

import z3

from ..calls import ask_tracked
from ..expression import symbolic_value
from ..pins import DEFAULT_PINS
from ..session import Session
from ..symbolic import collect_consts
from ..verdicts import Outcome

__all__ = ["premise_rules", "against_premises"]


def premise_rules(by: tuple[str, ...], rules: list) -> list:
    """The rules ``by`` names, in registry order (none for no ``by``); a name no rule has is a
    bad claim."""
    known = {rule.id for rule in rules}
    missing = [name for name in by if name not in known]
    if missing:
        raise ValueError(f"by names no rule {', '.join(missing)}")
    return [rule for rule in rules if rule.id in by]


def against_premises(target: Any, shape: Any, premises: list, config: Any) -> Outcome | None:
    """The claim's negation on ``shape`` with only ``premises`` asserted: an ``unsat`` Outcome
    (the shape is decided, its core names premises and axioms), or None (the full search decides).
    ``trivial``: the claim is true on the shape's symbolic documents as built."""
    session = Session(shape, premises, config, set(DEFAULT_PINS))
    try:
        term = symbolic_value(session, target.apply)
    except Exception:  # noqa: BLE001 - the full search evaluates it again and reports what it raises
        return None
    if isinstance(term, bool):
        term = z3.BoolVal(term)
    if not (z3.is_expr(term) and z3.is_bool(term)):
        return None  # not a truth value: the full search says so
    if z3.is_true(z3.simplify(term)):
        return Outcome("trivial")
    goal, label = z3.Not(term), f"not:{target.id}"
    outcome = _plain(session, goal, label)
    if outcome.status == "unknown":  # past the budget: held small-domain values, as the full search does
        outcome = session.check(goal, label=label)
    return outcome if outcome.status == "unsat" else None


def _plain(session: Session, goal: Any, label: str) -> Outcome:
    """The question without soft pins: they steer a search toward a model near the template,
    and a holding claim has none (with them the relax loop asks again and again: 3x the time)."""
    config = session.config
    parts = [(rule.id, z3.And(*session.encoded[rule.id].terms)) for rule in session.rules
             if session.encoded.get(rule.id) is not None and session.encoded[rule.id].terms]
    parts.append((label, goal))
    answer, core, reason = ask_tracked(parts, session.var_leaf, collect_consts([term for _, term in parts]),
                                       timeout=config.timeout, rlimit=config.rlimit, seed=config.seed)
    if answer == z3.unsat:
        return Outcome("unsat", core=core)
    return Outcome("sat" if answer == z3.sat else "unknown", reason=reason)
