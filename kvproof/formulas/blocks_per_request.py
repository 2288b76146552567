"""Blocks one request needs at ``max_model_len``, per KV cache group kind (B.5).

These are the terms of vLLM's start-up memory check and of its concurrency denominator:
``cdiv(max_memory_usage_bytes, page_size_bytes)`` of a group's spec, where
``max_memory_usage_bytes`` is always ``blocks * page`` (``vllm/v1/kv_cache_interface.py``).
Written with :mod:`kvproof.logic` helpers so they run on ints and on z3 terms.
"""

from __future__ import annotations

from typing import Any

from ..logic import And, If, Min, cdiv

__all__ = [
    "full_attention_blocks", "sliding_window_blocks", "chunked_local_blocks",
    "circular_buffer_blocks", "mamba_blocks", "cross_attention_blocks", "encoder_only_blocks",
    "max_in_flight_tokens", "max_concurrent_batches",
]


def full_attention_blocks(max_model_len: Any, block_size: Any, dcp: Any = 1, dcp_sharded: Any = True) -> Any:
    """``FullAttentionSpec.max_memory_usage_bytes`` / page (643-648):
    ``cdiv(L', bs)`` with ``L' = cdiv(L, dcp)`` when the spec is DCP-sharded and dcp > 1.
    Also MLA, RSWA, sink and hidden-state layers (inherited)."""
    length = If(And(dcp_sharded, dcp > 1), cdiv(max_model_len, dcp), max_model_len)
    return cdiv(length, block_size)


def sliding_window_blocks(
    max_model_len: Any, block_size: Any, sliding_window: Any, extra_retained_tokens: Any, in_flight_tokens: Any
) -> Any:
    """``SlidingWindowSpec.max_admission_blocks_per_request`` (918-944):
    ``cdiv(min(W - 1 + extra + IF, L), bs) + 1`` -- the ``+1`` survives the ``L`` cap (S4)."""
    tokens = Min(sliding_window - 1 + extra_retained_tokens + in_flight_tokens, max_model_len)
    return cdiv(tokens, block_size) + 1


def chunked_local_blocks(max_model_len: Any, block_size: Any, chunk_size: Any, in_flight_tokens: Any) -> Any:
    """``ChunkedLocalAttentionSpec.max_admission_blocks_per_request`` (864-881):
    ``cdiv(min(chunk + IF, L), bs)``."""
    return cdiv(Min(chunk_size + in_flight_tokens, max_model_len), block_size)


def circular_buffer_blocks() -> int:
    """``CircularBufferSpec.max_memory_usage_bytes`` = one page (982-985)."""
    return 1


def mamba_blocks(align_mode: Any, num_speculative_blocks: Any, num_prefill_checkpoint_blocks: Any) -> Any:
    """``MambaSpec.max_memory_usage_bytes`` / page (1135-1141), by the engine's
    ``cache_config.mamba_cache_mode``: align ``2 + k + c``, otherwise ``1 + k`` (c not counted)."""
    return If(align_mode, 2 + num_speculative_blocks + num_prefill_checkpoint_blocks, 1 + num_speculative_blocks)


def cross_attention_blocks(max_num_encoder_input_tokens: Any, block_size: Any) -> Any:
    """``CrossAttentionSpec.max_memory_usage_bytes`` / page (1220-1228)."""
    return cdiv(max_num_encoder_input_tokens, block_size)


def encoder_only_blocks() -> int:
    """``EncoderOnlyAttentionSpec.max_memory_usage_bytes`` = 0 (1213-1217)."""
    return 0


def max_concurrent_batches(async_scheduling: Any, pipeline_parallel_size: Any, v2_model_runner: bool = False) -> Any:
    """``VllmConfig.max_concurrent_batches`` (config/vllm.py:587-598)."""
    if v2_model_runner:
        return If(async_scheduling, pipeline_parallel_size + 1, pipeline_parallel_size)
    return If(And(async_scheduling, pipeline_parallel_size <= 1), 2, pipeline_parallel_size)


def max_in_flight_tokens(
    max_num_batched_tokens: Any, async_scheduling: Any, pipeline_parallel_size: Any = 1, v2_model_runner: bool = True
) -> Any:
    """``VllmConfig.max_in_flight_tokens`` (config/vllm.py:600-609):
    ``max_concurrent_batches * max_num_batched_tokens``."""
    return max_concurrent_batches(async_scheduling, pipeline_parallel_size, v2_model_runner) * max_num_batched_tokens
