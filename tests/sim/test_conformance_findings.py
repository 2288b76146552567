"""Findings of the vLLM conformance campaign (docs/conformance.md "Findings so far"), one test each.

Each has a golden geometry under ``tests/conformance/geometries/`` whose expected answer is vLLM
0.33.0's own; these tests pin the simulator's side without vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvproof.sim import simulate_document

from sim_helpers import full_attention, geometry

GOLDEN = Path(__file__).resolve().parents[1] / "conformance" / "geometries"


def _golden(name: str) -> tuple[dict, dict]:
    return (json.loads((GOLDEN / f"{name}.json").read_text()),
            json.loads((GOLDEN / f"{name}.expected.json").read_text()))


def test_views_refusal_comes_before_the_coordinators() -> None:
    # initialize_from_config (v1/engine/core.py:372) binds the worker views inside
    # _initialize_kv_caches, before EngineCore.__init__ builds the scheduler (core.py:162-188).
    doc, expected = _golden("views_refusal_before_retention")
    out = simulate_document(doc)
    assert out["status"] == "refused"
    assert out["error"]["message"] == expected["error"]["message"] == "No common block size for 16 (attn: [MultipleOf(32)])."
    # Without views, the coordinator's retention refusal is what remains.
    del doc["views"]
    assert simulate_document(doc)["error"]["message"].startswith("prefix_cache_retention_interval is set but")


def test_suffix_drafting_runs_on_the_v1_runner() -> None:
    # config/vllm.py:3066-3068 (V2 unsupported), 1651-1666 + 1685-1719 (async off by default with PP on V1),
    # 588-609 (in-flight batches = pp = 2).
    doc, expected = _golden("suffix_pp2_v1_runner")
    out = simulate_document(doc)
    assert out["max_in_flight_tokens"] == expected["max_in_flight_tokens"] == 2 * 2048
    assert out["per_group_blocks_per_request"] == expected["per_group_blocks_per_request"]


def test_explicit_async_scheduling_with_suffix_drafting_is_refused() -> None:
    # config/vllm.py:1675-1680
    doc = geometry(full_attention(count=2), speculative={"method": "suffix"}, async_scheduling=True)
    out = simulate_document(doc)
    assert out["status"] == "refused"
    assert out["error"]["message"] == (
        "Async scheduling is not supported by the V1 model runner with suffix-based speculative decoding.")
    doc["async_scheduling"] = False
    assert simulate_document(doc)["max_in_flight_tokens"] == 8192


def test_views_ignore_the_block_override() -> None:
    # Stand-in 8: the views are built on views.num_blocks blocks; the override sizes the real pool only.
    doc, expected = _golden("views_with_override")
    out = simulate_document(doc)
    assert out["num_blocks"] == expected["num_blocks"] == 100000
    assert [v["shape"] for v in out["worker_views"]] == [v["shape"] for v in expected["worker_views"]] == [[12, 8, 16, 256]]
