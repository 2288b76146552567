"""Each formula's plain-Python fast path (taken for plain operands) gives exactly the value of its
helper expression (taken for z3 operands): the same call, once with ints and once with the same
ints as z3 constants, on every sign and zero, whose result z3 simplifies to a constant."""

from __future__ import annotations

from fractions import Fraction

import z3
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kvproof.formulas import kernel_blocks, pages, placement, select, view_extents
from kvproof.models.codec import ABSENT

ints = st.integers(min_value=-40, max_value=40)
sizes = st.integers(min_value=0, max_value=1 << 16)


def Z(value):  # noqa: N802 - a constructor
    if isinstance(value, bool):
        return z3.BoolVal(value)
    return z3.IntVal(value)


def value_of(term):
    """The constant a z3 term simplifies to (as a Python value)."""
    if isinstance(term, (bool, int, Fraction)):
        return term
    simple = z3.simplify(term)
    if z3.is_true(simple):
        return True
    if z3.is_false(simple):
        return False
    if z3.is_int_value(simple):
        return simple.as_long()
    raise AssertionError(f"not a constant: {term}")


def agree(formula, *args, **kwargs):
    plain = formula(*args, **kwargs)
    assert type(plain) in (bool, int), f"{formula.__name__} did not take its plain path: {plain!r}"
    lifted = formula(*[Z(a) if isinstance(a, (bool, int)) else [Z(v) for v in a] if isinstance(a, list) else a
                       for a in args], **kwargs)
    assert value_of(lifted) == plain, (formula.__name__, args, plain, lifted)
    return plain


@given(block=ints, kernel=ints, whole=st.booleans())
def test_kernel_block_fits(block, kernel, whole) -> None:
    fits = agree(kernel_blocks.kernel_block_fits, block, kernel, whole)
    assert fits == (kernel > 0 and block % kernel == 0 and (not whole or kernel == block))


@given(blocks=ints, block=ints, kernel=ints, stride=ints)
def test_kernel_block_arithmetic(blocks, block, kernel, stride) -> None:
    agree(kernel_blocks.kernel_blocks_per_block, block, kernel)
    agree(kernel_blocks.kernel_rows_per_block, block, kernel, stride)
    agree(kernel_blocks.kernel_blocks_on_axis, blocks, block, kernel, stride)
    agree(kernel_blocks.kernel_block_id, blocks, stride, block, kernel, stride)


@given(block=ints, tokens=ints)
def test_num_kernel_states(block, tokens) -> None:
    states = agree(pages.num_kernel_states, block, tokens)
    assert states == (block // tokens if tokens > 0 else 1)


@given(unpadded=sizes, padded=st.one_of(st.none(), st.just(ABSENT), sizes))
def test_padding(unpadded, padded) -> None:
    page = pages.padded_page_size_bytes(unpadded, padded)
    fits = pages.padding_fits(unpadded, padded)
    if padded is None or padded is ABSENT:
        assert (page, fits) == (unpadded, True)
    else:
        assert page == agree(pages.padded_page_size_bytes, unpadded, padded) == padded
        assert fits == agree(pages.padding_fits, unpadded, padded) == (padded >= unpadded)


@given(head=sizes, head_v=sizes, size=st.sampled_from([1, 2, 4]), content=st.one_of(st.none(), st.just(ABSENT), sizes))
def test_attention_state_content(head, head_v, size, content) -> None:
    value = pages.attention_state_content_size_bytes(head, head_v, size, content)
    assert value == ((head + head_v) * size if content is None or content is ABSENT else content)
    assert value_of(pages.attention_state_content_size_bytes(Z(head), Z(head_v), Z(size), content)) == value


@given(values=st.lists(ints, max_size=5), index=ints)
def test_select(values, index) -> None:
    agree(select.select, values, index)


@given(data=st.data(), count=st.integers(0, 5))
def test_ranges_disjoint(data, count) -> None:
    starts = data.draw(st.lists(ints, min_size=count, max_size=count))
    ends = [start + data.draw(st.integers(0, 20)) for start in starts]
    disjoint = agree(placement.ranges_disjoint, starts, ends)
    assert disjoint == all(not (starts[i] < ends[j] and starts[j] < ends[i])
                           for i in range(count) for j in range(i + 1, count))


@settings(max_examples=400)  # pure arithmetic: cheap, and most draws share no byte
@example(start=0, length=10, other_start=0, other_length=10, stride=16, other=None, different=True, blocks=4)
@example(start=0, length=10, other_start=12, other_length=10, stride=16, other=None, different=True, blocks=4)
@given(start=ints, length=st.integers(0, 40), other_start=ints, other_length=st.integers(0, 40),
       stride=st.integers(-5, 40), other=st.one_of(st.none(), st.integers(-5, 40)), different=st.booleans(),
       blocks=st.integers(0, 6))
def test_pages_alias(start, length, other_start, other_length, stride, other, different, blocks) -> None:
    other_stride = stride if other is None else other  # mostly one stride: the pages BO006 compares
    legal = agree(placement.pages_alias_only_same_block_of_other_groups, start, length, other_start, other_length,
                  stride, other_stride, different, blocks)
    if stride == other_stride > 0:  # against an enumeration of the blocks
        overlap = [(b, c) for b in range(blocks) for c in range(blocks)
                   if start + b * stride < other_start + c * stride + other_length
                   and other_start + c * stride < start + b * stride + length]
        assert legal == all(b == c and different for b, c in overlap)


@given(data=st.data(), dims=st.integers(1, 4))
def test_view_dimensions_disjoint(data, dims) -> None:
    shape = data.draw(st.lists(st.integers(0, 6), min_size=dims, max_size=dims))
    strides = data.draw(st.lists(st.integers(-8, 200), min_size=dims, max_size=dims))
    axis = data.draw(st.integers(0, dims - 1))
    element, ratio = data.draw(st.integers(-1, 8)), data.draw(st.integers(0, 4))
    plain = view_extents.dimensions_disjoint(element, shape, strides, axis, ratio)
    # z3 strides keep the shape order reversed: compare where that is the sorted order
    order = view_extents.dimension_order(shape, strides, axis)
    if order == list(reversed([i for i in range(dims) if i != axis])):
        lifted = view_extents.dimensions_disjoint(Z(element), [Z(v) for v in shape], [Z(v) for v in strides], axis,
                                                  Z(ratio))
        assert value_of(lifted) == plain


def test_a_symbolic_block_axis_must_be_pinned() -> None:
    axis = z3.Int("axis")
    try:
        view_extents.concrete_axis(axis)
    except Exception as exc:  # noqa: BLE001 - the exact type is the point
        assert type(exc).__name__ == "ConcreteRequired" and [str(t) for t in exc.terms] == ["axis"]
    else:
        raise AssertionError("a symbolic block axis was accepted")
