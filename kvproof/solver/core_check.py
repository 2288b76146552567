"""The re-check of a cached dead verdict (:mod:`kvproof.solver.proof_cache`).

A dead verdict is one unsat answer per shape the search asked (:attr:`RuleResult.steps`): each
answer's unsat core names the assertions it needed (rule IDs, ``goal:R``, domain axioms
``LD:*``/``SHAPE:*``, held pins ``SHAPE:pin <leaf> = <value>``). A stored proof keeps, per such
shape, its documents, the pins it was built with and its core. The re-check builds each shape
with today's code and rules, asserts only the labelled assertions of today's encoding and asks
z3 again: unsat of a subset of today's assertions is unsat of all of them. A label today's
encoding does not have, an encoding that needs other pins, or an answer other than unsat fails
the re-check (and the rule is proved again).
"""

from __future__ import annotations

import json
from typing import Any

import z3

from ..rules.core import Rule
from .calls import Config, ask_tracked
from .pins import pin_label, pin_pairs, small_domain
from .session import Session
from .shapes import Shape

__all__ = ["steps_payload", "recheck"]


def steps_payload(steps: list) -> dict:
    """The JSON form of a dead verdict's steps: document texts and pin sets kept once each
    (a mutation shares all but one document, and the pins, with its base), shapes by index."""
    texts: dict[str, int] = {}
    pin_sets: dict[tuple, int] = {}
    out = []
    for shape, pins, core in steps:
        documents = []
        for kind, file, tree in shape.documents:
            text = json.dumps(tree, ensure_ascii=False)  # insertion order kept: the build follows it
            documents.append([kind, file, texts.setdefault(text, len(texts))])
        out.append({"shape": shape.name, "documents": documents,
                    "pins": pin_sets.setdefault(tuple(pins), len(pin_sets)), "core": list(core)})
    return {"texts": list(texts), "pins": [list(p) for p in pin_sets], "steps": out}


def recheck(rule: Rule, rules: list[Rule], config: Config, payload: dict) -> bool:
    """Every stored step is unsat again with today's encoding restricted to its core's labels."""
    try:
        texts = payload["texts"]
        pin_sets = payload["pins"]
        steps = payload["steps"]
        if not steps or not isinstance(texts, list) or not isinstance(pin_sets, list):
            return False
        trees: dict[int, Any] = {}
        by_id = {r.id: r for r in rules}  # once for every step
        answered: dict = {}
        keep: list = []
        for step in steps:
            documents = []
            for kind, file, index in step["documents"]:
                if index not in trees:
                    trees[index] = json.loads(texts[index])
                documents.append((str(kind), str(file), trees[index]))
            pins = {str(p) for p in pin_sets[step["pins"]]}
            core = [str(label) for label in step["core"]]
            if not _unsat_again(rule, rules, by_id, config, Shape(str(step["shape"]), tuple(documents)), pins, core,
                                answered, keep):
                return False
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False
    return True


def _unsat_again(rule: Rule, rules: list[Rule], by_id: dict[str, Rule], config: Config, shape: Shape,
                 pins: set[str], core: list[str], answered: dict, keep: list) -> bool:
    """One step: the labelled assertions of today's encoding of ``shape`` are unsat."""
    session = Session(shape, rules, config, set(pins))
    named = [label for label in core if label in session.order]
    # a rule after ``rule`` is not asserted by its question: a core naming one is not its proof
    if any(session.order[name] >= session.order[rule.id] for name in named):
        return False
    goal_label = f"goal:{rule.id}"
    parts: list[tuple[str, Any]] = []
    for name in named:
        encoded = session.encode(by_id[name])
        if encoded.error is not None or not encoded.terms:
            return False
        parts.append((name, z3.And(*encoded.terms)))
    if goal_label in core:
        goal, early = session.goal(rule)
        if early is not None or goal is None:
            return False
        parts.append((goal_label, goal))
    if session.pins != pins or session.built_pins != frozenset(pins):
        return False  # today's encoding needs other pins: the stored build is not today's
    wanted = {label for label in core if label not in session.order and label != goal_label}
    asserted: list[tuple[str, Any]] = []
    found: set[str] = set()
    # an axiom's label names its leaf (``LD:int-range <leaf>``): those leaves first, every leaf
    # when a label is not found that way
    named = {label.split(" ", 1)[1] for label in wanted if " " in label}
    done: set[int] = set()
    for every in (False, True):
        for leaf in session.leaves():
            if id(leaf) in done or not (every or leaf.name in named):
                continue
            done.add(id(leaf))
            for name, axiom in leaf.axioms:
                if name in wanted:
                    asserted.append((name, axiom))
                    found.add(name)
        if all(label.startswith("SHAPE:pin ") for label in wanted - found):
            break
    held = {label for label in wanted if label.startswith("SHAPE:pin ")}
    pairs: list = []
    if held:
        for leaf in session.leaves():
            label = pin_label(leaf)
            if label in held and label not in found and small_domain(leaf.spath) and pin_pairs(leaf):
                pairs += pin_pairs(leaf)
                found.add(label)
    if found != wanted:
        return False  # a label today's encoding does not have (or a held value the search never holds)
    if pairs:  # held as the search held them: the parts with those leaves' template values substituted
        parts = [(name, z3.substitute(term, *pairs)) for name, term in parts]
    asserted += parts
    # the same terms are the same question (z3 makes one term of equal ones): asked once
    question = tuple(sorted((name, term.get_id()) for name, term in asserted))
    if question in answered:
        return answered[question]
    # the axioms are among ``asserted`` already (only the core's): no leaves to add
    answer, _, _ = ask_tracked(asserted, {}, (), timeout=config.timeout, rlimit=config.rlimit, seed=config.seed)
    answered[question] = unsat = answer == z3.unsat
    keep.append(asserted)  # the terms stay alive: their ids are never reused
    return unsat
