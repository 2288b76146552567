"""Kernel blocks: how a layer's view splits each manager block of the pool.

vLLM 0.33.0 views each layer's slice of the backing in kernel blocks (``v1/worker/utils.py:380-430``,
``v1/kv_cache_interface.py:360-482``). With an allocation-time split (``kernel_block_stride ==
0``) a manager block is ``block_size // kernel_block_size`` consecutive kernel rows; with a
bind-time split of a packed cache (``kernel_block_stride > 0``) kernel block ``j`` of manager
block ``b`` is row ``b * kernel_block_stride + j``.
"""

from __future__ import annotations

from typing import Any

from ..logic import And, If, Implies, concrete, div, mod

__all__ = [
    "kernel_blocks_per_block", "kernel_block_fits", "kernel_rows_per_block", "allocation_split_rows",
    "bind_split_rows", "kernel_blocks_on_axis", "kernel_block_id",
]


def kernel_blocks_per_block(block_size: Any, kernel_block_size: Any) -> Any:
    """Kernel blocks one manager block holds: ``block_size // kernel_block_size`` (0 for a zero
    kernel block, which ``kernel_block_fits`` refuses)."""
    if type(block_size) is int and type(kernel_block_size) is int:  # the checker's path: no helper call
        return block_size // kernel_block_size if kernel_block_size else 0
    return div(block_size, kernel_block_size)


def kernel_block_fits(block_size: Any, kernel_block_size: Any, whole_block: Any = False) -> Any:
    """A kernel block is a positive divisor of the block (kv_cache_interface.py:360-376), and the
    block itself for a layer vLLM never splits (``whole_block``: Mamba and ring layers,
    utils.py:630-684)."""
    if concrete(block_size, kernel_block_size, whole_block):
        return kernel_block_size > 0 and block_size % kernel_block_size == 0 and (
            not whole_block or kernel_block_size == block_size)
    return And(kernel_block_size > 0, mod(block_size, kernel_block_size) == 0,
               Implies(whole_block, kernel_block_size == block_size))


def kernel_rows_per_block(block_size: Any, kernel_block_size: Any, kernel_block_stride: Any) -> Any:
    """Rows of a view's block axis from one manager block to the next: ``block_size //
    kernel_block_size`` for an allocation-time split, ``kernel_block_stride`` for a bind-time one
    (``map_to_kernel_block_table``, utils.py:380-395)."""
    if type(kernel_block_stride) is int and kernel_block_stride != 0:
        return kernel_block_stride
    return If(kernel_block_stride == 0, kernel_blocks_per_block(block_size, kernel_block_size), kernel_block_stride)


def allocation_split_rows(num_blocks: Any, per_block: Any) -> Any:
    """Rows of a view's block axis split at allocation time: ``per_block`` consecutive kernel
    blocks per manager block (``compute_layer_kv_cache_shape_bytes``, kv_cache_interface.py:360-376)."""
    return num_blocks * per_block


def bind_split_rows(num_blocks: Any, kernel_block_stride: Any, last_block_rows: Any) -> Any:
    """Rows of a packed cache's view split at bind time (``map_kv_cache_to_kernel_blocks``,
    utils.py:419-426): manager blocks ``kernel_block_stride`` rows apart, the last one's rows after
    them."""
    return (num_blocks - 1) * kernel_block_stride + last_block_rows


def kernel_blocks_on_axis(num_blocks: Any, block_size: Any, kernel_block_size: Any, kernel_block_stride: Any) -> Any:
    """Length of a view's block axis as a record states it: split at allocation time when
    ``kernel_block_stride == 0``, else at bind time; ``block_size // kernel_block_size`` kernel
    blocks per manager block either way."""
    per_block = kernel_blocks_per_block(block_size, kernel_block_size)
    if type(num_blocks) is int and type(per_block) is int and type(kernel_block_stride) is int:
        return num_blocks * per_block if kernel_block_stride == 0 else (num_blocks - 1) * kernel_block_stride + per_block
    return If(kernel_block_stride == 0, allocation_split_rows(num_blocks, per_block),
              bind_split_rows(num_blocks, kernel_block_stride, per_block))


def kernel_block_id(block: Any, j: Any, block_size: Any, kernel_block_size: Any, kernel_block_stride: Any) -> Any:
    """``map_to_kernel_block_table`` (utils.py:380-395): kernel block ``j`` of manager block
    ``block`` is ``block * (kernel_block_stride or bs/kbs) + j``."""
    return block * kernel_rows_per_block(block_size, kernel_block_size, kernel_block_stride) + j
