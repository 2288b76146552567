"""Block sizes the engine resolves after planning (B.6, B.7).

Port of the engine glue (``v1/engine/core.py:334-370``), ``resolve_kv_cache_block_sizes``
(kv_cache_utils.py:816-918), ``partial_hash_hits_enabled`` (762-801) and
``resolve_cache_hit_alignment_tokens`` (921-950), run on the scheduler's KV cache config (every
uniform-type group replaced by its first layer spec, kv_cache_utils.py:1096-1117).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .grouping import KVCacheGroupSpec
from .refusals import VllmValueError
from .specs import (
    SUPPORTS_FINE_GRAINED_HASH_LOOKUP,
    MambaSpec,
    iter_layer_specs,
    manager_class_name,
)

__all__ = [
    "BlockSizes", "engine_cache_block_size", "resolve_dcp_block_size", "partial_hash_hits_enabled",
    "resolve_kv_cache_block_sizes", "resolve_cache_hit_alignment_tokens",
]


@dataclass(frozen=True)
class BlockSizes:
    engine_cache_config_block_size: int
    scheduler_block_size: int
    hash_block_size: int
    cache_hit_alignment_tokens: int


def engine_cache_block_size(groups: list[KVCacheGroupSpec], default: int) -> int:
    """``cache_config.block_size := min(block sizes of prefix-cacheable groups)`` or of all
    groups if none is cacheable (core.py:334-352); unchanged without groups."""
    if not groups:
        return default
    participating = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
    return min(participating if participating else [g.kv_cache_spec.block_size for g in groups])


def resolve_dcp_block_size(spec, dcp: int) -> int:
    """``resolve_dcp_kv_block_size`` (kv_cache_utils.py:740-742)."""
    return spec.block_size * (dcp if spec.dcp_sharded else 1)


def partial_hash_hits_enabled(
    groups: list[KVCacheGroupSpec], hash_block_size: int, dcp: int = 1, with_managers: bool = False
) -> bool:
    """kv_cache_utils.py:762-801 (``with_managers`` = the manager classes are passed)."""
    if not any(
        isinstance(spec, MambaSpec)
        and spec.mamba_cache_mode == "align"
        and ((dcp == 1 and spec.block_size > hash_block_size) or (dcp > 1 and spec.block_size >= hash_block_size))
        for group in groups
        for spec in iter_layer_specs(group.kv_cache_spec)
    ):
        return False
    if not with_managers:
        return True
    unsupported = {
        manager_class_name(group.kv_cache_spec)
        for group in groups
        if group.kv_cache_spec.prefix_cacheable
        and not SUPPORTS_FINE_GRAINED_HASH_LOOKUP[manager_class_name(group.kv_cache_spec)]
        and resolve_dcp_block_size(group.kv_cache_spec, dcp) != hash_block_size
    }
    return not unsupported


def resolve_kv_cache_block_sizes(
    groups: list[KVCacheGroupSpec],
    cache_block_size: int,
    *,
    dcp: int,
    enable_prefix_caching: bool,
    kv_connector: bool,
    prefix_match_unit: int | None,
) -> tuple[int, int]:
    """``resolve_kv_cache_block_sizes`` (kv_cache_utils.py:816-918) on the scheduler groups."""
    if len(groups) <= 1:
        if groups and not groups[0].kv_cache_spec.dcp_sharded:
            dcp = 1
        bs = cache_block_size * dcp
        if prefix_match_unit not in (None, bs) and len(groups) == 1 and (enable_prefix_caching or kv_connector):
            raise VllmValueError(
                f"Invalid prefix_match_unit={prefix_match_unit}; "
                "with a single KV cache group, prefix-cache hits land on the "
                f"block size ({bs}). Unset it or set it to {bs}.",
                "v1/core/kv_cache_utils.py:850-857",
            )
        return bs, bs
    group_block_sizes = [resolve_dcp_block_size(g.kv_cache_spec, dcp) for g in groups]
    scheduler_block_size = math.lcm(*group_block_sizes)
    if not (enable_prefix_caching or kv_connector):
        return scheduler_block_size, scheduler_block_size
    if any(
        isinstance(spec, MambaSpec) and spec.mamba_cache_mode != "align"
        for g in groups
        for spec in iter_layer_specs(g.kv_cache_spec)
    ):
        return scheduler_block_size, scheduler_block_size
    hashing = [bs for g, bs in zip(groups, group_block_sizes) if g.kv_cache_spec.prefix_cacheable] or group_block_sizes
    hash_block_size = prefix_match_unit if prefix_match_unit is not None else math.gcd(*hashing)
    if any(bs % hash_block_size != 0 for bs in hashing):
        raise VllmValueError(
            f"Invalid prefix_match_unit={hash_block_size}; prefix-cacheable "
            "KV cache group block sizes must be divisible by prefix_match_unit. "
            f"Got group block sizes={group_block_sizes}, "
            f"prefix-cacheable={hashing}.",
            "v1/core/kv_cache_utils.py:891-898",
        )
    prefix_alignments = {
        spec.tokens_per_state
        for g in groups
        for spec in iter_layer_specs(g.kv_cache_spec)
        if spec.prefix_cacheable and isinstance(spec.tokens_per_state, int) and spec.tokens_per_state > 1
    }
    cache_hit_alignment = (
        hash_block_size if partial_hash_hits_enabled(groups, hash_block_size, dcp) else scheduler_block_size
    )
    if any(cache_hit_alignment % alignment for alignment in prefix_alignments):
        raise VllmValueError(
            f"Invalid prefix_match_unit={hash_block_size}; prefix-cache boundaries "
            "must align with each spec's per-state compression. "
            f"Got alignments={sorted(prefix_alignments)}.",
            "v1/core/kv_cache_utils.py:912-917",
        )
    return scheduler_block_size, hash_block_size


def resolve_cache_hit_alignment_tokens(
    groups: list[KVCacheGroupSpec],
    *,
    enable_prefix_caching: bool,
    dcp: int,
    scheduler_block_size: int,
    hash_block_size: int,
) -> int:
    """``resolve_cache_hit_alignment_tokens`` (kv_cache_utils.py:921-950)."""
    if not enable_prefix_caching or len(groups) <= 1:
        return scheduler_block_size
    if partial_hash_hits_enabled(groups, hash_block_size, dcp, with_managers=True):
        return hash_block_size
    return scheduler_block_size
