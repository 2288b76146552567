"""The ``simulate`` block through ``simulate_document`` and ``kvproof simulate`` (docs/requests.md):
loading rules, the scheduler settings taken from the geometry, the refusal of a long-prefill
threshold above max_model_len, and the text rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.sim import simulate_document

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "geometries" / "plain-32-requests.json"


def _geometry(**simulate) -> dict:
    doc = json.loads(EXAMPLE.read_text())
    doc["simulate"] = simulate
    return doc


def _requests(n: int, prompt: int = 300, decode: int = 5) -> list[dict]:
    return [{"id": f"q{i}", "prompt_tokens": prompt, "decode_tokens": decode} for i in range(n)]


def test_max_num_seqs_of_the_geometry_caps_the_running_set() -> None:
    doc = _geometry(requests=_requests(10))
    doc["max_num_seqs"] = 3
    workload = simulate_document(doc)["workload"]
    assert max(len(step["running"]) for step in workload["steps"]) == 3
    assert workload["totals"]["finished"] == 10


def test_chunk_tokens_alone_is_the_long_prefill_threshold() -> None:
    doc = _geometry(chunk_tokens=100, requests=_requests(2))
    result = simulate_document(doc)
    assert result["status"] == "ok" and "simulation" not in result
    first = result["workload"]["steps"][0]["scheduled"]
    assert first == {"q0": 100, "q1": 100}  # two eligible requests: the threshold applies to both


def test_a_threshold_above_max_model_len_is_vllms_start_up_refusal(tmp_path, capsys) -> None:
    doc = _geometry(chunk_tokens=8193, requests=_requests(1))
    workload = simulate_document(doc)["workload"]
    assert workload == {"refused": {
        "type": "ValueError",
        "message": "long_prefill_token_threshold (8193) cannot be greater than the max_model_len (8192).",
        "source": "config/scheduler.py:355-360",
    }}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", str(path)]) == 1
    assert "cannot be greater than the max_model_len (8192)" in capsys.readouterr().out


def test_the_threshold_is_checked_against_the_length_before_auto_fit() -> None:
    """vLLM checks long_prefill_token_threshold once, when SchedulerConfig is built with the length
    before auto-fit (config/scheduler.py:315, 355-360); the fit (kv_cache_planning.py:1545-1548) comes
    later. A threshold above the fitted length is served (golden: tests/conformance/requests/
    autofit_threshold_above_fitted_len), one above the length before fitting is refused."""
    golden = Path(__file__).resolve().parents[1] / "conformance" / "requests"
    doc = json.loads((golden / "autofit_threshold_above_fitted_len.json").read_text())
    result = simulate_document(doc)
    assert result["max_model_len"] == 1008 < doc["simulate"]["chunk_tokens"] == 2048
    assert result["workload"]["totals"]["finished"] == 1
    doc["simulate"]["chunk_tokens"] = 4097
    assert simulate_document(doc)["workload"]["refused"]["message"] == (
        "long_prefill_token_threshold (4097) cannot be greater than the max_model_len (4096).")


@pytest.mark.parametrize(
    ("simulate", "path", "message"),
    [
        ({"decode_tokens": 3}, "$.simulate.decode_tokens", "the single request needs prompt_tokens"),
        ({"prompt_tokens": 100, "chunk_tokens": 1, "decode_tokens": 200_000}, "$.simulate.prompt_tokens",
         "the single request takes 200,099 steps, more than max_steps (100,000)"),
        ({"requests": [{"id": "a", "prompt_tokens": 5, "decode_tokens": 1, "shared_prefix_tokens": 2}]},
         "$.simulate.requests[0].shared_prefix_tokens", "shared_prefix_tokens needs a shared_prefix name"),
        ({"requests": [{"id": "a", "prompt_tokens": 5, "decode_tokens": 0}]},
         "$.simulate.requests[0].decode_tokens", None),
    ],
)
def test_bad_simulate_blocks_are_diagnosed_at_their_path(simulate, path, message) -> None:
    result = simulate_document(_geometry(**simulate))
    assert result["status"] == "bad_input"
    found = [d for d in result["diagnostics"] if d["path"] == path]
    assert found, result["diagnostics"]
    if message is not None:
        assert found[0]["message"] == message


def test_the_text_rendering_names_the_probe_and_the_workload(capsys) -> None:
    assert main(["simulate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "prefix-hit probe: 992 of 1,000 prompt tokens hit (blocks [62])" in out
    assert "Workload: 12 requests" in out and "preemptions" in out


def _tiny(**changes) -> dict:
    doc = {"name": "tiny", "layers": [{"name": "model.layers.{i}.self_attn.attn", "range": [0, 2],
                                       "spec": "FullAttentionSpec", "num_kv_heads": 1, "head_size": 64,
                                       "dtype": "bfloat16"}],
           "max_model_len": 512, "num_gpu_blocks_override": 64, "max_num_batched_tokens": 4,
           "max_num_seqs": 1, "simulate": {"prompt_tokens": 6, "decode_tokens": 2}}
    doc.update(changes)
    return doc


def test_chunked_prefill_splits_a_prompt_over_the_token_budget() -> None:
    steps = simulate_document(_tiny())["simulation"]
    assert [(s["phase"], s["num_new_tokens"]) for s in steps] == [("prefill", 4), ("prefill", 2), ("decode", 1)]


def test_non_causal_layers_turn_chunked_prefill_off_so_a_long_prompt_never_fits_the_budget() -> None:
    """EngineCore disables chunked prefill for non-causal layers (v1/engine/core.py:266-280): a
    6-token prompt under a 4-token budget is never scheduled (vLLM's own answer: no step)."""
    doc = _tiny()
    doc["layers"][0]["non_causal"] = True
    result = simulate_document(doc)
    assert result["simulation"] == [] and result["simulation_stalled"] is True


def test_vllms_own_raise_while_serving_is_reported_not_a_traceback(tmp_path, capsys) -> None:
    """Cross attention with prefix caching on: vLLM's CrossAttentionManager raises on the first
    lookup (v1/core/single_type_kv_cache_manager.py:2138-2196); the oracle sees the same raise."""
    doc = _tiny(enable_prefix_caching=True, num_gpu_blocks_override=256)
    doc["layers"].append({"name": "model.layers.{i}.encoder_attn.attn", "index": 2, "spec": "CrossAttentionSpec",
                          "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"})
    result = simulate_document(doc)
    assert result["simulation"] is None
    assert result["simulation_raised"]["type"] == "NotImplementedError"
    assert result["simulation_raised"]["message"] == "CrossAttentionManager does not support caching"
    path = tmp_path / "cross.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "raises NotImplementedError while serving it" in out and "Traceback" not in out


def test_a_single_request_past_max_steps_is_truncated_not_stalled() -> None:
    """The loader counts steps with chunk_tokens; a smaller token budget takes more of them."""
    doc = _tiny(max_num_batched_tokens=2)
    doc["simulate"] = {"prompt_tokens": 8, "chunk_tokens": 8, "decode_tokens": 1, "max_steps": 3,
                       "prefix_hit_probe": True}
    result = simulate_document(doc)
    assert [s["num_new_tokens"] for s in result["simulation"]] == [2, 2, 2]
    assert result["simulation_truncated"] is True and "simulation_stalled" not in result
    assert result["prefix_hit_probe"] is None
