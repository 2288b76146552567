"""The shared block pool's sizes (``vllm/v1/core/kv_cache_planning.py:574-741``): bytes per
block in either layout family, ``num_blocks`` for the memory, the tensor size, and the memory one
request needs (1262-1285)."""

from __future__ import annotations

from typing import Any, Sequence

from ..logic import Max, Sum, div, round_up

__all__ = [
    "bytes_per_block_layer_outermost", "bytes_per_block_block_outermost", "num_blocks_for_memory", "tensor_size",
    "bytes_per_block_of_backing", "memory_needed_bytes",
]


def bytes_per_block_layer_outermost(group_layer_strides: Sequence[Sequence[Any]]) -> Any:
    """Layer-outermost layouts: ``max_g sum_{l in g} round_up(page_l, alignment_l)`` -- each
    argument row holds one group's already rounded layer strides (``pages.layer_block_stride``)."""
    return Max([Sum(list(strides)) for strides in group_layer_strides])


def bytes_per_block_block_outermost(group_layer_pages: Sequence[Sequence[Any]], alignment_lcm: int) -> Any:
    """Block-outermost layouts: ``round_up(max_g sum_{l in g} page_l, lcm(alignments))``; the
    lcm is concrete (alignments come from a small finite domain)."""
    return round_up(Max([Sum(list(pages)) for pages in group_layer_pages]), alignment_lcm)


def num_blocks_for_memory(available_memory: Any, bytes_per_block: Any) -> Any:
    """``num_blocks = available_memory // bytes_per_block`` (kv_cache_planning.py:680)."""
    return div(available_memory, bytes_per_block)


def tensor_size(bytes_per_block: Any, num_blocks: Any) -> Any:
    """Every ``KVCacheTensor.size`` is the one shared backing: ``bytes_per_block * num_blocks``."""
    return bytes_per_block * num_blocks


def bytes_per_block_of_backing(backing_bytes: Any, num_blocks: Any) -> Any:
    """The bytes one block ID costs, read back from an allocated backing: ``backing_bytes //
    num_blocks`` (the inverse of :func:`tensor_size`)."""
    return div(backing_bytes, num_blocks)


def memory_needed_bytes(bytes_per_block: Any, group_blocks: Sequence[Any]) -> Any:
    """What one request at ``max_model_len`` needs of the pool: ``bytes_per_block * sum_g
    blocks_g`` (``_max_memory_usage_bytes_from_groups``, kv_cache_planning.py:1262-1285)."""
    return bytes_per_block * Sum(list(group_blocks))
