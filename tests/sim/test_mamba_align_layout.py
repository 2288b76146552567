"""The mamba_align layout (seed 000) against the requests-over-time port: what ``kvproof plan``
says one request holds is what the port of vLLM 0.33.0's managers holds for the example's own
geometry (examples/hybrid-mamba-align: the profile imported from records synthesized from it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.commands.plan import plan
from kvproof.models.documents import load_path
from kvproof.sim import simulate_document

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hybrid-mamba-align"


def _run(tokens: int, chunk: int | None) -> dict:
    geometry = json.loads((EXAMPLE / "geometry.json").read_text())
    geometry["simulate"] = {"prompt_tokens": tokens, "decode_tokens": 12, "prefix_hit_probe": True}
    if chunk:
        geometry["simulate"]["chunk_tokens"] = chunk
    return simulate_document(geometry)


@pytest.mark.parametrize("tokens,chunk", [(24, None), (24, 8), (24, 5), (40, 16), (17, 3)])
def test_plan_pages_are_the_ports_peak(tokens: int, chunk: int | None) -> None:
    profile = load_path(EXAMPLE / "profile.json").obj
    result = _run(tokens, chunk)
    steps = [s for s in result["simulation"] if s["phase"] != "prefix_hit_probe"]
    state, attention = (plan(profile, tokens + len(steps))["groups"][i] for i in (0, 1))
    parts = state["state_pages"]
    # the Mamba group: the working state, the retained checkpoint through turnover and the k
    # speculative scratch states (no prefill checkpoint in this geometry) at the peak, never more
    assert max(s["blocks_held"][0] for s in steps) == state["blocks"] == 2 + parts["speculative_scratch_states"]
    assert parts["prefill_checkpoints"] == 0
    # the attention pages at the end, and the block-table row (nulls included)
    assert steps[-1]["blocks_held"][1] <= attention["blocks"]
    assert max(s["row_length"][0] for s in steps) <= parts["row_length"]
    # the pool: one null page reserved; the lone request's blocks and the free ones are the pool
    plan_pool = plan(profile, None)["pool_blocks"]
    assert all(sum(s["blocks_held"]) + s["free_blocks"] == plan_pool for s in steps)


def test_unmodeled_profiles_have_no_plan(capsys) -> None:
    from kvproof.commands.plan import run

    for name in ("unmodeled-flashinfer-replayssm", "unmodeled-triton-replayssm", "unmodeled-kda-recoverssm"):
        assert run(str(EXAMPLE.parent / name / "profile.json"), None) == 1
        assert "ST028 $.resources.cache_layout: cache_layout unmodeled is for timing queries only" in capsys.readouterr().out


# -- state ownership through preemption, restore, turnover and release (vLLM 0.33.0's goldens) --

REQUESTS = Path(__file__).resolve().parents[1] / "conformance" / "requests"


def _golden(name: str) -> tuple[dict, dict]:
    geometry = json.loads((REQUESTS / f"{name}.json").read_text())
    return geometry, json.loads((REQUESTS / f"{name}.expected.json").read_text())


def _computed_before_preemption(workload: dict, request: str) -> list[int]:
    """Tokens a request had scheduled since its last admission when each preemption took it."""
    done, out = 0, []
    for step in workload["steps"]:
        if request in step["admitted"]:
            done = step["admitted"][request]
        if request in step["preempted"]:
            out.append(done)
            done = 0
        done += step["scheduled"].get(request, 0)
    return out


@pytest.mark.parametrize("name,request_id,resumed_hit", [
    ("mamba_align_preempt_mid_prefill", "b", 56), ("mamba_align_preempt_restore", "d", 24)])
def test_preempted_mid_prefill_resumes_from_its_cached_state(name: str, request_id: str, resumed_hit: int) -> None:
    geometry, golden = _golden(name)
    prompt = next(r["prompt_tokens"] for r in geometry["simulate"]["requests"] if r["id"] == request_id)
    result = simulate_document(geometry)
    assert result["workload"] == golden["workload"]  # the port is vLLM's scheduler here
    workload = result["workload"]
    # preempted twice, each time before its prompt was computed (mid-prefill)
    before = _computed_before_preemption(workload, request_id)
    assert len(before) == workload["requests"][request_id]["num_preemptions"] == 2
    assert all(0 < tokens < prompt for tokens in before)
    # the last admission restores the pages and the Mamba checkpoint it computed before
    admissions = [s["admitted"][request_id] for s in workload["steps"] if request_id in s["admitted"]]
    assert admissions[-1] == resumed_hit and resumed_hit % geometry["block_size"] == 0
    # release: every block but the null block is free once every request finished
    assert workload["steps"][-1]["free_blocks"] == golden["plan"]["num_blocks"] - 1


def test_turned_over_checkpoint_is_not_a_hit() -> None:
    geometry, golden = _golden("mamba_align_shared_prefix_turnover")
    workload = simulate_document(geometry)["workload"]
    assert workload == golden["workload"]
    hits = {r: workload["requests"][r]["prefix_hit_tokens"] for r in ("a", "d", "e")}
    # a's state at page 32 was replaced by its next checkpoint (align keeps the last one): d, which
    # shares 40 tokens with a, finds no state to resume from; e restores d's 32-token checkpoint
    assert hits == {"a": 0, "d": 0, "e": 32}
    assert workload["steps"][-1]["free_blocks"] == golden["plan"]["num_blocks"] - 1
