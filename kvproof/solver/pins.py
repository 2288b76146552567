"""Pinning: the leaves of a shape held at their template values.

A leaf is *pinned* (built as a plain Python value, not a z3 term) when a rule body reads it in
Python control flow or hands it to a helper that needs a concrete value: the body raises, the
leaves involved are named in a :class:`NeedPins`, and the shape is built again with them pinned
(:func:`kvproof.solver.encode.encode_rule`). A *soft pin* (``pin <leaf>``) is the assumption
"this leaf keeps its template value" in a solver question; a *held* pin (``SHAPE:pin`` in a core)
is a small-domain leaf substituted by its template value to keep a query linear.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, TypeVar

import z3

from ..diagnostics import KvproofError
from ..logic import ConcreteRequired
from ..models.codec import ABSENT
from .native import expr_at, raw_api
from .symbolic import Leaf, collect_consts

__all__ = ["DEFAULT_PINS", "SMALL_DOMAIN", "NeedPins", "small_domain", "spaths_of", "learning_pins",
           "PIN_ROUNDS", "nonlinear_consts", "pin_pairs", "pin_label", "agrees"]

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


class NeedPins(KvproofError):
    """A rule body (or a claim) read these leaves (schema paths) as concrete values: pin them and
    build the shape again."""

    def __init__(self, spaths: set[str]):
        super().__init__(", ".join(sorted(spaths)))
        self.spaths = spaths


def small_domain(spath: str) -> bool:
    return spath.rsplit(".", 1)[-1] in SMALL_DOMAIN


def spaths_of(exc: ConcreteRequired, var_leaf: dict[str, Leaf]) -> set[str]:
    """The schema paths of the leaves a :class:`~kvproof.logic.ConcreteRequired` names: its
    ``leaf`` (a symbolic value read as a bool), else the leaves of its ``terms``."""
    if exc.leaf is not None:
        return {exc.leaf.spath}
    if exc.terms:
        leaves = [var_leaf.get(name) for name in collect_consts(exc.terms)]
        return {leaf.spath for leaf in leaves if leaf is not None}
    return set()


T = TypeVar("T")

#: Attempts of one encoding or evaluation before it gives up learning pins (a shape of the
#: examples learns at most 13).
PIN_ROUNDS = 50


def learning_pins(attempt: Callable[[], T], pins: set[str], rounds: int) -> T | None:
    """``attempt()`` until it stops asking for pins (:class:`NeedPins`, whose leaves join ``pins``:
    the next attempt builds with them); None after ``rounds`` attempts."""
    for _round in range(rounds):
        try:
            return attempt()
        except NeedPins as need:
            pins |= need.spaths
    return None


#: z3 operators that make a term nonlinear when two operands (a product) or the divisor (a
#: division, a modulo) are not constants.
_NONLINEAR_OPS = frozenset({z3.Z3_OP_MUL, z3.Z3_OP_IDIV, z3.Z3_OP_MOD, z3.Z3_OP_REM, z3.Z3_OP_DIV, z3.Z3_OP_POWER})


def nonlinear_consts(terms: Iterable[Any]) -> set[str]:
    """Names of the constants that occur under a nonlinear node of the terms: a product with two
    or more non-constant factors, or a division/modulo by a non-constant (every operand's
    constants). Empty: the terms are linear."""
    api = raw_api()  # z3's C API without the wrappers' per-call work (native._Raw)
    ast_id, ast_kind, to_app, num_args = api.ast_id, api.ast_kind, api.to_app, api.num_args
    app_decl, decl_kind, app_arg = api.app_decl, api.decl_kind, api.app_arg
    ctx = z3.main_ctx().ref().value
    app_kind = z3.Z3_APP_AST
    uninterpreted = z3.Z3_OP_UNINTERPRETED
    ground: dict[int, bool] = {}  # ast id -> no uninterpreted constant below
    out: set[str] = set()
    nonlinear: list = []
    stack = [(t.as_ast().value, False) for t in terms]
    while stack:
        ast, done = stack.pop()
        ident = ast_id(ctx, ast)
        if ident in ground and not done:
            continue
        if ast_kind(ctx, ast) != app_kind:
            ground[ident] = True
            continue
        app = to_app(ctx, ast)
        count = num_args(ctx, app)
        decl = app_decl(ctx, app)
        if count == 0:
            ground[ident] = decl_kind(ctx, decl) != uninterpreted
            continue
        args = [app_arg(ctx, app, i) for i in range(count)]
        if not done:
            stack.append((ast, True))
            stack.extend((arg, False) for arg in args)
            continue
        flags = [ground[ast_id(ctx, arg)] for arg in args]
        ground[ident] = all(flags)
        kind = decl_kind(ctx, decl)
        if kind in _NONLINEAR_OPS:
            if kind == z3.Z3_OP_MUL:
                hit = sum(1 for flag in flags if not flag) >= 2
            else:
                hit = not flags[-1]
            if hit:
                nonlinear.extend(expr_at(arg) for arg, flag in zip(args, flags) if not flag)
    if nonlinear:
        out = collect_consts(nonlinear)
    return out


#: Pure memoization: the pairs are a function of the key alone (the leaf's name and variables fix
#: its z3 constants, the template's type and repr its value), and z3 terms are immutable.
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


def pin_label(leaf: Leaf) -> str:
    """A held pin for people: ``SHAPE:pin <leaf> = <template value>``."""
    value = leaf.template
    shown = "absent" if value is ABSENT else json.dumps(value)
    return f"SHAPE:pin {leaf.name} = {shown}"


def agrees(model: Any, leaf: Leaf) -> bool:
    """The model keeps the leaf's template value."""
    try:
        return leaf.decode(model) == leaf.template and type(leaf.decode(model)) is type(leaf.template)
    except Exception:  # noqa: BLE001
        return False
