"""Pipeline workers, the cross-worker minimum, the override, tensors of packed and padded layouts."""

from __future__ import annotations

from kvproof.models.geometry import load_geometry
from kvproof.sim import plan, simulate_document

from sim_helpers import full_attention, geometry, load_example


def test_pipeline_workers_take_the_minimum_num_blocks() -> None:
    names = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    doc = geometry(full_attention(), workers=[names[:16], names[16:]],
                   available_memory_bytes=[10 * 2**30, 8 * 2**30])
    result = plan(load_geometry(doc))
    assert [w.bytes_per_block for w in result.workers] == [16 * 65_536] * 2
    assert [w.own_num_blocks for w in result.workers] == [10_240, 8_192]
    assert [w.num_blocks for w in result.workers] == [8_192, 8_192]
    assert result.num_blocks == 8_192
    # both workers' tensors are re-planned with the minimum
    assert all(t.size == 16 * 65_536 * 8_192 for w in result.workers for t in w.tensors)
    assert result.settings.pipeline_parallel_size == 2
    # V2 model runner with async scheduling: pp + 1 concurrent batches (config/vllm.py:587-598)
    assert result.settings.max_in_flight_tokens == 3 * 8192


def test_num_gpu_blocks_override() -> None:
    out = simulate_document(geometry(full_attention(), num_gpu_blocks_override=600))
    assert out["num_blocks"] == 600
    assert out["max_concurrency"] == 600 / 512
    # the override is also what the memory check sees: 599 usable blocks < 512 needed? no: fits
    refused = simulate_document(geometry(full_attention(), num_gpu_blocks_override=512))
    assert refused["status"] == "refused"  # 511 usable blocks after the null block
    assert "max seq len (8192), (1.0 GiB" in refused["error"]["message"]


def test_block_outermost_tensor_placement(example) -> None:
    result = plan(load_geometry(example("glm-like-packed.json")))
    by_first = {t.layers[0]: t for t in result.tensors}
    indexer = by_first["model.layers.3.self_attn.indexer.k_cache"]
    mla = by_first["model.layers.3.self_attn.attn"]
    # layers of a group side by side inside each block: the MLA pages follow the 11 indexer pages
    assert (indexer.offset, indexer.layer_stride, indexer.block_stride) == (0, 21_120, 7_468_032)
    assert (mla.offset, mla.layer_stride, mla.block_stride) == (11 * 21_120, 655_360, 7_468_032)
    assert all(t.size == 7_468_032 * 8_626 for t in result.tensors)


def test_padded_attention_pages_without_platform_alignment(example) -> None:
    # S6: unification pads the attention pages to the Mamba page; 97 % waste, concurrency 1.6 instead of 35.6
    doc = example("bamba-like-align.json")
    doc["platform_alignment"] = None  # opt out of the (default) platform alignment
    out = simulate_document(doc)
    assert out["status"] == "ok"
    attention = [g for g in out["groups"] if g["spec"] == "FullAttentionSpec"][0]
    assert attention["block_size"] == 16
    assert attention["page_size_bytes"] == 2_147_840
    assert round(out["max_concurrency"], 1) == 1.6


def test_tp_replicas() -> None:
    result = plan(load_geometry(load_example("mla-61-layers.json") | {"tp": 8}))
    assert result.workers[0].kv_tp_replicas == 8  # MLA has max_tp_shards=1: every TP rank holds the same KV
