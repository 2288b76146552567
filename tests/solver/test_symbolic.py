"""Symbolic documents: the stand-ins speak the logic helpers' protocol with Python's semantics,
and a z3 model comes back as a document the strict loader takes."""

from __future__ import annotations

import json

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from kvproof import logic as L
from kvproof.models.codec import ABSENT, dumps
from kvproof.models.documents import load_bytes
from kvproof.models.profile import Profile
from kvproof.models.record import WorkerRecord
from kvproof.solver.encode import strict_bool
from kvproof.solver.shapes import Bound, base_shapes
from kvproof.solver.symbolic import (
    ABSENT_T, BOOL_T, FLOAT_T, INT_T, NULL_T, Leaf, Policy, SymbolicFlowError, SymValue, build,
    collect_consts,
)

SCALARS = st.one_of(
    st.just(ABSENT), st.none(), st.booleans(), st.integers(-5, 5),
    st.sampled_from([0.0, 1.0, 0.5, -2.0, 3.0]),
)


def scalar_leaf() -> tuple[Leaf, SymValue]:
    leaf = Leaf(path="$.x", spath="x", kind="scalar", optional=True,
                tags=(ABSENT_T, NULL_T, INT_T, BOOL_T, FLOAT_T))
    leaf.make("")
    return leaf, leaf.term


def fix(leaf: Leaf, value) -> list:
    """Constraints that make the leaf hold a concrete JSON value."""
    if value is ABSENT:
        return [leaf.tag == ABSENT_T]
    if value is None:
        return [leaf.tag == NULL_T]
    if isinstance(value, bool):
        return [leaf.tag == BOOL_T, leaf.payload[BOOL_T] == value]
    if isinstance(value, int):
        return [leaf.tag == INT_T, leaf.payload[INT_T] == value]
    return [leaf.tag == FLOAT_T, leaf.payload[FLOAT_T] == z3.RealVal(value)]


def evaluate(term, facts) -> bool:
    solver = z3.Solver()
    solver.add(*facts)
    assert solver.check() == z3.sat
    return z3.is_true(solver.model().eval(term, model_completion=True))


@given(SCALARS, st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.0, 1.0, 0.5, 3.0])))
def test_equality_with_a_constant_is_pythons(value, constant) -> None:
    leaf, sym = scalar_leaf()
    expected = value == constant if value is not ABSENT else False
    assert evaluate(sym == constant, fix(leaf, value)) == expected


@given(SCALARS, SCALARS)
def test_same_scalar_and_equality_between_two_leaves(a, b) -> None:
    leaf_a, sym_a = scalar_leaf()
    leaf_b = Leaf(path="$.y", spath="y", kind="scalar", optional=True, tags=leaf_a.tags)
    leaf_b.make("")
    facts = fix(leaf_a, a) + fix(leaf_b, b)
    same = type(a) is type(b) and a == b
    assert evaluate(sym_a.same_scalar(leaf_b.term), facts) == same
    python_eq = a == b if (a is not ABSENT and b is not ABSENT) else (a is ABSENT and b is ABSENT)
    assert evaluate(sym_a == leaf_b.term, facts) == python_eq


@given(SCALARS)
def test_protocol_helpers_agree_with_their_concrete_answers(value) -> None:
    leaf, sym = scalar_leaf()
    facts = fix(leaf, value)
    concrete = None if value is ABSENT else value
    assert evaluate(L.HasKey(sym), facts) == (value is not ABSENT)
    assert evaluate(L.Present(sym), facts) == L.Present(concrete)
    assert evaluate(L.IsInt(sym), facts) == L.IsInt(value)
    assert evaluate(L.IsNumber(sym), facts) == L.IsNumber(value)
    assert evaluate(L.ValueOf(sym) == L.ValueOf(value), facts)
    assert evaluate(L.RealOf(sym) == z3.RealVal(L.RealOf(value)), facts)


def test_required_leaves_are_plain_z3_terms_the_helpers_read_as_present_values() -> None:
    template = base_shapes("worker", Bound())[0].documents[0][2]
    doc = build(WorkerRecord, template)
    blocks = doc.obj.cache.num_blocks
    assert L.is_symbolic(blocks) and z3.is_int(blocks)
    assert type(blocks) is z3.ArithRef  # no leaf class of the solver's own (docs/solver-requests.md 4, 6)
    assert L.IsInt(blocks) is True and L.Present(blocks) is True and L.IsNumber(blocks) is True
    assert L.ValueOf(blocks).eq(z3.Int("$.cache.num_blocks"))
    assert str(L.IntIs(blocks, lambda n: n > 0)) == "And(True, $.cache.num_blocks > 0)"
    solver = z3.Solver()
    solver.add(L.SameScalar(blocks, 7) != (blocks == 7))
    assert solver.check() == z3.unsat
    assert L.SameScalar(blocks, True) is False and L.SameScalar(blocks, 7.0) is False and L.SameScalar(blocks, None) is False


def test_axioms_are_named_by_kind_and_path() -> None:
    template = base_shapes("profile", Bound())[0].documents[0][2]
    doc = build(Profile, template)
    names = {name for name, _ in doc.axioms}
    assert "LD:signed-range $.resources.cache_groups[0].page_size_bytes" in names
    assert "LD:int-range $.resources.max_num_tokens" in names
    assert "LD:literal $.resources.cache_groups[0].kind" in names
    assert "SHAPE:float-grid $.resources.runtime_memory.gpu_memory_utilization" in names


@pytest.mark.parametrize("kind", ["profile", "worker", "scheduler"])
def test_template_values_concretize_to_a_loadable_document(kind) -> None:
    from kvproof.solver.shapes import document_class
    from kvproof.solver.symbolic import template_tree

    for shape in base_shapes(kind, Bound())[:3]:
        _, file, tree = shape.documents[0]
        doc = build(document_class(kind), tree, policy=Policy(pinned=frozenset({"block_axis"})))
        text = dumps(template_tree(doc))
        assert json.loads(text) == tree
        load_bytes(text.encode(), file=file)


def test_a_model_concretizes_through_the_codec() -> None:
    template = base_shapes("profile", Bound())[0].documents[0][2]
    doc = build(Profile, template)
    group = doc.obj.resources.cache_groups[0]
    solver = z3.Solver()
    for _name, axiom in doc.axioms:
        solver.add(axiom)
    solver.add(group.page_size_bytes == 12345, group.blocks_per_request.tag == NULL_T,
               group.kind == z3.StringVal("convolution"))
    assert solver.check() == z3.sat
    tree = doc.tree(solver.model())
    assert tree["resources"]["cache_groups"][0]["page_size_bytes"] == 12345
    assert tree["resources"]["cache_groups"][0]["blocks_per_request"] is None
    assert tree["resources"]["cache_groups"][0]["kind"] == "convolution"
    load_bytes(dumps(tree).encode())


def test_symbolic_control_flow_is_caught_not_compared_by_structure() -> None:
    x, y = z3.Ints("x y")
    with strict_bool():
        with pytest.raises(SymbolicFlowError):
            bool(x == y)
        assert bool(z3.BoolVal(True)) is True
    assert bool(x == x) is True  # z3's own structural answer outside the context


def test_collect_consts_finds_the_leaves_of_a_term() -> None:
    a, b = z3.Int("a"), z3.String("b")
    assert collect_consts([z3.And(a > 1, b == "q", z3.If(a == 2, a, 3) > 0)]) == {"a", "b"}


@given(SCALARS, st.one_of(st.none(), st.integers(-3, 3)))
def test_or_default_matches_the_concrete_helper(value, default) -> None:
    leaf, sym = scalar_leaf()
    facts = fix(leaf, value)
    concrete = L.OrDefault(value, default)
    result = sym.or_default(default)
    if default is None:
        other = Leaf(path="$.z", spath="z", kind="scalar", optional=True, tags=leaf.tags)
        other.make("")
        expected = ABSENT if concrete is ABSENT else concrete
        assert evaluate(result.same_scalar(other.term), facts + fix(other, expected))
    elif isinstance(concrete, int) and not isinstance(concrete, bool):
        assert evaluate(result == concrete, facts)


@given(SCALARS, SCALARS)
def test_logic_same_scalar_and_or_default_on_leaves_are_the_concrete_helpers(a, b) -> None:
    # docs/solver-requests.md 1-2 (F101, F104): kvproof.logic delegates to the leaves
    leaf_a, sym_a = scalar_leaf()
    leaf_b = Leaf(path="$.y", spath="y", kind="scalar", optional=True, tags=leaf_a.tags)
    leaf_b.make("")
    facts = fix(leaf_a, a) + fix(leaf_b, b)
    assert evaluate(L.SameScalar(sym_a, leaf_b.term), facts) == L.SameScalar(a, b)
    assert evaluate(L.SameScalar(sym_a, b), fix(leaf_a, a)) == L.SameScalar(a, b)
    assert evaluate(L.SameScalar(a, leaf_b.term), fix(leaf_b, b)) == L.SameScalar(a, b)
    assert (evaluate(L.SameScalar(L.OrDefault(sym_a, None), L.OrDefault(leaf_b.term, None)), facts)
            == L.SameScalar(L.OrDefault(a, None), L.OrDefault(b, None)))


@given(st.one_of(st.just(ABSENT), st.none(), st.sampled_from(["none", "align", "\\u{61}lign"])),
       st.sampled_from(["none", "align", "\\u{61}lign"]))
def test_or_default_of_a_string_leaf_with_a_string_default(value, default) -> None:
    leaf = Leaf(path="$.mode", spath="mode", kind="str", optional=True, tags=(ABSENT_T, NULL_T, 5))
    leaf.make("")
    facts = [leaf.tag == (ABSENT_T if value is ABSENT else NULL_T if value is None else 5)]
    if isinstance(value, str):
        facts.append(leaf.payload[5] == L._string_val(value))
    expected = L.OrDefault(value, default)
    assert evaluate(L.SameScalar(L.OrDefault(leaf.term, default), expected), facts)
    assert evaluate(L.OrDefault(leaf.term, default) == L._string_val(expected), facts)


def test_a_control_flow_read_is_a_concrete_required_error() -> None:
    assert issubclass(SymbolicFlowError, L.ConcreteRequired) and issubclass(SymbolicFlowError, TypeError)
    x = z3.Int("x")
    with strict_bool(), pytest.raises(L.ConcreteRequired) as caught:
        bool(x > 1)
    assert caught.value.leaf is None and [t.get_id() for t in caught.value.terms] == [(x > 1).get_id()]


def _twin_leaves() -> tuple[SymValue, SymValue, SymValue]:
    """Two leaves of the same name and kind (as two shapes of one kind build them) and a third of
    another name."""
    out = []
    for path in ("$.x", "$.x", "$.y"):
        leaf = Leaf(path=path, spath=path[2:], kind="scalar", optional=True,
                    tags=(ABSENT_T, NULL_T, INT_T, BOOL_T, FLOAT_T))
        leaf.make("")
        out.append(leaf.term)
    return out[0], out[1], out[2]


def test_symbolic_memo_shares_a_result_between_leaves_with_the_same_terms_only() -> None:
    a, twin, other = _twin_leaves()
    calls = []

    def compute(value):
        calls.append(value)
        return value == 3

    first = L.symbolic_memo(compute, a)
    assert L.symbolic_memo(compute, twin).eq(first)  # the twin's terms are a's: not built again
    assert len(calls) == 1
    assert not L.symbolic_memo(compute, other).eq(first)
    assert len(calls) == 2
    assert first.eq(a == 3)  # the term compute would build
    assert L.symbolic_memo(compute, 3) is True and len(calls) == 3  # plain input: computed, not kept


def test_symbolic_table_is_shared_by_symbolic_inputs_and_absent_for_plain_ones() -> None:
    a, twin, other = _twin_leaves()
    table = L.symbolic_table("test", a, 1)
    assert table is not None and L.symbolic_table("test", twin, 1) is table
    assert L.symbolic_table("test", other, 1) is not table
    assert L.symbolic_table("test", twin, 2) is not table
    assert L.symbolic_table("test", 1, 2) is None
    with L.concrete_only():
        assert L.symbolic_table("test", a, 1) is None


def test_per_conjunct_walks_agree_with_the_whole_term() -> None:
    from kvproof.solver.pins import nonlinear_consts
    from kvproof.solver.symbolic import per_conjunct

    x, y, z, w = z3.Ints("x y z w")
    terms = [z3.And(x * y > 3, z + w == 2, z3.And(w % z == 1, x > 0)), z3.And(x * y > 3, y == 1), w * w > 0]
    for walk in (collect_consts, nonlinear_consts):
        assert per_conjunct(walk, terms) == walk(terms)
        assert per_conjunct(walk, terms) == walk(terms)  # again, from the memo
