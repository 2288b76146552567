"""vLLM 0.33.0's start-up refusals, text for text (B.1, B.3, B.4, B.7, B.8)."""

from __future__ import annotations

import pytest

from kvproof.models.geometry import load_geometry
from kvproof.sim import PlanRefusal, plan, simulate_document

from sim_helpers import full_attention, geometry, load_example


def refusal(doc: dict) -> dict:
    out = simulate_document(doc)
    assert out["status"] == "refused", out
    return out["error"]


def test_refusal_is_an_exception_with_vllm_text() -> None:
    with pytest.raises(PlanRefusal) as info:
        plan(load_geometry(load_example("refusal-not-enough-memory.json")))
    assert info.value.message.startswith("To serve at least one request with the model's max seq len (8192), (1.0 GiB")
    assert info.value.kind == "ValueError"


def test_no_memory_after_the_null_block() -> None:
    error = refusal(geometry(full_attention(), available_memory_bytes=2_097_152))
    assert error["message"] == (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "
        "engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )


def test_memory_refusal_without_an_estimate() -> None:
    # Not even one token fits: no "Based on the available memory ..." sentence.
    error = refusal(geometry(full_attention(), available_memory_bytes=2_097_152 + 1))
    assert "estimated maximum model length" not in error["message"]
    assert error["message"].startswith("To serve at least one request with the model's max seq len (8192), (1.0 GiB KV")
    assert "available KV cache memory (0.0 GiB). Try increasing" in error["message"]


def test_prefix_match_unit_with_one_group() -> None:
    error = refusal(geometry(full_attention(), prefix_match_unit=8))
    assert error["message"] == (
        "Invalid prefix_match_unit=8; with a single KV cache group, prefix-cache hits land on the block size (16). "
        "Unset it or set it to 16."
    )
    # Without prefix caching the unit is ignored.
    assert simulate_document(geometry(full_attention(), prefix_match_unit=8, enable_prefix_caching=False))["status"] == "ok"


def test_prefix_match_unit_must_divide_cacheable_blocks() -> None:
    doc = geometry(full_attention(name="model.layers.{i}.full", count=4),
                   full_attention(name="model.layers.{i}.swa", count=4, spec="SlidingWindowSpec", sliding_window=4096),
                   prefix_match_unit=6)
    error = refusal(doc)
    assert error["message"] == (
        "Invalid prefix_match_unit=6; prefix-cacheable KV cache group block sizes must be divisible by "
        "prefix_match_unit. Got group block sizes=[16, 16], prefix-cacheable=[16, 16]."
    )


def test_prefix_match_unit_against_per_state_compression() -> None:
    # [oracle] GLM pmu=2 vs kpool 4
    doc = load_example("glm-like-packed.json")
    doc["prefix_match_unit"] = 2
    error = refusal(doc)
    assert error["message"] == (
        "Invalid prefix_match_unit=2; prefix-cache boundaries must align with each spec's per-state compression. "
        "Got alignments=[4]."
    )


def test_layout_cannot_express_mixed_pages() -> None:
    doc = geometry(full_attention(name="model.layers.{i}.a", count=2),
                   full_attention(name="model.layers.{i}.b", count=2, num_kv_heads=4),
                   kv_cache_layout="LHBNC")
    error = refusal(doc)
    assert error["message"] == (
        "KV cache layout LHBNC cannot express this model's mixed page sizes ([32768, 65536]); a backend should "
        "declare block-outermost supported layouts (e.g. BLHNC), or set VLLM_KV_CACHE_LAYOUT=BLHNC."
    )
    # The default preference resolves a block-compact layout for mixed shapes.
    assert simulate_document({**doc, "kv_cache_layout": None})["status"] == "ok"


def test_lhbnc_cannot_pad_pages() -> None:
    error = refusal(geometry(full_attention(count=2, block_stride_alignment=1000), kv_cache_layout="LHBNC"))
    assert error == {"message": "LHBNC cannot pad pages", "type": "AssertionError",
                     "source": "v1/core/kv_cache_planning.py:706-712"}


def test_promotion_failure_with_hybrid_manager_disabled(example) -> None:
    doc = example("bamba-like-align.json")
    doc["disable_hybrid_kv_cache_manager"] = True
    assert refusal(doc)["message"] == "Failed to promote local KV cache specs to one unified type."


def test_swa_mla_promotion_type_error() -> None:
    mla = {"name": "model.layers.{i}.attn", "range": [0, 2], "spec": "MLAAttentionSpec", "num_kv_heads": 1,
           "head_size": 576, "dtype": "bfloat16"}
    swa = {"name": "model.layers.{i}.swa", "range": [0, 2], "spec": "SlidingWindowMLASpec", "num_kv_heads": 1,
           "head_size": 576, "dtype": "bfloat16", "sliding_window": 128}
    error = refusal(geometry(mla, swa, disable_hybrid_kv_cache_manager=True))
    assert error["type"] == "TypeError"
    assert error["message"] == "MLAAttentionSpec.__init__() got an unexpected keyword argument 'bounded_replay'"


def test_two_windows_with_hybrid_manager_disabled() -> None:
    doc = geometry(full_attention(name="model.layers.{i}.full", count=2),
                   full_attention(name="model.layers.{i}.a", count=2, spec="SlidingWindowSpec", sliding_window=128),
                   full_attention(name="model.layers.{i}.b", count=2, spec="SlidingWindowSpec", sliding_window=256),
                   disable_hybrid_kv_cache_manager=True)
    assert refusal(doc)["message"] == "All attention layers in the same KV cache group must have the same window size."


def test_hybrid_manager_disabled_promotes_swa_to_full() -> None:
    doc = geometry(full_attention(name="model.layers.{i}.full", count=2),
                   full_attention(name="model.layers.{i}.swa", count=2, spec="SlidingWindowSpec", sliding_window=128),
                   disable_hybrid_kv_cache_manager=True)
    out = simulate_document(doc)
    (group,) = out["groups"]
    assert group["spec"] == "FullAttentionSpec"
    assert group["blocks_per_request_at_max_model_len"] == 512


def test_mla_pages_cannot_be_padded(example) -> None:
    # [oracle] the GLM geometry forced to LBNHC
    doc = example("glm-like-packed.json")
    doc["kv_cache_layout"] = "LBNHC"
    doc.pop("supported_kv_cache_layouts")
    doc.pop("views")
    error = refusal(doc)
    assert error["type"] == "NotImplementedError"
    assert error["message"] == (
        "Layer model.layers.3.self_attn.indexer.k_cache: page size is not divisible by the maximum page size and "
        "cannot be padded. Padding is only supported for non-MLA attention layers."
    )


def test_mla_swa_full_allocation_fallback() -> None:
    mla = {"name": "model.layers.{i}.attn", "range": [0, 2], "spec": "MLAAttentionSpec", "num_kv_heads": 1,
           "head_size": 576, "dtype": "bfloat16"}
    swa = full_attention(name="model.layers.{i}.draft", count=1, spec="SlidingWindowSpec", sliding_window=128,
                         num_kv_heads=3)
    out = simulate_document(geometry(mla, swa))
    assert out["status"] == "ok"
    (group,) = out["groups"]
    assert group["spec"] == "UniformTypeKVCacheSpecs"
    assert len(group["layers"]) == 3
    assert any("treating sliding-window layers as full attention" in w for w in out["warnings"])


def test_unregistered_spec_class() -> None:
    enc = {"name": "encoder.layers.{i}.attn", "range": [0, 2], "spec": "EncoderOnlyAttentionSpec",
           "num_kv_heads": 8, "head_size": 64, "dtype": "float16"}
    error = refusal(geometry(full_attention(), enc))
    assert error["message"] == (
        "Unsupported KV cache spec type for layer encoder.layers.0.attn: "
        "<class 'vllm.v1.kv_cache_interface.EncoderOnlyAttentionSpec'>. "
        "Please register it using @register_kv_cache_spec decorator."
    )


def test_auto_fit_cannot_fit_one_token() -> None:
    error = refusal(geometry(full_attention(), original_max_model_len=-1, available_memory_bytes=2_097_152 + 10))
    assert error["message"] == (
        "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
        "Try increasing `gpu_memory_utilization`."
    )


def test_auto_fit_shrinks_max_model_len() -> None:
    out = simulate_document(geometry(full_attention(), original_max_model_len=-1, available_memory_bytes=301 * 2**21))
    assert out["status"] == "ok"
    assert out["max_model_len"] == 300 * 16
    assert out["num_blocks"] == 301
    assert out["max_concurrency"] == 301 / 300  # the null block counts


def test_retention_without_a_local_group() -> None:
    assert refusal(geometry(full_attention(), prefix_cache_retention_interval=32))["message"] == (
        "prefix_cache_retention_interval is set but this model has no sliding-window or Mamba KV cache group, "
        "so retention has no effect. Set it to 0 (it only applies to sliding-window and Mamba attention)."
    )


def test_retention_must_be_a_multiple_of_the_scheduler_block(example) -> None:
    doc = example("bamba-like-align.json")
    doc["prefix_cache_retention_interval"] = 1000
    assert refusal(doc)["message"] == (
        "prefix_cache_retention_interval (1000) must be non-negative and a multiple of scheduler_block_size (528)."
    )
    doc["prefix_cache_retention_interval"] = 1056
    assert simulate_document(doc)["status"] == "ok"


def test_multi_module_mtp_needs_a_scheduler_block() -> None:
    draft = {"name": "model.mtp.attn", "spec": "FullAttentionSpec", "num_kv_heads": 8, "head_size": 128,
             "dtype": "bfloat16", "is_draft": True}
    doc = geometry(full_attention(), draft, block_size=2,
                   speculative={"method": "mtp", "num_speculative_tokens": 3, "multi_module_mtp": True})
    assert refusal(doc)["message"] == (
        "Multi-module MTP with prefix caching requires scheduler_block_size (=2) >= num_speculative_tokens (=3)."
    )
    out = simulate_document(doc | {"block_size": 4})
    assert out["status"] == "ok"
    assert out["groups"][0]["is_eagle_group"] is True
    # Without a draft layer no group is an EAGLE group: lookahead block hashes clear the scheduler's
    # use_eagle, so the check does not apply.
    assert simulate_document(geometry(full_attention(), block_size=2, speculative=doc["speculative"]))["status"] == "ok"


def test_sink_manager_cannot_be_constructed() -> None:
    error = refusal(geometry(full_attention(spec="SinkFullAttentionSpec", sink_len=16)))
    assert error["type"] == "TypeError"
    assert error["message"] == (
        "SinkFullAttentionManager.__init__() got an unexpected keyword argument 'needs_kv_cache_zeroing'"
    )


def test_mamba_block_size_needs_prefix_caching(example) -> None:
    doc = example("bamba-like-none.json")
    doc["mamba_block_size"] = 1024
    assert refusal(doc)["message"] == "--mamba-block-size can only be set with --enable-prefix-caching"
    doc["mamba_block_size"] = doc["max_model_len"]  # tolerated
    assert simulate_document(doc)["status"] == "ok"


def test_platform_alignment_rounds_to_every_backend(example) -> None:
    # The aligned block is a multiple of every backend's smallest kernel block (interface.py:1100-1102),
    # so _check_aligned_block_size cannot refuse a backend described by its kernel block sizes alone.
    doc = example("bamba-like-align.json")
    doc["platform_alignment"]["other_backend_kernel_block_sizes"] = [[{"MultipleOf": 32}], [64, 128]]
    out = simulate_document(doc)
    assert out["status"] == "ok"
    assert out["platform_alignment"]["block_size"] == 576  # 528 rounded up to lcm(16, 32, 64) = 64


def test_block_stride_alignment_must_be_positive() -> None:
    assert refusal(geometry(full_attention(block_stride_alignment=0)))["message"] == "block_stride_alignment must be positive"


def test_kernel_split_needs_dense_pages() -> None:
    doc = geometry(full_attention(name="model.layers.{i}.a", count=2),
                   full_attention(name="model.layers.{i}.b", count=2, num_kv_heads=4),
                   block_size=64, kv_cache_layout="BLHNC",
                   views={"backends": [{"match": "layers", "kernel_block_sizes": [16], "name": "FLASH_ATTN"}]})
    out = simulate_document(doc)
    # Block-outermost packing keeps the group's blocks whole; the backend's builder then asks for 16-token
    # kernel blocks of a packed, uncompressed cache: the bind-time refusal.
    assert out["status"] == "refused"
    assert out["error"]["message"] == (
        "FLASH_ATTN needs 16-token kernel blocks, which packed 64-token KV cache blocks cannot be split into. "
        "Reduce --block-size to 16 or set VLLM_KV_CACHE_LAYOUT to a layer-compact layout (e.g. LBNHC)."
    )


def test_no_common_kernel_block_size() -> None:
    doc = geometry(full_attention(count=2), block_size=64,
                   views={"backends": [{"match": "attn", "kernel_block_sizes": [48], "name": "X"}]})
    assert refusal(doc)["message"] == "No common block size for 64 (X: [48])."


def test_zero_page_kernel_copy_divides_by_zero() -> None:
    # An indexer with 4 tokens per state asked for MultipleOf(1) kernel blocks: the 1-token copy has
    # no state, so its page (the stride alignment) is 0 and vLLM's round_up divides by zero.
    indexer = {"name": "idx.{i}", "range": [0, 2], "spec": "MLAAttentionSpec", "num_kv_heads": 1, "head_size": 64,
               "dtype": "bfloat16", "cache_role": "indexer", "tokens_per_state": 4,
               "block_stride_alignment": {"MultipleOf": 1}}
    error = refusal(geometry(indexer, block_size=128, kv_cache_layout="LHBNC"))
    assert error == {"message": "integer division or modulo by zero", "type": "ZeroDivisionError"}
