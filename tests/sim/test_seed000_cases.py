"""Seed 000's scheduler cases (tests/conformance/requests/seed000_*.json, written by
``seed000_cases.py`` there) against vLLM 0.33.0's answers (the goldens, written by the requests
oracle) and the port: the numbers each case gives, and where they differ from the seed.

The port equals every golden step by step in ``test_request_goldens.py`` (and live against vLLM
in ``tests/conformance/test_requests_parity.py``); here the goldens are read as the seed's claims.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.sim import simulate_document

REQUESTS = Path(__file__).resolve().parents[1] / "conformance" / "requests"
MATRIX = sorted(REQUESTS.glob("seed000_matrix_unit*_depth*.json"))
MATRIX = [p for p in MATRIX if not p.name.endswith(".expected.json")]
TAIL = REQUESTS / "seed000_tail_24_page8_unit2.json"
PAGE = 8


def _expected(path: Path) -> dict:
    return json.loads(path.with_name(path.stem + ".expected.json").read_text())


def _unit_depth(path: Path) -> tuple[int, int]:
    stem = path.stem.removeprefix("seed000_matrix_unit")
    unit, depth = stem.split("_depth")
    return int(unit), int(depth)


def test_the_matrix_is_18_combinations_at_three_depths() -> None:
    combos = {}
    for path in MATRIX:
        unit, depth = _unit_depth(path)
        prompts = {r["prompt_tokens"] for r in json.loads(path.read_text())["simulate"]["requests"] if r["id"].endswith("-first")}
        combos.setdefault(depth, set()).update((unit, p) for p in prompts)
    assert sorted(combos) == [1, 2, 3]
    assert all(len(c) == 18 for c in combos.values())


def _hit(path_or_result, request_id: str) -> int:
    return path_or_result["workload"]["requests"][request_id]["prefix_hit_tokens"]


@pytest.mark.parametrize("path", MATRIX, ids=lambda p: p.stem)
def test_logits_cap_before_the_hash_unit_drop(path: Path) -> None:
    """vLLM 0.33.0 (the golden) and the port: a resend of prompt P resumes at
    ``floor((P - 1) / unit) * unit`` -- the logits cap (``num_tokens - 1``, kv_cache_manager.py
    get_computed_blocks) rounds down to a hash unit before the speculative drop, whose margin
    (one unit, ``eagle_proof_margin``) cannot reach past the prompt's hashes; so an exactly
    aligned prompt (16, 24) misses its tail unit while 17 and 25 resume at the page boundary. The
    extension (P plus 8 tokens) resumes at the same place (its ninth-to-last tokens differ)."""
    unit, _ = _unit_depth(path)
    golden = _expected(path)
    port = simulate_document(json.loads(path.read_text()))
    for request in json.loads(path.read_text())["simulate"]["requests"]:
        p = request["shared_prefix_tokens"]
        want = 0 if request["id"].endswith("-first") else (p - 1) // unit * unit
        assert _hit(golden, request["id"]) == want, (path.stem, request["id"])
        assert _hit(port, request["id"]) == want, (path.stem, request["id"])
    aligned = [p for p in (16, 24) if _hit(golden, f"p{p}-resend") < p - 1]
    assert aligned == [16, 24]  # "some exactly aligned prompts still miss the tail"
    assert golden["workload"]["totals"]["preemptions"] == 0


def test_the_seed_before_after_example_in_vllm_0_33_0() -> None:
    """Seed 000: "a 24-token prompt with 8-token pages and a 2-token hash unit ... now reuses 8".
    vLLM 0.33.0 reuses 22: its Mamba manager caches the prompt tail's state at the last hash unit
    the logits cap leaves (``MambaManager._cache_partial_tail_block``), so the resend resumes on
    one state block and 3 attention pages. The seed's 8 is its pinned revision's page-boundary
    state minus the draft drop (16 - 8): vLLM 0.33.0 wins."""
    golden = _expected(TAIL)
    port = simulate_document(json.loads(TAIL.read_text()))
    for answer in (golden, port):
        assert answer["prefix_hit_probe"]["hit_tokens"] == 22
        assert answer["prefix_hit_probe"]["hit_blocks"] == [1, 3]


def test_the_draft_depth_changes_blocks_not_hits() -> None:
    """Per depth k the Mamba group holds 1 + k more scratch states, so the pool's free blocks
    differ between depths while the hits do not."""
    by_unit: dict[int, dict[int, dict]] = {}
    for path in MATRIX:
        unit, depth = _unit_depth(path)
        by_unit.setdefault(unit, {})[depth] = _expected(path)
    for unit, depths in by_unit.items():
        hits = {d: {k: v["prefix_hit_tokens"] for k, v in g["workload"]["requests"].items()} for d, g in depths.items()}
        assert hits[1] == hits[2] == hits[3]
        free = {d: min(s["free_blocks"] for s in g["workload"]["steps"]) for d, g in depths.items()}
        assert free[1] > free[2] > free[3], (unit, free)
