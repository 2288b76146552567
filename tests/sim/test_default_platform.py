"""A geometry without ``platform_alignment`` is planned on the default platform (issue 13 item 9).

vLLM runs ``Platform.update_block_size_for_backend`` on every GPU start-up
(platforms/interface.py:749-794); without a ``platform_alignment`` block kvproof assumes a CUDA
SM90 GPU and vLLM's backend choice there; ``"platform_alignment": null`` opts out.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from kvproof.sim import simulate_document
from kvproof.sim.startup.platform import DEFAULT_PLATFORM, select_default_backend
from kvproof.sim.startup.refusals import VllmValueError

#: The issue's hybrid: Mamba2 layers with a few full-attention layers, 64k context, 2 GiB.
HYBRID_64K = {
    "name": "hybrid-64k",
    "layers": [
        {"name": "model.layers.{i}.mixer", "indices": [0, 1, 2, 4, 5, 6], "spec": "MambaSpec",
         "shapes": [[3, 8192], [128, 64, 128]], "dtypes": ["bfloat16", "float32"], "mamba_type": "MAMBA2"},
        {"name": "model.layers.{i}.self_attn.attn", "indices": [3, 7], "spec": "FullAttentionSpec",
         "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"},
    ],
    "max_model_len": 65536, "available_memory_bytes": 2 << 30, "enable_prefix_caching": True,
}


def _with(doc: dict, **changes) -> dict:
    out = copy.deepcopy(doc)
    out.update(changes)
    return out


def test_hybrid_without_block_is_aligned_by_default() -> None:
    out = simulate_document(HYBRID_64K)
    assert out["status"] == "ok"
    attention = [g for g in out["groups"] if g["spec"] == "FullAttentionSpec"][0]
    mamba = [g for g in out["groups"] if g["spec"] == "MambaSpec"][0]
    # 16 * ceil(mamba page / (16 * 4096 bytes per token)): the attention page covers the Mamba page
    assert attention["block_size"] == 1040 and attention["page_size_bytes"] == mamba["page_size_bytes"]
    default = out["platform_alignment"]["default"]
    assert default["platform"] == DEFAULT_PLATFORM
    assert default["backend"] == "FLASH_ATTN"
    assert default["backend_kernel_block_sizes"] == [{"MultipleOf": 16}]
    assert default["from_layer"] == "model.layers.3.self_attn.attn"
    assert out["platform_alignment"]["mamba_page_size_padded"] == attention["page_size_bytes"]


def test_null_opts_out_and_the_64k_context_no_longer_fits() -> None:
    out = simulate_document(_with(HYBRID_64K, platform_alignment=None))
    assert out["status"] == "refused"
    assert "To serve at least one request with the model's max seq len (65536)" in out["error"]["message"]


def test_plain_model_reports_the_default_and_plans_the_same() -> None:
    plain = {"layers": [{"name": "model.layers.{i}.self_attn.attn", "range": [0, 4], "spec": "FullAttentionSpec",
                         "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"}],
             "max_model_len": 4096, "available_memory_bytes": 1 << 30}
    default = simulate_document(plain)
    opted_out = simulate_document(_with(plain, platform_alignment=None))
    assert default["platform_alignment"]["block_size"] == 16
    assert default["platform_alignment"]["default"]["backend"] == "FLASH_ATTN"
    assert opted_out["platform_alignment"] is None
    assert {k: v for k, v in default.items() if k != "platform_alignment"} == {
        k: v for k, v in opted_out.items() if k != "platform_alignment"}


def test_attention_free_model_has_no_alignment() -> None:
    mamba_only = _with(HYBRID_64K, layers=HYBRID_64K["layers"][:1], max_model_len=4096)
    assert simulate_document(mamba_only)["platform_alignment"] is None


@pytest.mark.parametrize(("use_mla", "dtype", "cache", "head", "backend"), [
    (False, "bfloat16", "auto", 128, "FLASH_ATTN"),
    (False, "bfloat16", "fp8", 128, "FLASH_ATTN"),
    (False, "float16", "auto", 512, "FLASHINFER"),  # FA3 stops at 256
    (False, "float32", "auto", 128, "TRITON_ATTN"),  # FA and FlashInfer take 16-bit models only
    (False, "float32", "auto", 16, "FLEX_ATTENTION"),  # Triton needs head_size >= 32
    (True, "bfloat16", "auto", 576, "FLASH_ATTN_MLA"),
    (True, "bfloat16", "fp8", 576, "FLASHMLA"),
    (True, "bfloat16", "auto", 128, "TRITON_MLA"),
])
def test_backend_selection_follows_vllms_sm90_priority(use_mla, dtype, cache, head, backend) -> None:
    assert select_default_backend(use_mla, dtype, cache, head).name == backend


def test_no_backend_for_the_model_is_a_refusal() -> None:
    with pytest.raises(VllmValueError, match="No valid attention backend found for cuda"):
        select_default_backend(True, "float32", "auto", 576)
    doc = {"layers": [{"name": "a", "spec": "MLAAttentionSpec", "num_kv_heads": 1, "head_size": 576,
                       "dtype": "float32"}], "max_model_len": 1024, "available_memory_bytes": 1 << 30}
    out = simulate_document(doc)
    assert out["status"] == "refused" and out["error"]["source"] == "vllm/platforms/cuda.py:471-475"


def test_simulate_text_states_the_default(tmp_path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(HYBRID_64K))
    text = subprocess.run([sys.executable, "-m", "kvproof", "simulate", str(path)], capture_output=True,
                          text=True, check=True).stdout
    assert (f"platform alignment       default ({DEFAULT_PLATFORM}): backend FLASH_ATTN [MultipleOf(16)] "
            "for 8 KV heads x 128 bfloat16 (no platform_alignment block; null opts out)") in text
    path.write_text(json.dumps(_with(HYBRID_64K, platform_alignment=None, max_model_len=1024)))
    text = subprocess.run([sys.executable, "-m", "kvproof", "simulate", str(path)], capture_output=True,
                          text=True, check=True).stdout
    assert "platform alignment       none (platform_alignment null, or no attention layer)" in text
