"""Hybrid block-size alignment of the platform (B.2).

Port of ``Platform._align_hybrid_block_size`` (vllm/platforms/interface.py:940-1137) and
``_check_aligned_block_size`` (796-823), run by ``update_block_size_for_backend`` (749-794) for a
hybrid (attention + Mamba) model.  Phase 1 (picking a block size every backend accepts) is not
run: a geometry's ``block_size`` is the user's ``--block-size``.  The backends' ``customize_spec``
is taken as the identity; TurboQuant/UltraQuant packed pages and the KV-dtype skip layers
(phase 3) are not modelled.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..logic import cdiv
from ..models.geometry import MultipleOf, PlatformAlignment, canonical_dtype, present
from .refusals import VllmAssertionError, VllmValueError
from .specs import FullAttentionSpec, MLAAttentionSpec

__all__ = [
    "AlignmentResult", "align_hybrid_block_size", "supports_block_size", "kernel_base", "backend_list",
    "preferred_block_size", "check_aligned_block_size", "DEFAULT_BLOCK_SIZE",
]

#: ``CacheConfig.DEFAULT_BLOCK_SIZE`` (config/cache.py:185).
DEFAULT_BLOCK_SIZE = 16


@dataclass(frozen=True)
class AlignmentResult:
    block_size: int
    mamba_block_size: int | None
    mamba_page_size_padded: int | None
    attn_page_size_1_token: int
    mamba_page_size: int
    attn_block_size: int


def kernel_base(size: int | MultipleOf) -> int:
    return size.base if isinstance(size, MultipleOf) else size


def supports_block_size(sizes: list, block_size: int) -> bool:
    """``AttentionBackend.supports_block_size`` (v1/attention/backend.py:121-138): any declared
    size (or ``MultipleOf`` base) dividing the block size; no declaration accepts anything."""
    if not sizes:
        return True
    return any(block_size % kernel_base(size) == 0 for size in sizes)


def align_hybrid_block_size(
    config: PlatformAlignment,
    block_size: int,
    mamba_cache_mode: str,
    mamba_block_size: int | None,
    mamba_page_size_padded: int | None,
    mamba_page_size: int,
) -> AlignmentResult:
    """Returns the new ``cache_config.block_size``, ``mamba_block_size`` and
    ``mamba_page_size_padded``.  ``mamba_page_size`` is the largest unpadded Mamba page."""
    model_dtype = canonical_dtype(config.model_dtype) if present(config.model_dtype) else "bfloat16"
    cache_dtype = config.cache_dtype if present(config.cache_dtype) else "auto"
    kv_dtype = model_dtype if cache_dtype == "auto" else canonical_dtype(cache_dtype)
    if config.use_mla is True:  # interface.py:976-985
        attn_page_1 = MLAAttentionSpec(
            block_size=1, num_kv_heads=config.num_kv_heads, head_size=config.head_size, dtype=kv_dtype,
            cache_dtype_str=cache_dtype,
        ).page_size_bytes
    else:  # interface.py:1030-1043 (customize_spec taken as the identity)
        attn_page_1 = FullAttentionSpec(
            block_size=1, num_kv_heads=config.num_kv_heads, head_size=config.head_size, dtype=kv_dtype
        ).page_size_bytes
    result = AlignmentResult(block_size, mamba_block_size, mamba_page_size_padded, attn_page_1, mamba_page_size, 0)
    if mamba_page_size == 0:
        return result

    first = list(config.backend_kernel_block_sizes)
    others = [list(sizes) for sizes in config.other_backend_kernel_block_sizes] if present(
        config.other_backend_kernel_block_sizes) else []
    kernel_alignment = max(min(kernel_base(s) for s in first), block_size)  # 1066-1074
    backend_alignment = math.lcm(*(min(kernel_base(s) for s in sizes) for sizes in [first, *others] if sizes))
    if config.use_mla is True:
        kernel_alignment = max(kernel_alignment, 128)  # 1080-1085
    if mamba_cache_mode == "align":
        ckpt = config.mamba_prefill_checkpoint_alignment if present(config.mamba_prefill_checkpoint_alignment) else None
        kernel_alignment = math.lcm(kernel_alignment, ckpt or 1)  # 1086-1091
    attn_block_size = kernel_alignment * cdiv(mamba_page_size, kernel_alignment * attn_page_1)  # 1094-1099
    attn_block_size = backend_alignment * cdiv(attn_block_size, backend_alignment)  # 1100-1102
    if block_size < attn_block_size:
        block_size = attn_block_size
    if mamba_cache_mode == "align":
        mamba_block_size = block_size
    attn_page = block_size * attn_page_1
    if attn_page < mamba_page_size:
        raise VllmAssertionError("", "vllm/platforms/interface.py:1118")
    if attn_page != mamba_page_size and mamba_page_size_padded != attn_page:
        mamba_page_size_padded = attn_page
    return AlignmentResult(block_size, mamba_block_size, mamba_page_size_padded, attn_page_1, mamba_page_size,
                           attn_block_size)


def backend_list(config: PlatformAlignment) -> list[tuple[str, list]]:
    """The non-SSM attention backends as (name, kernel block sizes): the first backend, then the
    others; unnamed ones are ``geometry_backend_<i>``."""
    backends = [list(config.backend_kernel_block_sizes)]
    if present(config.other_backend_kernel_block_sizes):
        backends += [list(sizes) for sizes in config.other_backend_kernel_block_sizes]
    names = list(config.backend_names) if present(config.backend_names) else []
    names += [f"geometry_backend_{i}" for i in range(len(names), len(backends))]
    return list(zip(names, backends))


def preferred_block_size(config: PlatformAlignment, default_block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Phase 1, ``_preferred_block_size_for_backends`` (interface.py:699-747): run only when the
    user did not set ``--block-size``."""
    backends = backend_list(config)
    if len(backends) == 1:  # AttentionBackend.get_preferred_block_size (backend.py:155-163)
        sizes = backends[0][1]
        if not sizes or supports_block_size(sizes, default_block_size):
            return default_block_size
        return min(kernel_base(s) for s in sizes)
    if all(supports_block_size(sizes, default_block_size) for _, sizes in backends):
        return default_block_size
    per_backend = [[kernel_base(s) for s in sizes] or [1] for _, sizes in backends]
    candidates = sorted({math.lcm(*combo) for combo in itertools.product(*per_backend)})
    for candidate in candidates:
        if all(supports_block_size(sizes, candidate) for _, sizes in backends):
            return candidate
    raise VllmValueError(
        "The attention backends share no supported KV cache block size ("
        + "; ".join(f"{name}: {sizes!r}" for name, sizes in backends)
        + ").",
        "vllm/platforms/interface.py:740-747",
    )


def check_aligned_block_size(config: PlatformAlignment, block_size: int, pre_block_size: int) -> None:
    """``_check_aligned_block_size`` (interface.py:796-823)."""
    if block_size == pre_block_size:
        return
    rejecting = [name for name, sizes in backend_list(config) if not supports_block_size(sizes, block_size)]
    if rejecting:
        raise VllmValueError(
            f"Aligned KV cache block size {block_size} is not supported by "
            f"attention backend(s): {', '.join(rejecting)}.",
            "vllm/platforms/interface.py:816-823",
        )
