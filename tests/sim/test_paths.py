"""Less travelled planning paths (numbers checked against vLLM 0.33.0 through the conformance oracle)."""

from __future__ import annotations

from kvproof.sim import simulate_document

from sim_helpers import geometry


def fa(name: str, indices: list[int], **fields) -> dict:
    entry = {"name": name + ".{i}", "indices": indices, "spec": "FullAttentionSpec", "num_kv_heads": 8,
             "head_size": 128, "dtype": "bfloat16"}
    entry.update(fields)
    return entry


def summary(out: dict) -> list[tuple]:
    return [(g["spec"], len(g["layers"]), g["block_size"], g["blocks_per_request_at_max_model_len"], g["is_eagle_group"])
            for g in out["groups"]]


def test_decode_context_parallel_shards_full_attention() -> None:
    out = simulate_document(geometry(fa("a", list(range(8))), dcp=2, tp=4, available_memory_bytes=8 << 30))
    assert summary(out) == [("FullAttentionSpec", 8, 16, 256, False)]  # cdiv(cdiv(8192, 2), 16)
    assert (out["scheduler_block_size"], out["hash_block_size"]) == (32, 32)  # block_size x dcp
    assert out["max_concurrency"] == 64.0


def test_decode_context_parallel_refusals() -> None:
    out = simulate_document(geometry(fa("a", [0, 1]), dcp=2, tp=1))
    assert out["error"]["message"] == "tp_size=1 must be divisible by dcp_size=2."
    out = simulate_document(geometry(fa("a", [0, 1]), fa("s", [2, 3], spec="SlidingWindowSpec", sliding_window=256),
                                     dcp=2, tp=2))
    assert out["error"] == {"message": "DCP not support sliding window.", "type": "AssertionError"}


def test_dcp_with_mamba_allows_partial_hash_hits() -> None:
    mamba = {"name": "mb.{i}", "indices": [4, 5, 6, 7], "spec": "MambaSpec", "shapes": [[2, 256]], "dtypes": ["bfloat16"]}
    out = simulate_document(geometry(fa("a", [0, 1, 2, 3]), mamba, dcp=2, tp=2, prefix_match_unit=16,
                                     available_memory_bytes=8 << 30))
    assert summary(out) == [("FullAttentionSpec", 4, 16, 256, False), ("MambaSpec", 4, 16, 2, False)]
    # dcp > 1 accepts a Mamba block equal to the hash block (kv_cache_utils.py:780-781)
    assert (out["scheduler_block_size"], out["hash_block_size"], out["cache_hit_alignment_tokens"]) == (32, 16, 16)


def test_hidden_state_group_in_a_hybrid_model() -> None:
    hidden = {"name": "hs", "spec": "HiddenStateCacheSpec", "num_kv_heads": 1, "head_size": 4096, "dtype": "bfloat16"}
    out = simulate_document(geometry(fa("a", [0, 2, 4]), fa("s", [1, 3, 5], spec="SlidingWindowSpec", sliding_window=512),
                                     hidden, available_memory_bytes=8 << 30))
    # the hidden-state layer takes the common page with the largest block dividing gcd(16, 16) that fits it
    assert summary(out) == [("FullAttentionSpec", 3, 16, 512, False), ("SlidingWindowSpec", 3, 16, 513, False),
                            ("HiddenStateCacheSpec", 1, 8, 1024, False)]
    assert {g["page_size_bytes"] for g in out["groups"]} == {65_536}
    assert (out["scheduler_block_size"], out["hash_block_size"]) == (16, 8)


def test_chunked_local_attention_with_and_without_the_hybrid_manager() -> None:
    layers = (fa("a", [0, 4]), fa("c", [1, 2, 3, 5, 6, 7], spec="ChunkedLocalAttentionSpec", attention_chunk_size=8192))
    on = simulate_document(geometry(*layers, max_model_len=131_072))
    assert summary(on) == [("FullAttentionSpec", 2, 16, 8192, False)] + [("ChunkedLocalAttentionSpec", 2, 16, 1536, False)] * 3
    off = simulate_document(geometry(*layers, max_model_len=131_072, disable_hybrid_kv_cache_manager=True))
    assert summary(off) == [("FullAttentionSpec", 8, 16, 8192, False)]  # promoted to full allocation
    assert off["max_concurrency"] == 5.0


def test_eagle_draft_layers_flag_their_group() -> None:
    draft = {"name": "draft", "spec": "FullAttentionSpec", "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16",
             "is_draft": True}
    out = simulate_document(geometry(fa("a", list(range(4))), fa("s", [4, 5, 6, 7], spec="SlidingWindowSpec",
                                                                    sliding_window=1024), draft,
                                     max_model_len=32_768, speculative={"method": "eagle3", "num_speculative_tokens": 3}))
    # is_draft does not enter equality, so the draft joins the full-attention group and marks it
    assert summary(out) == [("FullAttentionSpec", 5, 16, 2048, True), ("SlidingWindowSpec", 4, 16, 1089, False)]


def test_pipeline_stages_project_a_uniform_type_group() -> None:
    names = [f"a.{i}" for i in range(4)] + [f"b.{i}" for i in range(4, 8)]
    out = simulate_document(geometry(fa("a", [0, 1, 2, 3]), fa("b", [4, 5, 6, 7], num_kv_heads=4),
                                     available_memory_bytes=[8 << 30, 6 << 30], workers=[names[:5], names[5:]]))
    assert summary(out) == [("UniformTypeKVCacheSpecs", 8, 16, 512, False)]
    assert [(w["bytes_per_block"], w["num_blocks"]) for w in out["workers"]] == [(294_912, 29_127), (98_304, 29_127)]


def test_platform_phase_one_picks_a_block_every_backend_accepts() -> None:
    mamba = {"name": "mb.{i}", "indices": [2, 3, 4], "spec": "MambaSpec", "shapes": [[2, 4096]], "dtypes": ["bfloat16"]}
    doc = geometry(fa("a", [0, 1]), mamba, available_memory_bytes=8 << 30,
                   platform_alignment={"num_kv_heads": 8, "head_size": 128, "backend_kernel_block_sizes": [32, 64],
                                       "other_backend_kernel_block_sizes": [[{"MultipleOf": 48}]]})
    doc.pop("block_size")  # phase 1 runs only without a user block size: lcm(32, 48) = 96
    out = simulate_document(doc)
    assert out["platform_alignment"] == {"block_size": 96, "mamba_block_size": 96, "mamba_page_size_padded": 393_216}
    assert summary(out) == [("FullAttentionSpec", 2, 96, 86, False), ("MambaSpec", 2, 96, 2, False),
                            ("MambaSpec", 1, 96, 2, False)]


def test_attention_free_model() -> None:
    out = simulate_document({"layers": [], "max_model_len": 8192, "available_memory_bytes": 1 << 30})
    assert out["status"] == "ok"
    assert (out["num_blocks"], out["max_concurrency"], out["groups"]) == (1, None, [])
    assert out["workers"][0]["available_memory_bytes"] == 0
