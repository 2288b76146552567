"""kvproof.solver.native: z3's C entry points answer as z3's own wrappers do (by either way of
finding them), and the solver process's tuning sets what it says."""

from __future__ import annotations

import gc

import pytest
import z3

from kvproof.solver import native
from kvproof.solver.pins import nonlinear_consts
from kvproof.solver.symbolic import collect_consts


def _walk(api: native._Raw, term: z3.ExprRef) -> list[tuple]:
    """Every node of ``term`` as (id, kind, number of args, decl kind) by the raw entry points."""
    ctx = z3.main_ctx().ref().value
    out, stack, seen = [], [term.as_ast().value], set()
    while stack:
        ast = stack.pop()
        ident = api.ast_id(ctx, ast)
        if ident in seen:
            continue
        seen.add(ident)
        if api.ast_kind(ctx, ast) != z3.Z3_APP_AST:
            out.append((ident, None, None, None))
            continue
        app = api.to_app(ctx, ast)
        count = api.num_args(ctx, app)
        out.append((ident, count, api.decl_kind(ctx, api.app_decl(ctx, app)),
                    api.symbol_string(ctx, api.decl_name(ctx, api.app_decl(ctx, app))).decode()))
        stack += [api.app_arg(ctx, app, i) for i in range(count)]
    return sorted(out, key=lambda row: row[0])


def _expected(term: z3.ExprRef) -> list[tuple]:
    out, stack, seen = [], [term], set()
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.z3core.Z3_get_ast_kind(node.ctx_ref(), node.as_ast()) != z3.Z3_APP_AST:  # a numeral, a variable
            out.append((node.get_id(), None, None, None))
            continue
        out.append((node.get_id(), node.num_args(), node.decl().kind(), node.decl().name()))
        stack += node.children()
    return sorted(out, key=lambda row: row[0])


def _term() -> z3.ExprRef:
    x, y, z = z3.Ints("x y z")
    flag = z3.Bool("flag")
    return z3.And(x * y > 3, z3.Or(flag, x % z == 1), z * 3 + y <= 7, z3.Not(x == z3.IntVal(2)))


def test_the_raw_entry_points_answer_as_z3s_wrappers() -> None:
    term = _term()
    assert _walk(native.raw_api(), term) == _expected(term)
    assert collect_consts([term]) == {"x", "y", "z", "flag"}
    assert nonlinear_consts([term]) == {"x", "y", "z"}  # x*y, and x % z (a symbolic divisor)
    assert nonlinear_consts([_term().arg(2)]) == set()  # z*3 + y <= 7 is linear
    assert native.expr_at(term.as_ast().value).eq(term)


def test_a_z3_whose_wrappers_keep_their_functions_otherwise_is_called_through_them(monkeypatch) -> None:
    class Wrappers:  # z3core's functions, none with the C function as its default argument
        def __getattr__(self, name):
            function = getattr(z3.z3core, name)
            return lambda *args: function(*args)

    monkeypatch.setattr(native, "z3core", Wrappers())
    native.raw_api.cache_clear()
    try:
        api = native.raw_api()
        assert isinstance(api, native._Wrapped)
        term = _term()
        assert _walk(api, term) == _expected(term)
    finally:
        native.raw_api.cache_clear()


@pytest.fixture
def gc_state():
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def test_tuning_a_solver_process_sets_the_collectors_thresholds(gc_state) -> None:
    gc.set_threshold(700, 10, 10)
    native.tune_process.__wrapped__()  # the cached call has run already in this process, or will
    assert gc.get_threshold() == native.SOLVER_GC_THRESHOLDS
