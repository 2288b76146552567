"""The formulas (kvproof.formulas) give the same values and verdicts on z3 terms as on ints."""

from __future__ import annotations

from fractions import Fraction

import z3
from hypothesis import given
from hypothesis import strategies as st

from kvproof.logic import concrete_bool
from kvproof.formulas import blocks_per_request as demand
from kvproof.formulas import concurrency, kernel_blocks, pages, pool

sizes = st.integers(min_value=1, max_value=1 << 20)
small = st.integers(min_value=0, max_value=8)


def as_z3(value: int) -> z3.ArithRef:
    return z3.IntVal(value)


def same(concrete, symbolic) -> bool:
    value = z3.simplify(symbolic)
    if z3.is_rational_value(value):
        return Fraction(value.numerator_as_long(), value.denominator_as_long()) == Fraction(concrete)
    return value.as_long() == concrete


def proved(claim) -> bool:
    solver = z3.Solver()
    solver.add(z3.Not(claim))
    return solver.check() == z3.unsat


@given(heads=st.integers(1, 64), block=sizes, tps=st.integers(-1, 16), content=st.integers(1, 4096))
def test_attention_page_size(heads, block, tps, content) -> None:
    concrete = pages.attention_unpadded_page_size_bytes(heads, block, tps, content)
    symbolic = pages.attention_unpadded_page_size_bytes(as_z3(heads), as_z3(block), as_z3(tps), as_z3(content))
    assert same(concrete, symbolic)


@given(block=sizes, denominator=st.integers(1, 8))
def test_fractional_tokens_per_state(block, denominator) -> None:
    tps = Fraction(1, denominator)
    assert pages.num_kernel_states(block, tps) == block // tps
    assert same(block // tps, pages.num_kernel_states(as_z3(block), tps))


@given(length=sizes, block=sizes, dcp=st.integers(1, 8), sharded=st.booleans())
def test_full_attention_blocks(length, block, dcp, sharded) -> None:
    concrete = demand.full_attention_blocks(length, block, dcp, sharded)
    symbolic = demand.full_attention_blocks(as_z3(length), as_z3(block), as_z3(dcp), z3.BoolVal(sharded))
    assert same(concrete, symbolic)


@given(length=sizes, block=sizes, window=sizes, extra=small, in_flight=sizes)
def test_sliding_window_blocks(length, block, window, extra, in_flight) -> None:
    concrete = demand.sliding_window_blocks(length, block, window, extra, in_flight)
    symbolic = demand.sliding_window_blocks(*(as_z3(v) for v in (length, block, window, extra, in_flight)))
    assert same(concrete, symbolic)


@given(length=sizes, block=sizes, chunk=sizes, in_flight=sizes)
def test_chunked_local_blocks(length, block, chunk, in_flight) -> None:
    concrete = demand.chunked_local_blocks(length, block, chunk, in_flight)
    assert same(concrete, demand.chunked_local_blocks(*(as_z3(v) for v in (length, block, chunk, in_flight))))


@given(align=st.booleans(), k=small, c=small)
def test_mamba_blocks(align, k, c) -> None:
    concrete = demand.mamba_blocks(align, k, c)
    assert concrete == (2 + k + c if align else 1 + k)
    assert same(concrete, demand.mamba_blocks(z3.BoolVal(align), as_z3(k), as_z3(c)))


@given(num_blocks=st.integers(0, 1 << 24), terms=st.lists(st.integers(1, 4096), min_size=1, max_size=6),
       length=sizes)
def test_concurrency_value_and_verdict(num_blocks, terms, length) -> None:
    concrete = concurrency.max_concurrency(num_blocks, terms)
    symbolic = concurrency.max_concurrency(as_z3(num_blocks), [as_z3(t) for t in terms])
    assert z3.simplify(symbolic == Fraction(num_blocks, sum(terms)))  # exact in z3
    # The verdict "at least one max-length request fits" agrees.
    assert (concrete >= 1) == concrete_bool(symbolic >= 1)
    tokens = concurrency.kv_cache_size_tokens(symbolic, as_z3(length))
    assert z3.simplify(tokens).as_long() == num_blocks * length // sum(terms)


@given(groups=st.lists(st.lists(st.integers(1, 1 << 22), min_size=1, max_size=5), min_size=1, max_size=5),
       alignment=st.sampled_from([1, 64, 1024, 4224, 33792]), memory=st.integers(0, 1 << 40))
def test_bytes_per_block_and_num_blocks(groups, alignment, memory) -> None:
    concrete = pool.bytes_per_block_block_outermost(groups, alignment)
    symbolic = pool.bytes_per_block_block_outermost([[as_z3(p) for p in g] for g in groups], alignment)
    assert same(concrete, symbolic)
    assert same(pool.num_blocks_for_memory(memory, concrete), pool.num_blocks_for_memory(as_z3(memory), symbolic))
    strides = [[pages.layer_block_stride(p, alignment) for p in g] for g in groups]
    concrete_lo = pool.bytes_per_block_layer_outermost(strides)
    symbolic_lo = pool.bytes_per_block_layer_outermost(
        [[pages.layer_block_stride(as_z3(p), alignment) for p in g] for g in groups])
    assert same(concrete_lo, symbolic_lo)


@given(num_blocks=st.integers(1, 64), kernel=st.sampled_from([16, 32, 64, 128]), ratio=st.integers(1, 8),
       stride=st.integers(0, 5000))
def test_view_coverage(num_blocks, kernel, ratio, stride) -> None:
    block = kernel * ratio
    concrete = kernel_blocks.kernel_blocks_on_axis(num_blocks, block, kernel, stride)
    symbolic = kernel_blocks.kernel_blocks_on_axis(as_z3(num_blocks), as_z3(block), as_z3(kernel), as_z3(stride))
    assert same(concrete, symbolic)
    ident = kernel_blocks.kernel_block_id(num_blocks - 1, ratio - 1, block, kernel, stride)
    assert same(ident, kernel_blocks.kernel_block_id(as_z3(num_blocks - 1), as_z3(ratio - 1), as_z3(block), as_z3(kernel),
                                                     as_z3(stride)))
    # the last kernel block of the last manager block is the last row of the view
    assert ident == concrete - 1


def test_a_symbolic_length_proves_the_swa_plus_one() -> None:
    # S4 as a theorem: once W - 1 + IF >= L, SWA needs cdiv(L, bs) + 1 blocks: one more than full attention.
    length, window, in_flight = z3.Ints("L W IF")
    block = 16
    premise = z3.And(length >= 1, window >= 1, in_flight >= 0, window - 1 + in_flight >= length)
    swa = demand.sliding_window_blocks(length, block, window, 0, in_flight)
    full = demand.full_attention_blocks(length, block)
    assert proved(z3.Implies(premise, swa == full + 1))
    # and it is not a theorem without the premise
    assert not proved(z3.Implies(z3.And(length >= 1, window >= 1, in_flight >= 0), swa == full + 1))
