"""vLLM 0.33.0's KV cache spec classes as kvproof objects (A.1-A.15).

A faithful port of ``vllm/v1/kv_cache_interface.py``: frozen dataclasses with vLLM's fields,
defaults, equality (``is_draft`` excluded), ``__post_init__`` side effects (MLA alignment
padding), ``dataclasses.replace`` behaviour, ``merge`` and ``is_uniform_with_collection``.
Grouping compares specs exactly as vLLM does, so it must be these semantics and not an
approximation.  A ``torch.dtype`` is represented by its canonical name (``"bfloat16"``), which
compares the same way (``"fp8"`` and ``"uint8"`` are both ``torch.uint8``).

The page and block arithmetic delegates to :mod:`kvproof.formulas.pages` and
:mod:`kvproof.formulas.blocks_per_request`, which the rules share and which also run on z3 terms.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from fractions import Fraction
from math import gcd
from typing import Any

import attrs

from ...formulas import blocks_per_request, pages
from ...formulas.dtypes import dtype_size
from ...logic import cdiv, round_up
from ...models.geometry import MultipleOf
from .refusals import VllmAssertionError, VllmTypeError, VllmValueError, nonzero

__all__ = [
    "SpecContext", "KVCacheSpec", "AttentionSpec", "FullAttentionSpec", "MLAAttentionSpec",
    "HiddenStateCacheSpec", "RSWASpec", "ChunkedLocalAttentionSpec", "SlidingWindowSpec",
    "CircularBufferSpec", "SlidingWindowMLASpec", "MambaSpec", "EncoderOnlyAttentionSpec",
    "CrossAttentionSpec", "SinkFullAttentionSpec", "UniformTypeKVCacheSpecs", "SPEC_TYPES",
    "uniform_type_base_spec", "manager_class_name", "iter_layer_specs", "replace_as",
    "vllm_class_repr", "SUPPORTS_FINE_GRAINED_HASH_LOOKUP",
]

VLLM_MODULE = "vllm.v1.kv_cache_interface"


def vllm_class_repr(spec_or_cls: Any) -> str:
    """``str(type(spec))`` as vLLM prints it in its error texts."""
    cls = spec_or_cls if isinstance(spec_or_cls, type) else type(spec_or_cls)
    return f"<class '{VLLM_MODULE}.{cls.__name__}'>"


@attrs.frozen
class SpecContext:
    """The parts of ``VllmConfig`` the spec formulas read."""

    max_model_len: int
    dcp: int = 1  # parallel_config.decode_context_parallel_size
    in_flight_tokens: int = 0  # VllmConfig.max_in_flight_tokens
    mamba_cache_mode: str = "none"  # cache_config.mamba_cache_mode (not the spec's own field)
    max_num_encoder_input_tokens: int = 0  # scheduler_config.max_num_encoder_input_tokens

    def with_max_model_len(self, max_model_len: int) -> "SpecContext":
        return attrs.evolve(self, max_model_len=max_model_len)


# --------------------------------------------------------------------------------------------
# A.1 KVCacheSpec (kv_cache_interface.py:201-345)


@dataclass(frozen=True, kw_only=True)
class KVCacheSpec:
    block_size: int
    dcp_sharded: bool = False
    block_stride_alignment: int | MultipleOf | None = None
    is_draft: bool = field(default=False, compare=False)

    def __post_init__(self):
        alignment = self.block_stride_alignment
        if isinstance(alignment, int) and alignment <= 0:
            raise VllmValueError("block_stride_alignment must be positive")  # 219-222

    def get_block_stride_alignment(self) -> int:
        """224-234: bytes the stride between physical blocks must be a multiple of."""
        alignment = self.block_stride_alignment
        if not isinstance(alignment, MultipleOf):
            return alignment or 1
        kernel_block_size = gcd(alignment.base, self.block_size)
        if kernel_block_size == self.block_size:
            return 1
        return self.copy_with_new_block_size(kernel_block_size).page_size_bytes

    @property
    def prefix_cacheable(self) -> bool:
        return True

    @property
    def prefix_replay_tokens(self) -> int:
        return 0

    @property
    def num_heads(self) -> int:
        raise NotImplementedError

    @property
    def tokens_per_state(self) -> int | Fraction:
        raise NotImplementedError

    @property
    def state_content_size_bytes(self) -> int:
        raise NotImplementedError

    @property
    def page_size_bytes(self) -> int:
        raise NotImplementedError

    @property
    def num_states(self) -> int:
        return self.get_num_kernel_states(self.block_size)

    def get_num_kernel_states(self, kernel_block_size: int) -> int:
        return pages.num_kernel_states(kernel_block_size, self.tokens_per_state)

    @property
    def block_table_token_alignment(self) -> int | None:
        return 128

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        raise NotImplementedError

    def max_num_blocks_per_req(self, ctx: SpecContext, max_len: int) -> int:
        return cdiv(max_len, self.block_size)

    def copy_with_new_block_size(self, block_size: int):
        return replace(self, block_size=block_size)

    @classmethod
    def merge(cls, specs: list) -> "KVCacheSpec":
        if not all(spec == specs[0] for spec in specs[1:]):
            raise VllmAssertionError("All layers in the same KV cache group must be the same.")
        return copy.deepcopy(specs[0])

    def is_uniform_with_collection(self, kv_cache_specs: dict[str, "KVCacheSpec"]) -> bool:
        base = uniform_type_base_spec(self)
        if base is None:
            raise VllmAssertionError(
                f"Unsupported KV cache spec type: {vllm_class_repr(self)}. "
                "Please register it using @register_kv_cache_spec decorator."
            )
        return all(isinstance(spec, base) for spec in kv_cache_specs.values())

    @property
    def has_layer_views(self) -> bool:
        return True

    @property
    def uses_slot_mapping(self) -> bool:
        return True

    # kvproof helpers -------------------------------------------------------------------------

    def blocks_per_request(self, ctx: SpecContext) -> int:
        """``cdiv(max_memory_usage_bytes, page_size_bytes)``: the group's term of the memory
        check and of the concurrency denominator (B.4, B.5)."""
        return cdiv(self.max_memory_usage_bytes(ctx), nonzero(self.page_size_bytes))


# --------------------------------------------------------------------------------------------
# A.2 AttentionSpec (551-615)


@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    dcp_sharded: bool = True
    max_tp_shards: int | None = None
    num_kv_heads: int
    head_size: int
    dtype: str
    head_size_v: int = None  # type: ignore[assignment]
    kv_quant_mode: int = 0
    page_size_padded: int | None = None
    num_head_slots: int | None = None
    state_content_bytes: int | None = None
    tokens_per_state: int | Fraction = 1

    def __post_init__(self):
        super().__post_init__()
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)

    @property
    def num_heads(self) -> int:  # 579-583
        if self.num_head_slots is not None:
            return self.num_head_slots
        return self.num_kv_heads

    # The page arithmetic only reads fields that are final after __post_init__; cached per object
    # (cached_property writes the instance dict, so equality and hashing, which read fields, are
    # unaffected).
    @cached_property
    def state_content_size_bytes(self) -> int:  # 585-590
        return pages.attention_state_content_size_bytes(
            self.head_size, self.head_size_v, dtype_size(self.dtype), self.state_content_bytes
        )

    @cached_property
    def unpadded_page_size_bytes(self) -> int:  # 592-594
        return pages.attention_unpadded_page_size_bytes(
            self.num_heads, self.block_size, self.tokens_per_state, self.state_content_size_bytes
        )

    @cached_property  # (read for every layer by grouping, pool and views; its inputs are frozen once built)
    def page_size_bytes(self) -> int:  # 596-601
        if not pages.padding_fits(self.unpadded_page_size_bytes, self.page_size_padded):
            raise VllmAssertionError("", "v1/kv_cache_interface.py:598")
        return pages.padded_page_size_bytes(self.unpadded_page_size_bytes, self.page_size_padded)

    @property
    def real_page_size_bytes(self) -> int:
        return self.unpadded_page_size_bytes

    def max_num_blocks_per_req(self, ctx: SpecContext, max_len: int) -> int:  # 610-615
        return cdiv(max_len, self.block_size * (ctx.dcp if self.dcp_sharded else 1))


# --------------------------------------------------------------------------------------------
# A.3 FullAttentionSpec (618-716)


def _merge_window_sizes(window_sizes: set) -> int | None:  # 650-660
    if len(window_sizes) == 0:
        return None
    if len(window_sizes) == 1:
        return window_sizes.pop()
    raise VllmValueError("All attention layers in the same KV cache group must have the same window size.")


def _check_attention_fields(specs: list, merged: "AttentionSpec") -> None:
    for spec in specs:
        for f in fields(AttentionSpec):
            if not f.compare:
                continue
            if getattr(spec, f.name) != getattr(merged, f.name):
                raise VllmAssertionError(
                    "All attention layers in the same KV cache group must have the same attention spec."
                )


@dataclass(frozen=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    non_causal: bool = False

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:  # 643-648
        return blocks_per_request.full_attention_blocks(ctx.max_model_len, self.block_size, ctx.dcp, self.dcp_sharded) * (
            self.page_size_bytes
        )

    @classmethod
    def merge(cls, specs: list) -> "FullAttentionSpec":  # 662-716
        if not all(isinstance(spec, FullAttentionSpec) for spec in specs):
            raise VllmAssertionError("All attention layers in the same KV cache group must be FullAttentionSpec.")
        sliding_window = {spec.sliding_window for spec in specs if spec.sliding_window is not None}
        attention_chunk_size = {spec.attention_chunk_size for spec in specs if spec.attention_chunk_size is not None}
        if any(isinstance(spec, MLAAttentionSpec) for spec in specs):
            raise VllmAssertionError("MLAAttentionSpec should be merged in MLAAttentionSpec.merge")
        first = specs[0]
        merged = cls(
            block_size=first.block_size,
            block_stride_alignment=first.block_stride_alignment,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            head_size_v=first.head_size_v,
            dtype=first.dtype,
            kv_quant_mode=first.kv_quant_mode,
            dcp_sharded=first.dcp_sharded,
            max_tp_shards=first.max_tp_shards,
            page_size_padded=first.page_size_padded,
            num_head_slots=first.num_head_slots,
            state_content_bytes=first.state_content_bytes,
            tokens_per_state=first.tokens_per_state,
            sliding_window=_merge_window_sizes(sliding_window),
            attention_chunk_size=_merge_window_sizes(attention_chunk_size),
            non_causal=any(spec.non_causal for spec in specs),
        )
        _check_attention_fields(specs, merged)
        if (merged.sliding_window is not None) + (merged.attention_chunk_size is not None) > 1:
            raise VllmAssertionError(
                "Model with both sliding window layers and chunked local attention layers is not supported."
            )
        return merged


def _apply_alignment_padding(spec) -> None:  # 719-725
    if spec.alignment is None:
        return
    actual = spec.real_page_size_bytes
    padded = round_up(actual, spec.alignment)
    if padded != actual:
        object.__setattr__(spec, "page_size_padded", padded)


# --------------------------------------------------------------------------------------------
# A.4 MLAAttentionSpec (728-805), A.5 HiddenStateCacheSpec (808-812)


@dataclass(frozen=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    cache_dtype_str: str | None = None
    topk_buffer_width: int | None = None
    alignment: int | None = None
    model_version: str | None = None
    cache_role: str = "sparse"
    is_index_group_leader: bool = False
    non_causal_multi_token_decode: bool = False
    head_size_v: int = 0

    def __post_init__(self):
        super().__post_init__()
        _apply_alignment_padding(self)

    @classmethod
    def merge(cls, specs: list) -> "MLAAttentionSpec":  # 749-805
        if not all(isinstance(spec, MLAAttentionSpec) for spec in specs):
            raise VllmAssertionError("All attention layers in the same KV cache group must be MLAAttentionSpec.")
        sets = [
            {spec.cache_dtype_str for spec in specs},
            {spec.topk_buffer_width for spec in specs},
            {spec.tokens_per_state for spec in specs},
            {spec.model_version for spec in specs},
            {spec.cache_role for spec in specs},
            {spec.is_index_group_leader for spec in specs},
            {spec.block_stride_alignment for spec in specs},
        ]
        if not all(len(s) == 1 for s in sets):
            raise VllmAssertionError(
                "All attention layers in the same KV cache group must use the same quantization method, "
                "top-k buffer width, tokens per state, model version, cache role, index-sharing role, "
                "and block stride alignment."
            )
        first = specs[0]
        merged = cls(
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            kv_quant_mode=first.kv_quant_mode,
            dcp_sharded=first.dcp_sharded,
            max_tp_shards=first.max_tp_shards,
            page_size_padded=first.page_size_padded,
            num_head_slots=first.num_head_slots,
            state_content_bytes=first.state_content_bytes,
            cache_dtype_str=sets[0].pop(),
            topk_buffer_width=sets[1].pop(),
            tokens_per_state=sets[2].pop(),
            model_version=sets[3].pop(),
            cache_role=sets[4].pop(),
            is_index_group_leader=sets[5].pop(),
            block_stride_alignment=sets[6].pop(),
            non_causal_multi_token_decode=any(spec.non_causal_multi_token_decode for spec in specs),
        )
        _check_attention_fields(specs, merged)
        return merged


@dataclass(frozen=True, kw_only=True)
class HiddenStateCacheSpec(MLAAttentionSpec):
    pass


# --------------------------------------------------------------------------------------------
# A.6 RSWASpec (815-857)


@dataclass(frozen=True, kw_only=True)
class RSWASpec(FullAttentionSpec):
    rswa_window: int

    @classmethod
    def merge(cls, specs: list) -> "RSWASpec":
        if not all(isinstance(spec, RSWASpec) for spec in specs):
            raise VllmAssertionError("All attention layers in the same KV cache group must be RSWASpec.")
        windows = {spec.rswa_window for spec in specs}
        if len(windows) != 1:
            raise VllmAssertionError(f"All R-SWA layers must share the same rswa_window, got {windows}")
        base = FullAttentionSpec.merge(specs)
        return cls(
            block_size=base.block_size,
            block_stride_alignment=base.block_stride_alignment,
            num_kv_heads=base.num_kv_heads,
            head_size=base.head_size,
            head_size_v=base.head_size_v,
            dtype=base.dtype,
            kv_quant_mode=base.kv_quant_mode,
            dcp_sharded=base.dcp_sharded,
            max_tp_shards=base.max_tp_shards,
            page_size_padded=base.page_size_padded,
            num_head_slots=base.num_head_slots,
            state_content_bytes=base.state_content_bytes,
            tokens_per_state=base.tokens_per_state,
            sliding_window=base.sliding_window,
            attention_chunk_size=base.attention_chunk_size,
            non_causal=base.non_causal,
            rswa_window=windows.pop(),
        )


# --------------------------------------------------------------------------------------------
# A.7 ChunkedLocalAttentionSpec (860-897)


@dataclass(frozen=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    attention_chunk_size: int

    def max_admission_blocks_per_request(self, in_flight_tokens: int, max_model_len: int) -> int:
        return blocks_per_request.chunked_local_blocks(max_model_len, self.block_size, self.attention_chunk_size, in_flight_tokens)

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return self.max_admission_blocks_per_request(ctx.in_flight_tokens, ctx.max_model_len) * self.page_size_bytes

    def is_uniform_with_collection(self, kv_cache_specs: dict) -> bool:
        return all(
            isinstance(spec, ChunkedLocalAttentionSpec) and spec.attention_chunk_size == self.attention_chunk_size
            for spec in kv_cache_specs.values()
        )


# --------------------------------------------------------------------------------------------
# A.8 SlidingWindowSpec (900-964)


@dataclass(frozen=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    sliding_window: int
    extra_retained_tokens: int = 0

    @property
    def num_retained_tokens(self) -> int:
        return self.sliding_window - 1 + self.extra_retained_tokens

    def max_admission_blocks_per_request(self, in_flight_tokens: int, max_model_len: int) -> int:
        return blocks_per_request.sliding_window_blocks(
            max_model_len, self.block_size, self.sliding_window, self.extra_retained_tokens, in_flight_tokens
        )

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:  # 946-955
        if self.dcp_sharded and ctx.dcp != 1:
            raise VllmAssertionError("DCP not support sliding window.")
        return self.max_admission_blocks_per_request(ctx.in_flight_tokens, ctx.max_model_len) * self.page_size_bytes

    def is_uniform_with_collection(self, kv_cache_specs: dict) -> bool:
        return all(
            isinstance(spec, SlidingWindowSpec) and spec.sliding_window == self.sliding_window
            for spec in kv_cache_specs.values()
        )


# --------------------------------------------------------------------------------------------
# A.9 CircularBufferSpec (967-1004)


@dataclass(frozen=True, kw_only=True)
class CircularBufferSpec(AttentionSpec):
    @property
    def block_table_token_alignment(self) -> int | None:
        return None

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return blocks_per_request.circular_buffer_blocks() * self.page_size_bytes

    def max_num_blocks_per_req(self, ctx: SpecContext, max_len: int) -> int:
        return 1

    def is_uniform_with_collection(self, kv_cache_specs: dict) -> bool:
        return all(isinstance(spec, CircularBufferSpec) for spec in kv_cache_specs.values())

    @property
    def prefix_cacheable(self) -> bool:
        return False

    @property
    def uses_slot_mapping(self) -> bool:
        return False


# --------------------------------------------------------------------------------------------
# A.10 SlidingWindowMLASpec (1007-1090)


@dataclass(frozen=True, kw_only=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    cache_dtype_str: str | None = None
    alignment: int | None = None
    model_version: str | None = None
    bounded_replay: bool = False
    head_size_v: int = 0

    def __post_init__(self):
        if self.model_version not in (None, "deepseek_v4"):
            raise VllmAssertionError(f"Unsupported model version: {self.model_version}")
        super().__post_init__()
        _apply_alignment_padding(self)

    @property
    def prefix_cacheable(self) -> bool:
        return not self.bounded_replay

    @property
    def prefix_replay_tokens(self) -> int:
        return self.sliding_window if self.bounded_replay else 0

    @classmethod
    def merge(cls, specs: list) -> "SlidingWindowMLASpec":
        if not all(isinstance(spec, SlidingWindowMLASpec) for spec in specs):
            raise VllmAssertionError(
                "All attention layers in the same KV cache group must be SlidingWindowMLASpec."
            )
        sets = [
            {spec.cache_dtype_str for spec in specs},
            {spec.tokens_per_state for spec in specs},
            {spec.model_version for spec in specs},
            {spec.sliding_window for spec in specs},
            {spec.extra_retained_tokens for spec in specs},
            {spec.bounded_replay for spec in specs},
            {spec.block_stride_alignment for spec in specs},
        ]
        if len({spec.dcp_sharded for spec in specs}) != 1 or len({spec.max_tp_shards for spec in specs}) != 1:
            raise VllmAssertionError("")
        if not all(len(s) == 1 for s in sets):
            raise VllmAssertionError(
                "All attention layers in the same KV cache group must use the same quantization method, "
                "tokens per state, model version, sliding window size, retained token count, and replay policy."
            )
        first = specs[0]
        return cls(
            block_size=first.block_size,
            block_stride_alignment=sets[6].pop(),
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            dcp_sharded=first.dcp_sharded,
            max_tp_shards=first.max_tp_shards,
            page_size_padded=first.page_size_padded,
            num_head_slots=first.num_head_slots,
            state_content_bytes=first.state_content_bytes,
            sliding_window=sets[3].pop(),
            extra_retained_tokens=sets[4].pop(),
            cache_dtype_str=sets[0].pop(),
            tokens_per_state=sets[1].pop(),
            model_version=sets[2].pop(),
            bounded_replay=sets[5].pop(),
        )

    def is_uniform_with_collection(self, kv_cache_specs: dict) -> bool:
        return all(
            isinstance(spec, SlidingWindowMLASpec)
            and spec.sliding_window == self.sliding_window
            and spec.bounded_replay == self.bounded_replay
            for spec in kv_cache_specs.values()
        )


# --------------------------------------------------------------------------------------------
# A.11 MambaSpec (1093-1166)


@dataclass(frozen=True, kw_only=True)
class MambaSpec(KVCacheSpec):
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    page_size_padded: int | None = None
    mamba_type: str = "MAMBA2"
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None
    num_heads: int = 1
    tokens_per_state: int = -1
    tp_replicated: bool = False

    @cached_property
    def state_content_size_bytes(self) -> int:
        return pages.mamba_state_size_bytes(
            [pages.state_tensor_bytes(shape, dtype_size(dtype)) for shape, dtype in zip(self.shapes, self.dtypes)]
        )

    @property
    def real_page_size_bytes(self) -> int:
        return self.state_content_size_bytes

    @cached_property  # (as the attention specs')
    def page_size_bytes(self) -> int:
        real = self.state_content_size_bytes
        if not pages.padding_fits(real, self.page_size_padded):
            raise VllmAssertionError("", "v1/kv_cache_interface.py:1127")
        return pages.padded_page_size_bytes(real, self.page_size_padded)

    @property
    def block_table_token_alignment(self) -> int | None:
        return None

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return blocks_per_request.mamba_blocks(
            ctx.mamba_cache_mode == "align", self.num_speculative_blocks, self.num_prefill_checkpoint_blocks
        ) * self.page_size_bytes

    def max_num_blocks_per_req(self, ctx: SpecContext, max_len: int) -> int:
        if ctx.mamba_cache_mode == "align":
            return cdiv(max_len, self.block_size) + self.num_speculative_blocks
        return cdiv(self.max_memory_usage_bytes(ctx), nonzero(self.page_size_bytes))

    def is_uniform_with_collection(self, kv_cache_specs: dict) -> bool:
        return all(
            isinstance(spec, MambaSpec)
            and spec.num_speculative_blocks == self.num_speculative_blocks
            and spec.num_prefill_checkpoint_blocks == self.num_prefill_checkpoint_blocks
            and spec.prefill_checkpoint_alignment == self.prefill_checkpoint_alignment
            and spec.page_size_bytes == self.page_size_bytes
            and spec.tp_replicated == self.tp_replicated
            for spec in kv_cache_specs.values()
        )


# --------------------------------------------------------------------------------------------
# A.13 EncoderOnlyAttentionSpec, CrossAttentionSpec (1213-1228); A.14 SinkFullAttentionSpec


@dataclass(frozen=True, kw_only=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return blocks_per_request.encoder_only_blocks()


@dataclass(frozen=True, kw_only=True)
class CrossAttentionSpec(AttentionSpec):
    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return blocks_per_request.cross_attention_blocks(ctx.max_num_encoder_input_tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True, kw_only=True)
class SinkFullAttentionSpec(FullAttentionSpec):
    sink_len: int | None = None

    @classmethod
    def merge(cls, specs: list) -> "SinkFullAttentionSpec":  # 1236-1287
        if not all(isinstance(spec, FullAttentionSpec) for spec in specs):
            raise VllmAssertionError("All attention layers in the same KV cache group must be FullAttentionSpec.")
        sliding_window = {spec.sliding_window for spec in specs if spec.sliding_window is not None}
        attention_chunk_size = {spec.attention_chunk_size for spec in specs if spec.attention_chunk_size is not None}
        if any(isinstance(spec, MLAAttentionSpec) for spec in specs):
            raise VllmAssertionError("MLAAttentionSpec should be merged in MLAAttentionSpec.merge")
        first = specs[0]
        merged = cls(
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            head_size_v=first.head_size_v,
            sink_len=first.sink_len,
            block_stride_alignment=first.block_stride_alignment,
            dtype=first.dtype,
            kv_quant_mode=first.kv_quant_mode,
            dcp_sharded=first.dcp_sharded,
            max_tp_shards=first.max_tp_shards,
            page_size_padded=first.page_size_padded,
            num_head_slots=first.num_head_slots,
            state_content_bytes=first.state_content_bytes,
            sliding_window=_merge_window_sizes(sliding_window),
            attention_chunk_size=_merge_window_sizes(attention_chunk_size),
            non_causal=any(spec.non_causal for spec in specs),
        )
        _check_attention_fields(specs, merged)
        if (merged.sliding_window is not None) + (merged.attention_chunk_size is not None) > 1:
            raise VllmAssertionError(
                "Model with both sliding window layers and chunked local attention layers is not supported."
            )
        return merged


# --------------------------------------------------------------------------------------------
# A.15 UniformTypeKVCacheSpecs (1290-1389)


@dataclass(frozen=True, kw_only=True)
class UniformTypeKVCacheSpecs(KVCacheSpec):
    kv_cache_specs: dict[str, KVCacheSpec]

    def __post_init__(self):
        super().__post_init__()
        if self.kv_cache_specs:
            object.__setattr__(self, "dcp_sharded", self.first_spec.dcp_sharded)

    @property
    def prefix_cacheable(self) -> bool:
        return all(spec.prefix_cacheable for spec in self.kv_cache_specs.values())

    @property
    def prefix_replay_tokens(self) -> int:
        return max(spec.prefix_replay_tokens for spec in self.kv_cache_specs.values())

    @property
    def first_spec(self) -> KVCacheSpec:
        return next(iter(self.kv_cache_specs.values()))

    @property
    def page_size_bytes(self) -> int:
        return pages.uniform_type_page_size_bytes([spec.page_size_bytes for spec in self.kv_cache_specs.values()])

    @property
    def block_table_token_alignment(self) -> int | None:
        return self.first_spec.block_table_token_alignment

    def max_memory_usage_bytes(self, ctx: SpecContext) -> int:
        return self.max_memory_usage_pages(ctx) * self.page_size_bytes

    def max_num_blocks_per_req(self, ctx: SpecContext, max_len: int) -> int:
        widths = {spec.max_num_blocks_per_req(ctx, max_len) for spec in self.kv_cache_specs.values()}
        if len(widths) != 1:
            raise VllmAssertionError(
                "All layers in the same KV cache group must need the same number of block table entries, "
                f"got {sorted(widths)}."
            )
        return next(iter(widths))

    @classmethod
    def is_uniform_type(cls, kv_cache_specs: dict[str, KVCacheSpec]) -> bool:
        if len({spec.block_size for spec in kv_cache_specs.values()}) > 1:
            return False
        if len({spec.dcp_sharded for spec in kv_cache_specs.values()}) > 1:
            return False
        first = next(iter(kv_cache_specs.values()))
        return first.is_uniform_with_collection(kv_cache_specs)

    @classmethod
    def from_specs(cls, kv_cache_specs: dict[str, KVCacheSpec]) -> "UniformTypeKVCacheSpecs | None":
        if cls.is_uniform_type(kv_cache_specs):
            block_size = next(iter(kv_cache_specs.values())).block_size
            return cls(block_size=block_size, kv_cache_specs=kv_cache_specs)
        return None

    def get_max_layers_per_page_size(self) -> int:
        return Counter(spec.page_size_bytes for spec in self.kv_cache_specs.values()).most_common(1)[0][1]

    def max_memory_usage_pages(self, ctx: SpecContext) -> int:
        return max(spec.blocks_per_request(ctx) for spec in self.kv_cache_specs.values())

    @property
    def uses_slot_mapping(self) -> bool:
        return self.first_spec.uses_slot_mapping

    def blocks_per_request(self, ctx: SpecContext) -> int:
        return self.max_memory_usage_pages(ctx)


# --------------------------------------------------------------------------------------------
# Registry (v1/core/single_type_kv_cache_manager.py:2656-2730, v1/kv_cache_spec_registry.py)

#: spec class -> (manager class name, uniform type base spec); looked up along the MRO.
_REGISTRY: dict[type, tuple[str, type]] = {
    FullAttentionSpec: ("FullAttentionManager", FullAttentionSpec),
    SlidingWindowSpec: ("SlidingWindowManager", SlidingWindowSpec),
    CircularBufferSpec: ("CircularBufferManager", CircularBufferSpec),
    SlidingWindowMLASpec: ("SlidingWindowManager", SlidingWindowMLASpec),
    MambaSpec: ("MambaManager", MambaSpec),
    ChunkedLocalAttentionSpec: ("ChunkedLocalAttentionManager", ChunkedLocalAttentionSpec),
    CrossAttentionSpec: ("CrossAttentionManager", CrossAttentionSpec),
    MLAAttentionSpec: ("FullAttentionManager", FullAttentionSpec),
    RSWASpec: ("RSWAManager", FullAttentionSpec),
    HiddenStateCacheSpec: ("FullAttentionManager", FullAttentionSpec),
    SinkFullAttentionSpec: ("SinkFullAttentionManager", FullAttentionSpec),
}

#: ``supports_fine_grained_hash_lookup`` of each manager class (kv_cache_utils.py:762-801).
SUPPORTS_FINE_GRAINED_HASH_LOOKUP: dict[str, bool] = {
    "FullAttentionManager": True,
    "MambaManager": True,
    "RSWAManager": True,
    "SinkFullAttentionManager": True,
    "SlidingWindowManager": False,
    "ChunkedLocalAttentionManager": False,
    "CircularBufferManager": False,
    "CrossAttentionManager": False,
}


def _registered(spec: KVCacheSpec) -> tuple[str, type] | None:
    for base in type(spec).__mro__:
        if base in _REGISTRY:
            return _REGISTRY[base]
    return None


def uniform_type_base_spec(spec: KVCacheSpec) -> type | None:
    """``KVCacheSpecRegistry.get_uniform_type_base_spec`` (MRO walk)."""
    entry = _registered(spec)
    return entry[1] if entry else None


def manager_class_name(spec: KVCacheSpec) -> str | None:
    """``KVCacheSpecRegistry.get_manager_class(spec).__name__`` (MRO walk)."""
    entry = _registered(spec)
    return entry[0] if entry else None


#: The classes a geometry may name.
SPEC_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        FullAttentionSpec, MLAAttentionSpec, HiddenStateCacheSpec, RSWASpec,
        SinkFullAttentionSpec, ChunkedLocalAttentionSpec, SlidingWindowSpec, SlidingWindowMLASpec,
        CircularBufferSpec, MambaSpec, EncoderOnlyAttentionSpec, CrossAttentionSpec,
    )
}


def iter_layer_specs(spec: KVCacheSpec) -> list[KVCacheSpec]:
    """``iter_layer_specs`` (1392-1402)."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return list(spec.kv_cache_specs.values())
    return [spec]


def replace_as(spec: KVCacheSpec, target_cls: type, *, drop: tuple[str, ...] = (), **changes: Any) -> KVCacheSpec:
    """``replace_as`` (kv_cache_interface.py:153-172): rebuild ``spec`` as ``target_cls``.
    A field the target lacks is vLLM's ``TypeError`` (``unexpected keyword argument``)."""
    kwargs = {f.name: getattr(spec, f.name) for f in fields(spec) if f.init and f.name not in drop}
    kwargs.update(changes)
    target_fields = {f.name for f in fields(target_cls) if f.init}
    for name in kwargs:
        if name not in target_fields:
            raise VllmTypeError(f"{target_cls.__name__}.__init__() got an unexpected keyword argument '{name}'")
    return target_cls(**kwargs)
