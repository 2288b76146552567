"""ReplaySSM in the simulator: the replay rings' bytes, no separate speculative blocks, and the
support table's refusals at start-up (docs/state-storage.md "Geometries").

The numbers are worked by hand from vLLM 0.33.0's formulas (mamba_utils.py:214-246: x
``(heads, L, head_dim)`` and B ``(groups, L, state)`` in the model dtype, dt ``(heads, L)`` float32;
FlashInfer ``L = window + 1 + drafts``); the conformance goldens of the same geometries
(tests/conformance/geometries/replayssm_*.json) are vLLM's own answers.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvproof.diagnostics import InputError
from kvproof.models.geometry import load_geometry
from kvproof.sim import PlanRefusal, plan
from kvproof.sim.startup.replay_ring import ring_length, ring_shapes

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "conformance" / "geometries"


def _geometry(name: str) -> dict:
    return json.loads((GOLDENS / f"{name}.json").read_text())


def _mamba(p):
    return p.layer_specs["model.layers.0.mamba"]


def test_flashinfer_ring_grows_with_the_draft_depth():
    p = plan(load_geometry(_geometry("replayssm_flashinfer_mtp_rings")))
    spec = _mamba(p)
    # window 8 + 1 + 3 drafts; 64 heads per TP-2 shard, head_dim 64, 1 group (replicated: 1 per shard)
    assert spec.shapes[2:] == ((64, 12, 64), (64, 12), (1, 12, 128))
    assert spec.dtypes[2:] == ("bfloat16", "float32", "bfloat16")
    base = 3 * 4352 * 2 + 64 * 64 * 128 * 2
    rings = 64 * 12 * 64 * 2 + 64 * 12 * 4 + 1 * 12 * 128 * 2
    assert spec.real_page_size_bytes == base + rings == 1_179_136
    # ReplaySSM sets separate speculative blocks to zero (abstract.py:84-90), drafts or not
    assert spec.num_speculative_blocks == 0


def test_triton_ring_is_the_window_and_enters_the_alignment():
    g = _geometry("replayssm_triton_align_rings")
    p = plan(load_geometry(g))
    assert _mamba(p).shapes[2:] == ((128, 16, 64), (128, 16), (1, 16, 128))
    without = copy.deepcopy(g)
    del without["use_replayssm"], without["state_backend"]
    q = plan(load_geometry(without))
    # the rings (274,432 bytes) move the aligned Mamba block from 528 to 592 tokens
    assert _mamba(p).real_page_size_bytes - _mamba(q).real_page_size_bytes == 128 * 16 * 64 * 2 + 128 * 16 * 4 + 16 * 128 * 2
    assert (q.settings.mamba_block_size, p.settings.mamba_block_size) == (528, 592)


def test_full_state_keeps_one_speculative_block_per_draft():
    g = _geometry("replayssm_flashinfer_mtp_rings")
    g["use_replayssm"] = False
    assert _mamba(plan(load_geometry(g))).num_speculative_blocks == 3


def test_ring_formulas():
    assert [ring_length(16, fi, k) for fi in (False, True) for k in (0, 2)] == [16, 16, 17, 19]
    # extra_groups_for_head_shards is ``tp - ngroups`` when the groups do not split (meant for 1
    # group): 1 group over 4 shards -> 4 groups, 1 per shard; vLLM's 3 groups over 2 shards -> 2, 1 per shard
    assert ring_shapes((8, 4, 16), 1, 4, 5) == ((8, 5, 4), (8, 5), (1, 5, 16))
    assert ring_shapes((8, 4, 16), 3, 2, 5)[2] == (1, 5, 16)
    assert ring_shapes((8, 4, 16), 4, 2, 5)[2] == (2, 5, 16)


@pytest.mark.parametrize("golden", ["replayssm_triton_v2_refused", "replayssm_flashinfer_mtp_prefix_caching_refused"])
def test_unsupported_combination_refused_with_vllms_text(golden):
    expected = json.loads((GOLDENS / f"{golden}.expected.json").read_text())["error"]
    assert expected["stage"] == "config"  # vLLM raised in VllmConfig validation, before planning
    with pytest.raises(PlanRefusal) as info:
        plan(load_geometry(_geometry(golden)))
    assert (info.value.message, info.value.kind) == (expected["message"], expected["type"])


def test_cli_refuses_at_start_up():
    out = subprocess.run([sys.executable, "-m", "kvproof", "simulate", str(GOLDENS / "replayssm_triton_v2_refused.json")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1
    assert "Triton ReplaySSM requires Model Runner V1; use --mamba-backend flashinfer or Model Runner V1" in out.stdout


def test_rings_need_the_groups():
    g = _geometry("replayssm_triton_align_rings")
    del g["state_backend"]["n_groups"]
    with pytest.raises(InputError) as info:
        load_geometry(g)
    assert [d.path for d in info.value.diagnostics] == ["$.state_backend.n_groups"]


def test_revision_of_the_pr_decides_by_its_rows():
    g = _geometry("replayssm_flashinfer_mtp_prefix_caching_refused")
    g["state_backend"]["vllm_revision"] = "d9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628"
    assert _mamba(plan(load_geometry(g))).num_speculative_blocks == 0  # native MTP with prefix caching: supported


def test_v1_runner_without_drafts_schedules_asynchronously():
    # config/vllm.py:1651-1719: the V1 runner's async incompatibilities are drafting methods and PP only
    p = plan(load_geometry(_geometry("replayssm_triton_align_rings")))
    assert (p.settings.v2_model_runner, p.settings.async_scheduling) == (False, True)
