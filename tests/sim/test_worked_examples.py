"""Every worked number of geometry-format.md and vllm033-invariants.md (vLLM 0.33.0 oracle runs)."""

from __future__ import annotations

import math

import pytest

from kvproof.models.geometry import load_geometry
from kvproof.sim import plan, simulate_document
from kvproof.sim.startup.grouping import approximate_gcd

from sim_helpers import full_attention, geometry


def test_plain_32_layer_full_attention_20_gib(example) -> None:
    out = simulate_document(example("plain-32-full-attention.json"))
    assert out["status"] == "ok"
    (group,) = out["groups"]
    assert group["spec"] == "FullAttentionSpec"
    assert len(group["layers"]) == 32
    assert group["page_size_bytes"] == 65_536
    assert group["blocks_per_request_at_max_model_len"] == 512
    assert out["bytes_per_block"] == 2_097_152
    assert out["num_blocks"] == 10_240
    assert out["num_usable_blocks"] == 10_239
    assert out["max_concurrency"] == 20.0
    assert out["kv_cache_size_tokens"] == 163_840
    assert out["per_group_blocks_per_request"] == [512]
    assert (out["scheduler_block_size"], out["hash_block_size"], out["cache_hit_alignment_tokens"]) == (16, 16, 16)
    assert out["engine_cache_config_block_size"] == 16
    (tensor,) = out["kv_cache_tensors"]
    # LBNHC is layer-outermost: each layer owns num_blocks pages.
    assert tensor == {
        "size": 2_097_152 * 10_240, "layers": group["layers"], "offset": 0, "block_stride": 65_536,
        "layer_stride": 65_536 * 10_240,
    }


def test_61_mla_layers(example) -> None:
    out = simulate_document(example("mla-61-layers.json"))
    (group,) = out["groups"]
    assert group["spec"] == "MLAAttentionSpec"
    assert group["page_size_bytes"] == 73_728  # 64 tokens x 576 x 2 B, no separate V
    assert out["num_blocks"] == 11_937
    assert group["blocks_per_request_at_max_model_len"] == 2_560
    assert round(out["max_concurrency"], 2) == 4.66
    assert out["max_concurrency"] == 11_937 / 2_560


def test_bamba_like_align_mode(example) -> None:
    out = simulate_document(example("bamba-like-align.json"))
    assert out["status"] == "ok"
    # Platform alignment: 528-token blocks, Mamba page 2,147,840 padded to 2,162,688.
    assert out["platform_alignment"] == {"block_size": 528, "mamba_block_size": 528, "mamba_page_size_padded": 2_162_688}
    groups = out["groups"]
    assert len(groups) == 11
    mamba = [g for g in groups if g["spec"] == "MambaSpec"]
    attention = [g for g in groups if g["spec"] == "FullAttentionSpec"]
    assert len(mamba) == 10 and len(attention) == 1
    assert sorted(len(g["layers"]) for g in mamba) == [2] + [3] * 9  # one group holds a padding slot
    assert all(g["page_size_bytes"] == 2_162_688 for g in groups)
    assert [g["blocks_per_request_at_max_model_len"] for g in mamba] == [3] * 10  # 2 + k=0 + c=1
    assert attention[0]["blocks_per_request_at_max_model_len"] == 63
    assert out["bytes_per_block"] == 3 * 2_162_688  # the fullest group, padding included
    assert out["memory_needed_for_one_max_len_request_bytes"] == 603_389_952  # S3: per group, 93 blocks
    assert out["num_blocks"] == 3_309
    assert round(out["max_concurrency"], 2) == 35.58
    assert out["max_concurrency"] == 3_309 / (10 * 3 + 63)
    assert (out["scheduler_block_size"], out["hash_block_size"], out["cache_hit_alignment_tokens"]) == (528, 528, 528)
    assert "Add 1 padding layers, may waste at most 3.45% KV cache memory" in out["warnings"]


def test_bamba_like_uniform_page_grouping_is_strided(example) -> None:
    result = plan(load_geometry(example("bamba-like-align.json")))
    mamba_layers = [name for name in result.layer_specs if name.endswith("mixer")]
    assert len(mamba_layers) == 29
    # group i = layers[i::10] (B.1b step 3)
    for i in range(10):
        assert result.groups[i].layer_names == mamba_layers[i::10]
    assert [g.padding_layers for g in result.groups] == [0] * 9 + [1, 0]


def test_bamba_like_none_mode_huge_scheduler_block(example) -> None:
    out = simulate_document(example("bamba-like-none.json"))
    mamba = [g for g in out["groups"] if g["spec"] == "MambaSpec"]
    assert [g["blocks_per_request_at_max_model_len"] for g in mamba] == [1] * 10  # 1 + k, c not counted
    assert {g["block_size"] for g in mamba} == {32_768}  # mamba_block_size = max_model_len
    assert out["platform_alignment"]["mamba_block_size"] == 32_768
    assert out["scheduler_block_size"] == out["hash_block_size"] == math.lcm(32_768, 528) == 1_081_344  # S5


def test_glm_like_packed_grouping(example) -> None:
    result = plan(load_geometry(example("glm-like-packed.json")))
    assert result.layout == "BLHNC"
    assert result.grouping_path == "packed"
    sizes = [len(g.layer_names) for g in result.groups]
    assert sizes == [9, 9, 8, 8, 22, 11]  # 4 KDA groups, MLA + indexer, ring
    kda = [name for name in result.layer_specs if name.endswith("linear_attn")]
    assert [g.layer_names for g in result.groups[:4]] == [kda[i::4] for i in range(4)]
    mla_group = result.groups[4]
    assert mla_group.spec_class == "UniformTypeKVCacheSpecs"
    assert {type(s).__name__ for s in mla_group.layer_specs.values()} == {"MLAAttentionSpec"}
    assert mla_group.page_size_bytes == 7_441_280 == 11 * 655_360 + 11 * 21_120  # the anchor
    assert result.groups[5].manager == "CircularBufferManager"
    assert result.groups[5].block_size == 4
    # KDA: 542,720 B padded to 655,360 by the 640-token MLA block (B.2)
    assert result.platform_alignment.block_size == 640
    assert result.settings.mamba_page_size_padded == 655_360
    # bytes_per_block = round_up(anchor, lcm(1024, 4224) = 33,792) (S11)
    assert math.lcm(1024, 4224) == 33_792
    assert result.bytes_per_block == 7_468_032 == math.ceil(7_441_280 / 33_792) * 33_792
    assert result.num_blocks == 8_626
    assert result.per_group_blocks_per_request == [3, 3, 3, 3, 205, 1]
    assert round(result.max_concurrency, 2) == 39.57


def test_glm_like_repeats_and_anchor() -> None:
    # B.1c: repeats = _approximate_gcd([34, 11, 11], lower_bound=11) = 12
    assert approximate_gcd([34, 11, 11], lower_bound=11) == 12
    assert approximate_gcd([4, 6]) == 2
    assert approximate_gcd([5], lower_bound=9) == 9


def test_glm_like_views(example) -> None:
    out = simulate_document(example("glm-like-packed.json"))
    views = {v["layers"][0]: v for v in out["worker_views"]}
    assert len(out["worker_views"]) == 7  # one per (backend, layer spec) of each group
    indexer = views["model.layers.3.self_attn.indexer.k_cache"]
    assert len(indexer["layers"]) == 11
    # bind-time split of a packed compressed cache: 640-token blocks -> 128-token kernel blocks
    assert indexer["kernel_block_size"] == 128
    assert indexer["kernel_block_stride"] == 7_468_032 // 4_224 == 1_768
    assert indexer["shape"] == [3_541, 1, 32, 132]
    assert indexer["kernel_block_table"] == [*range(0, 5), *range(1768, 1773), *range(3536, 3541)]
    kda = views["model.layers.0.linear_attn"]
    assert kda["shape"] == [3, 1, 1, 542_720]  # the padded tail is not in the view
    assert kda["strides"][0] == 7_468_032
    assert kda["dtype"] == "int8"
    assert kda["kernel_block_stride"] == 0


def test_allocation_time_split_view() -> None:
    # D: bs 64 with a 16-token kernel -> view (12, 8, 16, 256), kernel_block_stride 0, table [0..11]
    doc = geometry(full_attention(count=2), block_size=64,
                   views={"num_blocks": 3, "backends": [{"match": "attn", "kernel_block_sizes": [16]}]})
    out = simulate_document(doc)
    (view,) = out["worker_views"]
    assert view["layers"] == ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn"]
    assert view["shape"] == [12, 8, 16, 256]
    assert view["kernel_block_size"] == 16
    assert view["kernel_block_stride"] == 0
    assert view["kernel_block_table"] == list(range(12))


def test_not_enough_memory_refusal_text(example) -> None:
    out = simulate_document(example("refusal-not-enough-memory.json"))
    assert out["status"] == "refused"
    assert out["error"]["message"] == (
        "To serve at least one request with the model's max seq len (8192), (1.0 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (0.5 GiB). Based on the available memory, the estimated maximum "
        "model length is 4080. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
        "backend) or decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )


def test_swa_can_cost_more_than_full_attention() -> None:
    # S4: W=1024, L=8192, bs=16: an all-SWA model needs cdiv(8192, 16) + 1 = 513 blocks, full attention 512.
    swa = simulate_document(geometry(full_attention(count=4, spec="SlidingWindowSpec", sliding_window=1024)))
    full = simulate_document(geometry(full_attention(count=4)))
    assert swa["per_group_blocks_per_request"] == [513]
    assert full["per_group_blocks_per_request"] == [512]


def test_swa_blocks_follow_in_flight_tokens() -> None:
    # ex.02 shape: W=128, bs 16, async scheduling (2 x 8192 in flight): cdiv(127 + 16384, 16) + 1 = 1033
    doc = geometry(full_attention(name="model.layers.{i}.full", count=4),
                   full_attention(name="model.layers.{i}.swa", count=4, spec="SlidingWindowSpec", sliding_window=128),
                   max_model_len=131_072)
    out = simulate_document(doc)
    assert sorted(out["per_group_blocks_per_request"]) == [1033, 8192]
    sync = simulate_document({**doc, "async_scheduling": False})
    # without async scheduling one batch is in flight: cdiv(127 + 8192, 16) + 1 = 521
    assert sorted(sync["per_group_blocks_per_request"]) == [521, 8192]


def test_hidden_state_layer_joins_a_uniform_model() -> None:
    # A.5: 32 full + 1 hidden state -> one UniformTypeKVCacheSpecs group of 33 layers
    hidden = {"name": "model.hidden_states", "spec": "HiddenStateCacheSpec", "num_kv_heads": 1, "head_size": 4096,
              "dtype": "bfloat16"}
    out = simulate_document(geometry(full_attention(), hidden))
    (group,) = out["groups"]
    assert group["spec"] == "UniformTypeKVCacheSpecs"
    assert len(group["layers"]) == 33


def test_packed_mamba_without_platform_alignment(example) -> None:
    # B.1c [oracle]: ex.05 without platform alignment, forced BLHNC -> 29 one-layer Mamba groups + 1 attention group
    doc = example("bamba-like-align.json")
    doc["platform_alignment"] = None  # opt out of the (default) platform alignment
    doc["kv_cache_layout"] = "BLHNC"
    result = plan(load_geometry(doc))
    sizes = [len(g.layer_names) for g in result.groups]
    assert sizes == [1] * 29 + [3]


@pytest.mark.parametrize(("pmu", "expected"), [(None, (528, 528, 528)), (16, (528, 16, 16))])
def test_bamba_prefix_match_unit(example, pmu, expected) -> None:
    doc = example("bamba-like-align.json")
    if pmu is not None:
        doc["prefix_match_unit"] = pmu
    out = simulate_document(doc)
    assert (out["scheduler_block_size"], out["hash_block_size"], out["cache_hit_alignment_tokens"]) == expected


def test_swa_hybrid_prefix_match_unit_without_partial_hits() -> None:
    # B.7 [oracle]: 4 full + 32 SWA(4096), bs 16, pmu 8 -> (16, 8), hit alignment 16
    doc = geometry(full_attention(name="model.layers.{i}.full", count=4),
                   full_attention(name="model.layers.{i}.swa", count=32, spec="SlidingWindowSpec", sliding_window=4096),
                   prefix_match_unit=8)
    out = simulate_document(doc)
    assert len(out["groups"]) == 9
    assert (out["scheduler_block_size"], out["hash_block_size"], out["cache_hit_alignment_tokens"]) == (16, 8, 16)
