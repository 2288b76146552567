"""``kvproof geometry CONFIG`` and ``simulate CONFIG --tp N``: the mapping from a config.json and
its refusals (no vLLM needed; tests/conformance/test_model_configs.py compares with vLLM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvproof.configs import ARCHITECTURES, geometry_from_config
from kvproof.configs.common import derived_max_model_len, pp_ranges
from kvproof.configs.hf import HFConfig
from kvproof.diagnostics import InputError
from kvproof.sim import simulate_document

ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT / "tests" / "configs" / "meta-llama--Llama-3.3-70B-Instruct"
KIMI = ROOT / "tests" / "configs" / "moonshotai--Kimi-K2-Instruct-abridged"


def _kvproof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvproof", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)


def _llama() -> dict:
    return json.loads((LLAMA / "config.json").read_text())


CONFIGS = ROOT / "tests" / "configs"


def _config(folder: str) -> dict:
    return json.loads((CONFIGS / folder / "config.json").read_text())


def _by_index(geometry: dict) -> dict[int, dict]:
    """Each layer index -> its entry (ranges expanded)."""
    out = {}
    for entry in geometry["layers"]:
        indices = range(*entry["range"]) if "range" in entry else [entry["index"]]
        for i in indices:
            out[i] = entry
    return out


@pytest.mark.parametrize("tp,heads", [(1, 8), (2, 4), (8, 1), (16, 1)])
def test_llama_kv_heads_per_rank(tp, heads):
    geometry = geometry_from_config(_llama(), tp)
    (entry,) = geometry["layers"]
    assert (entry["spec"], entry["range"], entry["num_kv_heads"], entry["head_size"]) == (
        "FullAttentionSpec", [0, 80], heads, 128)
    assert geometry["max_model_len"] == 131072  # llama3 RoPE: max_position_embeddings unscaled


def test_mla_head_size_is_latent_plus_rope():
    (entry,) = geometry_from_config(json.loads((KIMI / "config.json").read_text()), 8)["layers"]
    assert (entry["spec"], entry["num_kv_heads"], entry["head_size"]) == ("MLAAttentionSpec", 1, 512 + 64)


def test_sliding_layers_follow_layer_types():
    config = dict(_llama(), num_hidden_layers=4, sliding_window=512,
                  layer_types=["sliding_attention", "full_attention"] * 2)
    layers = _by_index(geometry_from_config(config))
    assert [(layers[i]["spec"], layers[i].get("sliding_window")) for i in range(4)] == [
        ("SlidingWindowSpec", 512), ("FullAttentionSpec", None)] * 2


def test_qwen2_mixed_windows_are_vllms_refusal():
    config = dict(_llama(), architectures=["Qwen2ForCausalLM"], use_sliding_window=True, max_window_layers=40)
    with pytest.raises(InputError, match="Sliding window for some but all layers is not supported"):
        geometry_from_config(config)


def test_rope_factor_scales_linear_rope():
    config = HFConfig({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 4.0}})
    assert derived_max_model_len(config) == 16384
    assert derived_max_model_len(HFConfig({})) == 2048


def test_pp_ranges_are_vllms_split():
    assert [len(r) for r in pp_ranges(80, 3)] == [27, 27, 26]
    assert [len(r) for r in pp_ranges(61, 4)] == [15, 15, 16, 15]  # the remainder before the last rank


def test_unknown_architecture_lists_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(_llama(), architectures=["NoSuchForCausalLM"])))
    result = _kvproof("geometry", str(tmp_path), "--set", "available_memory_bytes=1")
    assert result.returncode == 2 and "HF002 $.architectures[0]" in result.stderr
    assert all(arch in result.stderr for arch in ARCHITECTURES) and "Traceback" not in result.stderr


def test_bamba_is_vllms_transformers_backend_refusal(tmp_path):
    """vLLM 0.33.0 builds a Bamba config on its Transformers backend, which refuses the first Mamba
    layer of the rank (model_executor/models/transformers/base.py:630-640)."""
    config = dict(_llama(), architectures=["BambaForCausalLM"], attn_layer_indices=[0, 9, 18, 27])
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = _kvproof("geometry", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert ("HF003 $.attn_layer_indices: Layer 1 (linear_attention) does not dispatch through the Transformers "
            "attention interface and vLLM has no other way to handle it.") in result.stderr
    result = _kvproof("geometry", str(tmp_path), "--tp", "3")
    assert "must be divisible by tensor parallel size (3)." in result.stderr  # the config check comes first


def test_missing_key_and_bad_tp_are_diagnostics(tmp_path):
    config = _llama()
    del config["num_attention_heads"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = _kvproof("geometry", str(tmp_path / "config.json"))
    assert result.returncode == 2 and "HF001 $.num_attention_heads: required key is missing" in result.stderr
    result = _kvproof("geometry", str(LLAMA), "--tp", "3", "--set", "available_memory_bytes=1")
    assert result.returncode == 2 and (
        "HF003 $.num_attention_heads: Total number of attention heads (64) must be divisible by tensor parallel "
        "size (3).") in result.stderr


def test_geometry_needs_memory_and_checks_set(tmp_path):
    result = _kvproof("geometry", str(LLAMA))
    assert result.returncode == 2 and "--set available_memory_bytes" in result.stderr
    result = _kvproof("geometry", str(LLAMA), "--set", "no_such_field=1")
    assert result.returncode == 2 and "not a top-level geometry field" in result.stderr
    result = _kvproof("geometry", str(LLAMA), "--set", "available_memory_bytes=-1")
    assert result.returncode == 2 and "$.available_memory_bytes" in result.stderr


def test_geometry_output_is_deterministic_and_simulates(tmp_path):
    args = ("geometry", str(LLAMA), "--tp", "4", "--set", "available_memory_bytes=21474836480",
            "--set", "block_size=32", "--set", "enable_prefix_caching=false")
    first, second = _kvproof(*args), _kvproof(*args)
    assert first.returncode == 0 and first.stdout == second.stdout
    geometry = json.loads(first.stdout)
    assert (geometry["tp"], geometry["block_size"], geometry["enable_prefix_caching"]) == (4, 32, False)
    out = tmp_path / "g.json"
    assert _kvproof(*args, "-o", str(out)).returncode == 0 and out.read_text() == first.stdout
    simulated = _kvproof("simulate", str(out), "--format", "json")
    direct = _kvproof("simulate", str(LLAMA), "--tp", "4", "--set", "available_memory_bytes=21474836480",
                      "--set", "block_size=32", "--set", "enable_prefix_caching=false", "--format", "json")
    assert simulated.returncode == direct.returncode == 0
    assert json.loads(simulated.stdout)["num_blocks"] == json.loads(direct.stdout)["num_blocks"]


def test_gpt_oss_slides_on_even_layers_and_divides_kv_heads():
    geometry = geometry_from_config(_config("openai--gpt-oss-20b"), 4)
    layers = geometry["layers"]
    assert {e["name"] for e in layers} == {"model.layers.{i}.attn.attn"}
    assert [(e["spec"], e["range"], e.get("sliding_window")) for e in layers] == [
        ("SlidingWindowSpec", [0, 23, 2], 128), ("FullAttentionSpec", [1, 24, 2], None)]
    assert {(e["num_kv_heads"], e["head_size"]) for e in layers} == {(2, 64)}
    assert geometry["max_model_len"] == 131072  # yarn: not scaled again
    with pytest.raises(InputError, match="leave 0 per rank"):
        geometry_from_config(_config("openai--gpt-oss-20b"), 16)


def test_llama4_chunks_the_rope_layers_and_reads_text_config():
    config = _config("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    geometry = geometry_from_config(config, 2)
    layers = _by_index(geometry)
    assert len(layers) == 48 and geometry["max_model_len"] == 10485760
    assert [layers[i]["spec"] for i in range(4)] == ["ChunkedLocalAttentionSpec"] * 3 + ["FullAttentionSpec"]
    assert {(e["name"], e["num_kv_heads"], e["head_size"]) for e in layers.values()} == {
        ("language_model.model.layers.{i}.self_attn.attn", 4, 128)}
    assert layers[0]["attention_chunk_size"] == 8192
    unchunked = dict(config, text_config=dict(config["text_config"], attention_chunk_size=None))
    assert {e["spec"] for e in geometry_from_config(unchunked)["layers"]} == {"FullAttentionSpec"}
    with pytest.raises(InputError, match=r"HF003 \$\.text_config\.num_attention_heads: Total number of attention"):
        geometry_from_config(config, 3)


def test_nemotron_h_follows_the_pattern_with_mamba2_states_per_rank():
    config = _config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    layers = _by_index(geometry_from_config(config, 4))
    pattern = config["hybrid_override_pattern"]
    assert sorted(layers) == [i for i, kind in enumerate(pattern) if kind in "M*"]
    mamba, attention = layers[0], layers[pattern.index("*")]
    # conv: (conv_kernel - 1, (64 * 64 + 2 * 8 * 128) / 4); temporal: (64 / 4, 64, 128)
    assert (mamba["spec"], mamba["name"], mamba["shapes"], mamba["dtypes"]) == (
        "MambaSpec", "model.layers.{i}.mixer", [[3, 1536], [16, 64, 128]], ["bfloat16", "float32"])
    assert (mamba["num_prefill_checkpoint_blocks"], mamba["prefill_checkpoint_alignment"]) == (1, 1)
    assert (attention["spec"], attention["name"], attention["num_kv_heads"], attention["head_size"]) == (
        "FullAttentionSpec", "model.layers.{i}.mixer.attn", 1, 128)
    one_group = dict(config, n_groups=1)
    assert _by_index(geometry_from_config(one_group, 8))[0]["shapes"][0] == [3, (64 * 64 + 2 * 8 * 128) // 8]
    with pytest.raises(InputError, match="must be divisible by tensor parallel size"):
        geometry_from_config(config, 3)
    with pytest.raises(InputError, match="Unsupported layer type 'X' at layer 1"):
        geometry_from_config(dict(config, hybrid_override_pattern="MX"))


def test_qwen3_next_gdn_states_per_rank_and_align_mode():
    config = _config("Qwen--Qwen3-Next-80B-A3B-Thinking")
    layers = _by_index(geometry_from_config(config, 4, settings={"enable_prefix_caching": False}))
    gdn, attention = layers[0], layers[3]
    # conv: (4 - 1, (2 * 128 * 16 + 128 * 32) / 4); temporal: (32 / 4, 128, 128)
    assert (gdn["spec"], gdn["name"], gdn["mamba_type"], gdn["shapes"], gdn["dtypes"]) == (
        "MambaSpec", "model.layers.{i}.linear_attn", "GDN_ATTN", [[3, 2048], [8, 128, 128]], ["bfloat16"] * 2)
    assert "prefill_checkpoint_alignment" not in gdn
    assert (attention["spec"], attention["name"], attention["num_kv_heads"], attention["head_size"]) == (
        "FullAttentionSpec", "model.layers.{i}.self_attn.attn", 1, 256)
    assert [layers[i]["spec"] for i in range(8)] == (["MambaSpec"] * 3 + ["FullAttentionSpec"]) * 2
    # Without prefix caching vLLM runs mamba_cache_mode none whatever the setting (models/config.py:781-785).
    forced = geometry_from_config(config, 4, settings={"enable_prefix_caching": False, "mamba_cache_mode": "align"})
    assert "prefill_checkpoint_alignment" not in _by_index(forced)[0]
    # Align mode: the layers' checkpoint alignment (64) goes to the platform, the grid to the spec.
    geometry = geometry_from_config(config, 4, settings={"available_memory_bytes": 80 << 30})
    block = simulate_document(geometry)["platform_alignment"]["mamba_block_size"]
    gdn = _by_index(geometry)[0]
    assert (gdn["num_prefill_checkpoint_blocks"], gdn["prefill_checkpoint_alignment"]) == (1, block)
    assert block % 64 == 0 and block > 64
    assert geometry["platform_alignment"]["mamba_prefill_checkpoint_alignment"] == 64
    unit = geometry_from_config(config, 4, settings={"available_memory_bytes": 80 << 30, "prefix_match_unit": 48})
    assert _by_index(unit)[0]["prefill_checkpoint_alignment"] == 192  # lcm(48, 64)


def test_deepseek_sparse_mla_and_its_indexer():
    config = _config("deepseek-ai--DeepSeek-V3")
    assert {e["spec"] for e in geometry_from_config(config, 8)["layers"]} == {"MLAAttentionSpec"}
    with pytest.raises(InputError, match=r"HF001 \$\.index_head_dim: required key is missing"):
        geometry_from_config(dict(config, index_topk=2048))
    sparse = _config("deepseek-ai--DeepSeek-V3.2")
    geometry = geometry_from_config(sparse, 8)
    indexer, attention = geometry["layers"]
    assert (indexer["name"], indexer["head_size"], indexer["dtype"], indexer["cache_role"],
            indexer["block_stride_alignment"]) == (
        "model.layers.{i}.self_attn.indexer.k_cache", 128 + 128 // 128 * 4, "uint8", "indexer", {"MultipleOf": 64})
    assert (attention["head_size"], attention["topk_buffer_width"], attention["block_stride_alignment"],
            attention["is_index_group_leader"]) == (576, 2048, 576 * 2, True)
    assert geometry["platform_alignment"]["backend_names"] == ["DEEPSEEK_V32_INDEXER", "FLASH_ATTN_MLA_SPARSE"]
    # IndexCache: with index_topk_freq 2 (offset 2) max(i - 1, 0) % 2 == 0 keeps the indexer on layers
    # 0, 1, 3, 5, ... (models/deepseek_v32/attention.py:170-173)
    entries = geometry_from_config(dict(sparse, index_topk_freq=2), 1)["layers"]
    leaders = [0, *range(1, 61, 2)]
    assert _indices(entries, "model.layers.{i}.self_attn.indexer.k_cache") == leaders
    assert _indices([e for e in entries if e.get("is_index_group_leader")], "model.layers.{i}.self_attn.attn") == leaders
    with pytest.raises(InputError, match=r"HF002 \$\.kv_lora_rank: .*FLASHINFER_MLA_SPARSE_SM90"):
        geometry_from_config(dict(sparse, kv_lora_rank=448))


def _indices(entries: list[dict], name: str) -> list[int]:
    """The layer indices of the entries named ``name`` (ranges expanded)."""
    return sorted(i for e in entries if e["name"] == name
                  for i in (range(*e["range"]) if "range" in e else [e["index"]]))


def _gemma_text(**keys) -> dict:
    """A synthetic Gemma text config for the mapping rules only (no real Gemma config is stored)."""
    return {"num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4, "hidden_size": 2048,
            "head_dim": 256, "max_position_embeddings": 131072, **keys}


def test_gemma2_alternates_from_the_first_layer():
    config = dict(_gemma_text(max_position_embeddings=8192), architectures=["Gemma2ForCausalLM"])
    layers = _by_index(geometry_from_config(config, 2))
    assert [(layers[i]["spec"], layers[i].get("sliding_window")) for i in range(4)] == [
        ("SlidingWindowSpec", 4096), ("FullAttentionSpec", None)] * 2  # the class defaults
    assert {(e["num_kv_heads"], e["head_size"], e["name"]) for e in layers.values()} == {
        (2, 256, "model.layers.{i}.self_attn.attn")}


def test_gemma3_pattern_window_and_unscaled_length():
    text = _gemma_text(model_type="gemma3_text", sliding_window=1024,
                       rope_scaling={"rope_type": "linear", "factor": 8.0})
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
              "vision_config": {"num_attention_heads": 16}}
    geometry = geometry_from_config(config, 4)
    layers = _by_index(geometry)
    assert [layers[i]["spec"] for i in range(6)] == ["SlidingWindowSpec"] * 5 + ["FullAttentionSpec"]
    assert layers[0]["sliding_window"] == 1024 and layers[0]["name"].startswith("language_model.model.layers.")
    assert geometry["max_model_len"] == 131072  # Gemma 3's length is already scaled (model.py:2600-2603)
    bidirectional = dict(config, text_config=dict(text, use_bidirectional_attention=True))
    assert _by_index(geometry_from_config(bidirectional))[0]["sliding_window"] == 513
    with pytest.raises(InputError, match=r"HF003 \$\.vision_config\.num_attention_heads: 16 is not divisible by 32"):
        geometry_from_config(dict(config, text_config=dict(text, num_attention_heads=32, num_key_value_heads=32)), 32)
    with pytest.raises(InputError, match="EncoderOnlyAttention"):
        geometry_from_config(dict(config, text_config=dict(text, is_causal=False)))


def test_granite_hybrid_mamba2_and_attention_per_layer_types():
    config = {"architectures": ["GraniteMoeHybridForCausalLM"], "num_hidden_layers": 4, "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 128, "mamba_d_state": 128,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"]}  # synthetic: rules only
    layers = _by_index(geometry_from_config(config, 4))
    # conv: (4 - 1, (2 * 4096 + 2 * 4 * 128) / 4), groups 1 -> 4 for the head shards; temporal (128 / 4, 64, 128)
    assert (layers[0]["name"], layers[0]["shapes"]) == ("model.layers.{i}.mixer", [[3, 2304], [32, 64, 128]])
    assert (layers[3]["name"], layers[3]["num_kv_heads"], layers[3]["head_size"]) == (
        "model.layers.{i}.self_attn.attn", 2, 128)
    with pytest.raises(InputError, match="do not match the model intermediate_size"):
        geometry_from_config(dict(config, mamba_d_head=32))


def test_falcon_h1_numbers_its_mamba_branch_apart_and_keeps_vllms_order():
    config = {"architectures": ["FalconH1ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 3072,
              "num_attention_heads": 12, "num_key_value_heads": 2, "head_dim": 128, "mamba_d_ssm": 3072,
              "mamba_n_heads": 24, "mamba_d_head": 128}  # synthetic: rules only
    geometry = geometry_from_config(config, 2, 2)
    assert geometry["layer_order"] == "as_listed"
    assert [e["name"].replace("{i}", str(e["index"])) for e in geometry["layers"]] == [
        "model.layers.0.attn", "model.2.mixer", "model.layers.1.attn", "model.3.mixer"]
    assert geometry["workers"] == [["model.layers.0.attn", "model.2.mixer"], ["model.layers.1.attn", "model.3.mixer"]]
    assert geometry["layers"][1]["shapes"] == [[3, (3072 + 2 * 2 * 256) // 2], [12, 128, 256]]


def test_jamba_attention_every_period_and_mamba1_states():
    config = {"architectures": ["JambaForCausalLM"], "num_hidden_layers": 16, "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8}  # synthetic: rules only
    layers = _by_index(geometry_from_config(config, 8))
    assert [i for i, e in layers.items() if e["spec"] == "FullAttentionSpec"] == [4, 12]
    assert (layers[0]["mamba_type"], layers[0]["shapes"], layers[4]["name"]) == (
        "MAMBA1", [[3, 1024], [1024, 16]], "model.layers.{i}.attn")
    with pytest.raises(InputError, match=r"HF003 \$\.mamba_expand: 8192 is not divisible by 3"):
        geometry_from_config(dict(config, num_attention_heads=33, num_key_value_heads=3), 3)


def test_a_real_config_with_infinity_is_read_as_transformers_reads_it(tmp_path):
    """Nemotron-H-56B's config holds ``"time_step_limit": [0.0, Infinity]`` (Python's json reads it)."""
    folder = CONFIGS / "nvidia--Nemotron-H-56B-Base-8K"
    assert b"Infinity" in (folder / "config.json").read_bytes()
    result = _kvproof("geometry", str(folder), "--tp", "8", "--set", "available_memory_bytes=1000000000")
    assert result.returncode == 0, result.stderr
    assert len(_by_index(json.loads(result.stdout))) == 64  # the M and * of its 118-layer pattern
    (tmp_path / "config.json").write_text(json.dumps(dict(_llama(), max_position_embeddings=1e400)))
    result = _kvproof("geometry", str(tmp_path), "--set", "available_memory_bytes=1")
    assert result.returncode == 2 and "HF001 $.max_position_embeddings: expected a finite number" in result.stderr


def _kimi_linear(**keys) -> dict:
    """A synthetic Kimi-Linear config for the mapping rules only (no real one is stored)."""
    return {"architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 4, "hidden_size": 2304,
            "num_attention_heads": 32, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
            "v_head_dim": 128, "mla_use_nope": True, "model_max_length": 1048576,
            "linear_attn_config": {"kda_layers": [1, 2, 3], "full_attn_layers": [4], "num_heads": 32,
                                   "head_dim": 128, "short_conv_kernel_size": 4}, **keys}


def test_kimi_linear_kda_states_and_nope_mla_per_linear_attn_config():
    geometry = geometry_from_config(_kimi_linear(), 4)
    layers = _by_index(geometry)
    # kda_layers are 1-based: layers 0-2 KDA, layer 3 MLA; all named self_attn (model.py:715-760)
    assert {e["name"] for e in layers.values()} == {"model.layers.{i}.self_attn"}
    assert [layers[i]["spec"] for i in range(4)] == ["MambaSpec"] * 3 + ["MLAAttentionSpec"]
    # conv (4 - 1, 3 * 32 * 128 / 4), recurrent (32 / 4, 128, 128) in float32 (mamba_utils.py:133-148, 296-319)
    assert (layers[0]["shapes"], layers[0]["dtypes"], layers[0]["mamba_type"]) == (
        [[3, 3072], [8, 128, 128]], ["bfloat16", "float32"], "GDN_ATTN")
    assert (layers[3]["num_kv_heads"], layers[3]["head_size"], layers[3]["max_tp_shards"]) == (1, 512 + 64, 1)
    assert geometry["max_model_len"] == 1048576
    assert simulate_document(dict(geometry, available_memory_bytes=80 * 1024**3))["status"] == "ok"
    assert all(e["spec"] == "MLAAttentionSpec" for e in geometry_from_config(
        {k: v for k, v in _kimi_linear().items() if k != "linear_attn_config"})["layers"])
    with pytest.raises(InputError, match=r"HF003 \$\.linear_attn_config\.num_heads: 32 is not divisible by 64"):
        geometry_from_config(_kimi_linear(num_attention_heads=64), 64)
    with pytest.raises(InputError, match=r"HF001 \$\.mla_use_nope: Kimi-K3 MLA .* is NoPE-only"):
        geometry_from_config(_kimi_linear(mla_use_nope=False))
    with pytest.raises(InputError, match=r"HF001 \$\.linear_attn_config\.full_attn_layers: expected an array"):
        geometry_from_config(_kimi_linear(linear_attn_config={"kda_layers": [1]}))
    full_rank = _kimi_linear()
    full_rank["linear_attn_config"] = dict(full_rank["linear_attn_config"], use_full_rank_gate=True)
    with pytest.raises(InputError, match=r"HF002 \$\.linear_attn_config\.use_full_rank_gate"):
        geometry_from_config(full_rank)


def test_deepseek_mlp_that_tp_cannot_shard_is_refused():
    """vLLM asserts every MLP shards evenly (layers/linear.py:731, layers/fused_moe/config.py:1352),
    whatever the cache: transformers' own DeepseekV2Config default ``moe_intermediate_size`` 1407."""
    config = dict(json.loads((KIMI / "config.json").read_text()), moe_intermediate_size=1407)
    assert geometry_from_config(config, 1)["layers"]
    with pytest.raises(InputError, match=r"HF003 \$\.n_shared_experts: an MLP of intermediate size 1407 cannot be "
                                         r"sharded over tensor parallel size 2"):
        geometry_from_config(config, 2)
    config = dict(config, moe_intermediate_size=2048, intermediate_size=18433)
    with pytest.raises(InputError, match=r"HF003 \$\.intermediate_size: .* 18433 cannot be sharded"):
        geometry_from_config(config, 8)
