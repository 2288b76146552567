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
