"""The start-up memory check, the max-model-len estimate and auto-fit (B.3, B.4).

Port of ``_check_enough_kv_cache_memory`` (kv_cache_planning.py:50-87),
``_max_memory_usage_bytes_from_groups`` (1253-1285), ``_estimate_max_model_len_from_groups``
(1288-1334) and ``_auto_fit_max_model_len`` (1337-1410).  The check is per group and includes
the group padding and the stride alignment (S3), and it reserves the null block.
"""

from __future__ import annotations

from typing import Callable

from ...formulas.pool import memory_needed_bytes
from .grouping import KVCacheGroupSpec
from .refusals import AUTO_FIT_MESSAGE, VllmValueError, memory_check_message, no_memory_message
from .specs import SpecContext

__all__ = [
    "group_blocks_per_request", "max_memory_usage_bytes_from_groups",
    "estimate_max_model_len", "check_enough_kv_cache_memory", "auto_fit_max_model_len",
]


def group_blocks_per_request(groups: list[KVCacheGroupSpec], ctx: SpecContext) -> list[int]:
    """``pages_g``: ``max_memory_usage_pages`` for a uniform-type group, else
    ``cdiv(max_memory_usage_bytes, page_size_bytes)`` (kv_cache_planning.py:1274-1283)."""
    return [group.kv_cache_spec.blocks_per_request(ctx) for group in groups]


def max_memory_usage_bytes_from_groups(groups: list[KVCacheGroupSpec], bytes_per_block: int, ctx: SpecContext) -> int:
    if not groups:
        return 0
    return memory_needed_bytes(bytes_per_block, group_blocks_per_request(groups, ctx))


def estimate_max_model_len(fits: Callable[[int], bool], max_model_len: int) -> int:
    """The binary search of ``_estimate_max_model_len_from_groups`` (1288-1334): the largest
    length in ``1..max_model_len`` that fits, 0 if even one token does not."""
    left, right = 1, max_model_len
    if not fits(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result = mid
            left = mid + 1
        else:
            right = mid - 1
    return result


def _fits(groups: list[KVCacheGroupSpec], bytes_per_block: int, ctx: SpecContext, available: int) -> Callable[[int], bool]:
    def fits(model_len: int) -> bool:
        return max_memory_usage_bytes_from_groups(groups, bytes_per_block, ctx.with_max_model_len(model_len)) <= available

    return fits


def check_enough_kv_cache_memory(
    groups: list[KVCacheGroupSpec], bytes_per_block: int, ctx: SpecContext, check_memory: int
) -> int:
    """``_check_enough_kv_cache_memory`` with the per-group needed memory; returns it."""
    if check_memory <= 0:
        raise VllmValueError(no_memory_message(), "v1/core/kv_cache_planning.py:56-64")
    needed = max_memory_usage_bytes_from_groups(groups, bytes_per_block, ctx)
    if needed > check_memory:
        estimated = estimate_max_model_len(_fits(groups, bytes_per_block, ctx, check_memory), ctx.max_model_len)
        raise VllmValueError(
            memory_check_message(ctx.max_model_len, needed, check_memory, estimated),
            "v1/core/kv_cache_planning.py:66-87",
        )
    return needed


def auto_fit_max_model_len(
    worker_groups: list[list[KVCacheGroupSpec]],
    worker_bytes_per_block: list[int],
    check_memory: list[int],
    ctx: SpecContext,
) -> int:
    """``_auto_fit_max_model_len`` (1337-1410): the new ``max_model_len`` (unchanged when the
    full context fits)."""
    original = ctx.max_model_len
    if all(not groups for groups in worker_groups):
        return original
    auto_fit = original
    for groups, bpb, available in zip(worker_groups, worker_bytes_per_block, check_memory):
        if not groups:
            continue
        worker_max = estimate_max_model_len(_fits(groups, bpb, ctx, available), original)
        if worker_max < auto_fit:
            auto_fit = worker_max
    if auto_fit <= 0:
        raise VllmValueError(AUTO_FIT_MESSAGE, "v1/core/kv_cache_planning.py:1400-1404")
    return min(auto_fit, original)
