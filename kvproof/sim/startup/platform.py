"""Hybrid block-size alignment of the platform (B.2).

Port of ``Platform._align_hybrid_block_size`` (vllm/platforms/interface.py:940-1137) and
``_check_aligned_block_size`` (796-823), run by ``update_block_size_for_backend`` (749-794) for a
hybrid (attention + Mamba) model.  Phase 1 (picking a block size every backend accepts) is not
run: a geometry's ``block_size`` is the user's ``--block-size``.  The backends' ``customize_spec``
is taken as the identity; TurboQuant/UltraQuant packed pages and the KV-dtype skip layers
(phase 3) are not modelled.

A geometry without a ``platform_alignment`` block is planned on :data:`DEFAULT_PLATFORM` (vLLM
always runs the alignment on a GPU): :func:`default_platform_alignment` picks the attention
backend vLLM selects there and derives the model's attention shape from the layers; an explicit
``"platform_alignment": null`` opts out.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

from ...logic import cdiv
from ...formulas.dtypes import dtype_size
from ...models.geometry import ExpandedLayer, MultipleOf, PlatformAlignment, canonical_dtype, present
from .refusals import VllmAssertionError, VllmValueError
from .specs import FullAttentionSpec, MLAAttentionSpec

__all__ = [
    "AlignmentResult", "align_hybrid_block_size", "supports_block_size", "kernel_base", "backend_list",
    "preferred_block_size", "check_aligned_block_size", "DEFAULT_BLOCK_SIZE", "DEFAULT_PLATFORM",
    "DefaultBackend", "DefaultAlignment", "default_platform_alignment", "select_default_backend",
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


# --------------------------------------------------------------------------------------------
# The default platform (a geometry without ``platform_alignment``)

#: What a geometry without ``platform_alignment`` is planned on: a CUDA GPU of compute capability
#: 9.0 (H100/H200) with vLLM's own attention-backend selection and FlashAttention 3 (the
#: vllm_flash_attn default on SM90, v1/attention/backends/fa_utils.py:98-101).
DEFAULT_PLATFORM = "cuda, compute capability 9.0 (FlashAttention 3)"


@dataclass(frozen=True)
class DefaultBackend:
    """One attention backend of vLLM's SM90 priority list, with the class-level checks
    ``AttentionBackend.validate_configuration`` makes (v1/attention/backend.py:279-330)."""

    name: str
    use_mla: bool
    dtypes: tuple[str, ...]
    kv_cache_dtypes: tuple[str, ...]
    head_size_ok: Callable[[int], bool]
    kernel_block_sizes: tuple
    source: str

    def accepts(self, use_mla: bool, dtype: str, cache_dtype: str, head_size: int) -> bool:
        return (self.use_mla == use_mla and dtype in self.dtypes and cache_dtype in self.kv_cache_dtypes
                and self.head_size_ok(head_size))


_MLA_HEADS = (320, 512, 576)  # MLACommonBackend.get_supported_head_sizes (layers/attention/mla_attention.py:1623-1624)
#: ``_get_backend_priorities`` for SM90 (platforms/cuda.py:170-181 without MLA, 143-154 with MLA;
#: FLASHINFER_MLA is SM100 only, mla/flashinfer_mla.py:220-221; TURBOQUANT and the sparse MLA
#: backends need a TurboQuant cache dtype or a sparse model, which a geometry does not describe).
SM90_BACKENDS: tuple[DefaultBackend, ...] = (
    DefaultBackend("FLASH_ATTN", False, ("float16", "bfloat16"), ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
                   lambda h: h % 8 == 0 and h <= 256, (MultipleOf(16),),
                   "v1/attention/backends/flash_attn.py:289-296,357-367,425-435"),
    DefaultBackend("FLASHINFER", False, ("float16", "bfloat16"),
                   ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"),
                   lambda h: h in (64, 128, 256, 512), (16, 32, 64),
                   "v1/attention/backends/flashinfer.py:572-604,691-693"),
    DefaultBackend("TRITON_ATTN", False, ("float16", "bfloat16", "float32"),
                   ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"), lambda h: h >= 32,
                   (MultipleOf(16),), "v1/attention/backends/triton_attn.py:321-340,379-380"),
    DefaultBackend("FLEX_ATTENTION", False, ("float16", "bfloat16", "float32"), ("auto", "float16", "bfloat16"),
                   lambda h: True, (MultipleOf(16),), "v1/attention/backends/flex_attention.py:91-100,149-154"),
    DefaultBackend("FLASH_ATTN_MLA", True, ("float16", "bfloat16"), ("auto", "float16", "bfloat16"),
                   lambda h: h in _MLA_HEADS, (MultipleOf(16),), "v1/attention/backends/mla/flashattn_mla.py:41-50"),
    DefaultBackend("FLASHMLA", True, ("float16", "bfloat16"), ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
                   lambda h: h in _MLA_HEADS, (64,), "v1/attention/backends/mla/flashmla.py:47-58"),
    DefaultBackend("TRITON_MLA", True, ("float16", "bfloat16"), ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3"),
                   lambda h: True, (MultipleOf(16),), "v1/attention/backends/mla/triton_mla.py:100-115"),
)

#: Layer specs that stand for the model's attention (``ModelConfig.get_head_size`` and
#: ``get_num_kv_heads``): not a ring buffer, a hidden-state cache or an indexer/sparse side cache.
_MODEL_ATTENTION_SPECS = (
    "FullAttentionSpec", "MLAAttentionSpec", "RSWASpec", "SinkFullAttentionSpec", "ChunkedLocalAttentionSpec",
    "SlidingWindowSpec", "SlidingWindowMLASpec", "EncoderOnlyAttentionSpec", "CrossAttentionSpec",
)
_MLA_SPECS = ("MLAAttentionSpec", "SlidingWindowMLASpec")


@dataclass(frozen=True)
class DefaultAlignment:
    """The alignment inputs assumed for a geometry without ``platform_alignment``."""

    config: PlatformAlignment
    backend: DefaultBackend
    layer: str  # the layer the model's attention shape was read from


def _model_attention_layer(layers: list[ExpandedLayer]) -> ExpandedLayer | None:
    attention = [layer for layer in layers if layer.entry.spec != "MambaSpec"]
    for layer in attention:
        if layer.entry.spec in _MODEL_ATTENTION_SPECS and not present(layer.entry.cache_role) and (
                layer.entry.is_draft is not True):
            return layer
    return attention[0] if attention else None


def select_default_backend(use_mla: bool, model_dtype: str, cache_dtype: str, head_size: int) -> DefaultBackend:
    """The first backend of vLLM's SM90 priority list that accepts the model
    (``CudaPlatformBase.get_attn_backend_cls``, platforms/cuda.py:453-485)."""
    for backend in SM90_BACKENDS:
        if backend.accepts(use_mla, model_dtype, cache_dtype, head_size):
            return backend
    raise VllmValueError(
        f"No valid attention backend found for cuda with head_size={head_size}, dtype=torch.{model_dtype}, "
        f"kv_cache_dtype={cache_dtype}, use_mla={use_mla} (default platform: {DEFAULT_PLATFORM}).",
        "vllm/platforms/cuda.py:471-475",
    )


def default_platform_alignment(layers: list[ExpandedLayer]) -> DefaultAlignment | None:
    """The ``platform_alignment`` of :data:`DEFAULT_PLATFORM` for these layers; None for a model
    without attention layers (``_find_non_ssm_backends`` finds none, interface.py:765-767).

    The model's attention shape is the first model-attention layer's (registration order): its
    ``num_kv_heads``, ``head_size`` and dtype; a one-byte dtype is an fp8 KV cache
    (``cache_dtype "fp8"``) of a bfloat16 model.  The Mamba prefill checkpoint alignment is the
    LCM of the Mamba layers' ``prefill_checkpoint_alignment``, None unless every layer gives one
    (``get_mamba_prefill_checkpoint_alignment``, model_executor/layers/mamba/abstract.py:98-113)."""
    layer = _model_attention_layer(layers)
    if layer is None:
        return None
    entry = layer.entry
    dtype = canonical_dtype(entry.dtype)
    model_dtype, cache_dtype = (dtype, "auto") if dtype_size(dtype) > 1 else ("bfloat16", "fp8")
    use_mla = entry.spec in _MLA_SPECS
    backend = select_default_backend(use_mla, model_dtype, cache_dtype, entry.head_size)
    checkpoint = 1
    for mamba in (layer for layer in layers if layer.entry.spec == "MambaSpec"):
        value = mamba.entry.prefill_checkpoint_alignment
        if not present(value):
            checkpoint = None
            break
        checkpoint = math.lcm(checkpoint, value)
    config = PlatformAlignment(
        num_kv_heads=entry.num_kv_heads, head_size=entry.head_size, backend_kernel_block_sizes=list(
            backend.kernel_block_sizes),
        model_dtype=model_dtype, use_mla=use_mla, cache_dtype=cache_dtype,
        mamba_prefill_checkpoint_alignment=checkpoint, backend_names=[backend.name],
    )
    return DefaultAlignment(config, backend, layer.name)
