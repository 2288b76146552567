"""The bytes one manager block of a layer view spans (``vllm/v1/kv_cache_interface.py:360-482``).

A view is a shape and byte strides over the backing with a block axis; one manager block of it is
``ratio`` rows of the block axis (``kernel_blocks.kernel_blocks_per_block``) and every index of the
other dimensions. The block axis selects dimensions, so it must be concrete: a symbolic document
pins it per shape (:class:`kvproof.logic.ConcreteRequired` says so).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..logic import And, ConcreteRequired, If, Implies, concrete, is_symbolic
from .select import select

__all__ = ["concrete_axis", "dimension_order", "view_extent", "dense_bytes", "dimensions_disjoint"]


def concrete_axis(axis: Any) -> int:
    """The block axis, which selects dimensions (a symbolic one is pinned per shape)."""
    if type(axis) is not int and is_symbolic(axis):
        raise ConcreteRequired("block_axis selects dimensions; pin it in the symbolic document's shape", [axis])
    return axis


def dimension_order(shape: Sequence[Any], strides: Sequence[Any], axis: int) -> list[int]:
    """The non-block dimensions from the smallest stride up. Concrete strides are sorted (vLLM's
    layouts permute H and N inside a block); symbolic ones keep the shape order reversed, the
    order the document's shape pins."""
    dims = [i for i in range(len(shape)) if i != axis]
    if is_symbolic(*strides):
        return list(reversed(dims))
    return sorted(dims, key=lambda i: (strides[i], -i))


def view_extent(element_size: Any, shape: Sequence[Any], strides: Sequence[Any], axis: int, ratio: Any) -> Any:
    """Bytes from a view's first byte of a manager block to its last, inclusive:
    ``item + (ratio - 1) * s_axis + sum_{i != axis} (d_i - 1) * s_i``."""
    extent = element_size + (ratio - 1) * select(strides, axis)
    for index, (size, stride) in enumerate(zip(shape, strides)):
        if index != axis:
            extent = extent + (size - 1) * stride
    return extent


def dense_bytes(element_size: Any, shape: Sequence[Any], axis: int, ratio: Any) -> Any:
    """Bytes of the elements one manager block of a view holds: ``ratio * prod_{i != axis} d_i *
    item``."""
    elements = ratio
    for index, size in enumerate(shape):
        if index != axis:
            elements = elements * size
    return elements * element_size


def dimensions_disjoint(element_size: Any, shape: Sequence[Any], strides: Sequence[Any], axis: int, ratio: Any) -> Any:
    """Within one manager block, element index vectors map to distinct bytes: taking the
    non-block dimensions from the smallest stride up, each stride clears the span of those before
    it, and the kernel rows of a split block (``ratio > 1``) clear one row."""
    if concrete(element_size, ratio, *shape, *strides):  # plain integers: stop at the first overlap
        span = element_size
        if not span > 0:
            return False
        for index in dimension_order(shape, strides, axis):
            size, stride = shape[index], strides[index]
            if stride < 0 or (size > 1 and stride < span):
                return False
            if size > 1:
                span += (size - 1) * stride
        return not ratio > 1 or select(strides, axis) >= span
    checks = [element_size > 0]
    span = element_size
    for index in dimension_order(shape, strides, axis):
        size, stride = shape[index], strides[index]
        checks.append(stride >= 0)
        checks.append(Implies(size > 1, stride >= span))
        span = span + If(size > 1, (size - 1) * stride, 0)
    checks.append(Implies(ratio > 1, select(strides, axis) >= span))
    return And(*checks)
