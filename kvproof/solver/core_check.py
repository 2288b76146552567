"""The proof of a cached dead verdict (:mod:`kvproof.solver.proof_cache`): written once, re-solved
on every hit.

A dead verdict is one unsat answer per shape the search asked (:attr:`RuleResult.steps`): each
answer's unsat core names the assertions it needed (rule IDs, ``goal:R``, domain axioms
``LD:*``/``SHAPE:*``, held pins ``SHAPE:pin <leaf> = <value>``). Only the core's labelled
assertions of the shape's encoding make its question (:func:`session_question`: the core's rules
and goal encoded, its axioms, held values substituted), taken from the session that answered
while the prover searches (``Prover.keep_proofs``) or from the shape built again
(:func:`core_question`). When the verdict is stored (:func:`proof_payload`) each question is
written as SMT-LIB2 text from a fresh z3 context, its terms asserted plainly; identical questions
are written once, and every one must be unsat or nothing is stored. A re-check
(:func:`recheck`) parses each question its steps point at into one fresh z3 context and asks it
again: only unsat is accepted (sat, unknown, a text that does not parse reject the entry, and the
rule is proved again), so the budget's nondeterminism can only cost a re-proof.

The stored text stands in for the encoding: it is believed only under the key it was written
with, which covers every line of kvproof (the package digest, :mod:`~kvproof.solver.proof_cache`),
every rule, the bound, the budget, the examples and the z3 and Python versions. Any code change
re-proves the dead verdicts; under the same code the encoding would build the same terms.
"""

from __future__ import annotations

from typing import Any

import z3

from ..rules.core import Rule
from .calls import Config, interruptible_check
from .pins import pin_label, pin_pairs, small_domain
from .session import Session
from .shapes import Shape

__all__ = ["core_question", "session_question", "proof_payload", "recheck"]


def proof_payload(rule: Rule, rules: list[Rule], config: Config, steps: list) -> dict | None:
    """The JSON form of a dead verdict's steps ``(shape, pins, core, question)`` (``question``: the
    core's assertions the prover took from its session, or None: built here from the shape): per
    step the shape's name, its core's labels and the index of its question in ``questions`` (the
    SMT-LIB2 text of the core's assertions, each distinct question once). None when a core is not
    a question of today's encoding (:func:`core_question`) or a question's text is not unsat: not
    kept."""
    by_id = {r.id: r for r in rules}  # once for every step
    index: dict[tuple, int] = {}  # (label, term id) of a question -> its text's index
    texts: dict[str, int] = {}
    keep: list = []  # the terms stay alive while their ids key ``index``: an id is never reused
    out = []
    for shape, pins, core, *made in steps:
        core = [str(label) for label in core]
        # the question the prover took from its own session (Prover.keep_proofs), else built here
        asserted = made[0] if made and made[0] is not None else \
            core_question(rule, rules, by_id, config, shape, set(pins), core)
        if asserted is None:
            return None
        # the same terms are the same question (z3 makes one term of equal ones): written once
        question = tuple(sorted((name, term.get_id()) for name, term in asserted))
        if question not in index:
            # written from a fresh context: the text's names follow the question alone, not what
            # the process built before (the same entry bytes from every run)
            solver = z3.Solver(ctx=z3.Context())
            for _, term in asserted:
                solver.add(term.translate(solver.ctx))
            try:
                text = solver.to_smt2()
            except z3.Z3Exception:
                return None
            index[question] = texts.setdefault(text, len(texts))
            keep.append(asserted)
        out.append({"shape": shape.name, "core": core, "question": index[question]})
    questions = list(texts)
    if not _unsat(questions, config):
        return None
    return {"questions": questions, "steps": out}


def recheck(payload: dict, config: Config) -> bool:
    """Every question the stored ``steps`` point at is unsat again (:func:`proof_payload`'s form;
    the steps may be a part of the proof's: the questions they point at are asked, each once)."""
    try:
        questions, steps = payload["questions"], payload["steps"]
        if not steps or not isinstance(questions, list):
            return False
        wanted: set[int] = set()
        for step in steps:
            index = step["question"]
            if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(questions)
                    or not isinstance(questions[index], str) or not isinstance(step["shape"], str)
                    or not isinstance(step["core"], list)):
                return False
            wanted.add(index)
        return _unsat([questions[i] for i in sorted(wanted)], config)
    except (KeyError, TypeError, ValueError, AttributeError):  # ValueError: a text z3 cannot take (a lone surrogate)
        return False


def _unsat(texts: list[str], config: Config) -> bool:
    """Every SMT-LIB2 text parses and is unsat, each asked on a fresh solver of one fresh z3
    context with the budget of ``config``."""
    ctx = z3.Context()
    for text in texts:
        solver = z3.Solver(ctx=ctx)
        solver.set("timeout", max(1, int(config.timeout * 1000)))
        solver.set("rlimit", max(1, config.rlimit))
        solver.set("random_seed", config.seed)
        try:
            solver.from_string(text)
        except z3.Z3Exception:
            return False
        if interruptible_check(solver, ctx) != z3.unsat:
            return False
    return True


def core_question(rule: Rule, rules: list[Rule], by_id: dict[str, Rule], config: Config, shape: Shape,
                  pins: set[str], core: list[str]) -> list[tuple[str, Any]] | None:
    """The labelled assertions of today's encoding of ``shape`` (built with ``pins``) that ``core``
    names, as ``(label, term)``: the core's rules and goal encoded (with the held values
    substituted as the search held them) and its axioms. None when a label is not one today's
    encoding has (or a held value the search never holds), a core names a rule after ``rule``, or
    the encoding needs other pins. The terms live in z3's main context; keep them alive while
    their ids are compared."""
    return session_question(Session(shape, rules, config, set(pins)), rule, by_id, pins, core)


def session_question(session: Session, rule: Rule, by_id: dict[str, Rule], pins: set[str],
                     core: list[str]) -> list[tuple[str, Any]] | None:
    """:func:`core_question` on a session of the shape already built: a fresh one, or the one
    whose question the core answered (the prover, while it searches: nothing is built again)."""
    named = [label for label in core if label in session.order]
    # a rule after ``rule`` is not asserted by its question: a core naming one is not its proof
    if any(session.order[name] >= session.order[rule.id] for name in named):
        return None
    goal_label = f"goal:{rule.id}"
    parts: list[tuple[str, Any]] = []
    for name in named:
        encoded = session.encode(by_id[name])
        if encoded.error is not None or not encoded.terms:
            return None
        parts.append((name, z3.And(*encoded.terms)))
    if goal_label in core:
        goal, early = session.goal(rule)
        if early is not None or goal is None:
            return None
        parts.append((goal_label, goal))
    if session.pins != pins or session.built_pins != frozenset(pins):
        return None  # today's encoding needs other pins: the stored build is not today's
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
        return None  # a label today's encoding does not have (or a held value the search never holds)
    if pairs:  # held as the search held them: the parts with those leaves' template values substituted
        parts = [(name, z3.substitute(term, *pairs)) for name, term in parts]
    return asserted + parts
