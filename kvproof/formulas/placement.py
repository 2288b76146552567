"""Where bytes lie in a worker's one backing allocation (``vllm/v1/kv_cache_interface.py:1474-1495``).

Layer ``l`` block ``b`` of a ``KVCacheTensor`` starts at ``offset + l * layer_stride + b *
block_stride``. Interval and modular arithmetic only: the cost depends on layers, tensors and
views, never on ``num_blocks``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..logic import And, Implies, Max, Min, Not, cdiv, concrete, div

__all__ = ["region_end", "ranges_intersect", "ranges_disjoint", "pages_alias_only_same_block_of_other_groups"]


def region_end(offset: Any, num_layers: int, layer_stride: Any, num_blocks: Any, block_stride: Any,
               footprints: Sequence[Any]) -> Any:
    """One past the last byte of a tensor allocation: its last layer's page of its last block,
    the page being the largest footprint of its layers."""
    return offset + (num_layers - 1) * layer_stride + (num_blocks - 1) * block_stride + Max(*footprints)


def ranges_intersect(start: Any, end: Any, other_start: Any, other_end: Any) -> Any:
    """The byte ranges ``[start, end)`` and ``[other_start, other_end)`` share a byte."""
    return And(start < other_end, other_start < end)


def ranges_disjoint(starts: Sequence[Any], ends: Sequence[Any]) -> Any:
    """No two of the byte ranges ``[starts[i], ends[i])`` share a byte."""
    count = len(starts)
    if concrete(*starts, *ends):  # plain integers: stop at the first overlap
        for i in range(count):
            for j in range(i + 1, count):
                if starts[i] < ends[j] and starts[j] < ends[i]:
                    return False
        return True
    return And(*[Not(ranges_intersect(starts[i], ends[i], starts[j], ends[j]))
                 for i in range(count) for j in range(i + 1, count)])


def pages_alias_only_same_block_of_other_groups(start: Any, length: Any, other_start: Any, other_length: Any,
                                                stride: Any, other_stride: Any, different_groups: Any,
                                                num_blocks: Any) -> Any:
    """Pages ``p`` (block ``b``) and ``q`` (block ``b'``) of one block stride ``S`` overlap iff
    ``d + k * S`` lies in ``(-len_p, len_q)``, ``d = start_p - start_q``, ``k = b - b'`` in ``[1 - N,
    N - 1]``: the ``k`` that do form one range ``[low, high]``. No ``k != 0`` may overlap (a block ID
    belongs to one group at a time), and ``k == 0`` only for pages of different groups. Pages of
    different strides are not compared here."""
    if concrete(start, length, other_start, other_length, stride, other_stride, different_groups, num_blocks):
        if stride != other_stride:
            return True
        d = start - other_start
        low = max(((-length - d) // stride if stride else 0) + 1, 1 - num_blocks)
        high = min((-((d - other_length) // stride) if stride else 0) - 1, num_blocks - 1)
        other_blocks = low <= high and not (low == 0 and high == 0)
        same_block = -length < d < other_length and low <= 0 <= high
        return not other_blocks and (not same_block or bool(different_groups))
    d = start - other_start
    low = Max(div(-length - d, stride) + 1, 1 - num_blocks)
    high = Min(cdiv(other_length - d, stride) - 1, num_blocks - 1)
    other_blocks = And(low <= high, Not(And(low == 0, high == 0)))
    same_block = And(d > -length, d < other_length, low <= 0, high >= 0)
    return Implies(stride == other_stride, And(Not(other_blocks), Implies(same_block, different_groups)))
