"""Decode runs (``kvproof/sim/requests/decode_runs.py``, ``docs/requests.md`` "Decode runs") against the
step-by-step path (``kvproof.sim.requests.scheduler.step_by_step``: every step scheduled alone, every
``allocate_slots`` call made, as vLLM does).

* the two paths give the same ``simulation`` / ``workload`` outputs, step for step, on every request
  golden, on the bench's workloads (scaled down) and on Hypothesis geometries and workloads
  (``kvproof.fuzz.strategies.geometries_with_requests``), and the runs do carry most of the steps of a
  decode-heavy workload;
* the claim the runs rest on, checked directly on the step-by-step path: every ``allocate_slots``
  call that ``KVCacheManager.decode_quiet_steps`` predicted to be a no-op leaves the pool and the
  request's manager state exactly as they were;
* the closed-form inverses the predictions use, against the functions they invert.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from kvproof.fuzz.strategies import geometries_with_requests
from kvproof.models.geometry import load_geometry
from kvproof.sim import plan, simulate_document
from kvproof.sim.requests import scheduler as scheduler_module
from kvproof.sim.requests.decode_runs import DecodeRuns
from kvproof.sim.requests.kv_manager import HybridKVCacheCoordinator, KVCacheCoordinator, KVCacheManager
from kvproof.sim.requests.block_pool import BlockPool
from kvproof.sim.requests.managers import (
    ChunkedLocalAttentionManager,
    FullAttentionManager,
    SlidingWindowManager,
)
from kvproof.sim.startup.specs import ChunkedLocalAttentionSpec, SlidingWindowSpec
from kvproof.sim.requests.mamba_manager import MambaManager
from kvproof.sim.requests.request import RequestStatus
from kvproof.sim.requests.scheduler import simulate_workload, step_by_step

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted(p for p in (ROOT / "tests" / "conformance" / "requests").glob("*.json")
                if not p.name.endswith(".expected.json"))
#: Hypothesis examples per generated test (``KVPROOF_DECODE_RUNS_EXAMPLES``; a campaign: thousands).
EXAMPLES = int(os.environ.get("KVPROOF_DECODE_RUNS_EXAMPLES", "30"))
KEYS = ("status", "simulation", "prefix_hit_probe", "workload", "simulation_stalled", "simulation_rejected",
        "simulation_truncated", "simulation_raised")


class _Advanced:
    """Counts the steps the decode runs advance (``DecodeRuns.advance``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps = 0
        real = DecodeRuns.advance

        def advance(runs, *args, **kwargs):
            advanced = real(runs, *args, **kwargs)
            self.steps += advanced
            return advanced

        monkeypatch.setattr(DecodeRuns, "advance", advance)


def _both(doc: dict) -> tuple[dict, dict]:
    """``simulate_document`` with decode runs and step by step (private copies of ``doc``)."""
    fast = simulate_document(json.loads(json.dumps(doc)))
    with step_by_step():
        slow = simulate_document(json.loads(json.dumps(doc)))
    return fast, slow


def _assert_same(doc: dict, fast: dict, slow: dict) -> None:
    for key in KEYS:
        assert fast.get(key) == slow.get(key), f"{key} differs with decode runs: {json.dumps(doc)[:3000]}"
    assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)


def _bench_like(n: int, geometry: str, **settings_) -> dict:
    """The bench's workload (bench/bench_requests.py) with ``n`` requests."""
    doc = json.loads((ROOT / "examples" / "geometries" / geometry).read_text())
    doc.update({"max_num_seqs": 32, "max_num_batched_tokens": 2048, "enable_prefix_caching": True})
    doc.update(settings_)
    requests = []
    for r in range(n):
        request = {"id": f"r{r}", "arrival_step": r * 3, "prompt_tokens": 1024 + (r * 617) % 1977,
                   "decode_tokens": 64 + (r * 97) % 193}
        if r % 2 == 0:
            request.update(shared_prefix=f"system-{r % 8 // 2}", shared_prefix_tokens=1024)
        requests.append(request)
    doc["simulate"] = {"requests": requests, "max_steps": 100_000}
    return doc


# --- the two paths agree -----------------------------------------------------------------------------

@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_step_for_step(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.loads(path.read_text())
    fast, slow = _both(doc)
    _assert_same(doc, fast, slow)


def test_goldens_exercise_decode_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: runs advance a good part of the goldens' busy steps (steps that schedule something)."""
    advanced = _Advanced(monkeypatch)
    busy = 0
    for path in GOLDEN:
        doc = json.loads(path.read_text())
        workload = simulate_document(doc).get("workload") or {}
        busy += sum(1 for step in workload.get("steps") or () if step["scheduled"])
    assert busy and advanced.steps >= busy // 3, (advanced.steps, busy)


@pytest.mark.parametrize(("geometry", "settings_"), [
    ("plain-32-full-attention.json", {}),
    ("plain-32-full-attention.json", {"num_gpu_blocks_override": 600}),  # preemptions, evictions
    ("bamba-like-align.json", {}),  # Mamba align + full attention
    ("gemma-like-sliding-window.json", {}),  # sliding-window frees as the window moves
], ids=["full", "full-preempting", "mamba-hybrid", "sliding-window"])
def test_bench_workloads_step_for_step(geometry: str, settings_: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _bench_like(12, geometry, **settings_)
    advanced = _Advanced(monkeypatch)
    fast, slow = _both(doc)
    _assert_same(doc, fast, slow)
    assert fast["status"] == "ok", fast.get("error")
    steps = fast["workload"]["totals"]["steps"]
    assert advanced.steps >= steps * 3 // 4, f"decode runs advanced {advanced.steps} of {steps} steps"
    if "num_gpu_blocks_override" in settings_:
        assert fast["workload"]["totals"]["preemptions"] > 0


def test_single_request_step_for_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The single request (``simulate_request``): its decode steps skip the no-op ``allocate_slots``
    calls, and list the same steps (sliding window: the frees as the window moves)."""
    doc = json.loads((ROOT / "examples" / "geometries" / "gemma-like-sliding-window.json").read_text())
    doc["simulate"] = {"prompt_tokens": 3_000, "chunk_tokens": 512, "decode_tokens": 700, "prefix_hit_probe": True}
    calls = []
    real = KVCacheManager.allocate_slots
    monkeypatch.setattr(KVCacheManager, "allocate_slots", lambda *a, **k: calls.append(1) or real(*a, **k))
    fast = simulate_document(json.loads(json.dumps(doc)))
    fast_calls = len(calls)
    with step_by_step():
        slow = simulate_document(json.loads(json.dumps(doc)))
    _assert_same(doc, fast, slow)
    assert len(fast["simulation"]) == 6 + 699 + 1  # 6 chunks (the last samples), 699 decodes, the probe
    assert len(calls) - fast_calls == 6 + 699 and fast_calls < (6 + 699) // 4


#: Found by test_quiet_predictions_hold_on_generated: a decode event frees a sliding-window block
#: (r1 at 1,759 tokens, window 128, 48-token blocks) in the step where the waiting head's admission
#: first fits; the run must decide on the WAITING loop after the RUNNING loop's events.
WINDOW_FREE_ADMITS = {
    "name": "hypothesis:sliding_window",
    "layers": [{"name": "model.layers.{i}.self_attn.attn", "indices": [0, 2], "spec": "SlidingWindowSpec",
                "num_kv_heads": 8, "head_size": 64, "dtype": "bfloat16", "head_size_v": 64, "sliding_window": 128},
               {"name": "model.layers.{i}.self_attn.attn", "index": 1, "spec": "FullAttentionSpec",
                "num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}],
    "block_size": 48, "max_model_len": 2048, "enable_prefix_caching": True, "num_gpu_blocks_override": 95,
    "prefix_match_unit": 48, "max_num_batched_tokens": 2048, "layer_order": "as_listed",
    "original_max_model_len": -1,
    "views": {"num_blocks": 1, "backends": [{"match": "attn", "kernel_block_sizes": [{"MultipleOf": 1}]}]},
    "simulate": {"max_steps": 3000, "chunk_tokens": 16, "requests": [
        {"id": "r0", "arrival_step": 1, "prompt_tokens": 1825, "decode_tokens": 1},
        {"id": "r1", "arrival_step": 0, "prompt_tokens": 1757, "decode_tokens": 4},
        {"id": "r2", "arrival_step": 1, "prompt_tokens": 1227, "decode_tokens": 1}]},
}


def test_window_free_before_the_waiting_loop() -> None:
    fast, slow = _both(WINDOW_FREE_ADMITS)
    _assert_same(WINDOW_FREE_ADMITS, fast, slow)
    assert fast["workload"]["steps"][3]["admitted"] == {"r0": 0, "r2": 0}


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(geometries_with_requests())
def test_generated_step_for_step(doc: dict) -> None:
    fast, slow = _both(doc)
    _assert_same(doc, fast, slow)


# --- the claim: a predicted quiet step is a no-op ------------------------------------------------------

def _fingerprint(manager: KVCacheManager, request_id: str) -> tuple:
    """What a decode step's ``allocate_slots`` could change: the pool's counts and the request's rows,
    counters and per-manager records, with each held block's hash and reference count."""
    pool = manager.block_pool
    groups = []
    for m in manager.coordinator.single_type_managers:
        row = m.req_to_blocks.get(request_id, [])
        groups.append((
            tuple((b.block_id, b.ref_cnt, b.block_hash, b.block_hash_num_tokens) for b in row),
            m.num_cached_block.get(request_id), request_id in m._partial_hit_reqs, len(m.new_block_ids),
            len(m._pending_cow_copies), len(m._pending_boundary_state_offloads),
            getattr(m, "last_state_block_idx", {}).get(request_id),
            getattr(m, "_num_retired_blocks", {}).get(request_id),
            request_id in getattr(m, "_allocated_block_reqs", ()),
            getattr(m, "_checkpoints", {}).get(request_id),
            len(getattr(m, "cached_blocks_this_step", ())),
        ))
    return (pool.get_num_free_blocks(), len(pool.cached_block_hash_to_block), len(pool.cached_block_hashes_by_block),
            tuple(groups))


class _QuietChecker:
    """Wraps ``allocate_slots`` on the step-by-step path: after every call on a running decode it
    predicts how many of the request's next decode steps are no-ops, and checks every later call
    inside the prediction against the state fingerprint."""

    def __init__(self, manager: KVCacheManager) -> None:
        self.manager = manager
        self.until: dict[str, int] = {}
        self.checked = 0
        real = manager.allocate_slots

        def allocate_slots(request, num_new_tokens, *args, **kwargs):
            rid = request.request_id
            c = request.num_computed_tokens
            decoding = (num_new_tokens == 1 and not args and set(kwargs) <= {"num_lookahead_tokens"}
                        and not kwargs.get("num_lookahead_tokens") and request.status == RequestStatus.RUNNING
                        and request.num_output_tokens and c == request.num_tokens - 1)
            inside = decoding and self.until.get(rid, -1) > c
            before = _fingerprint(manager, rid) if inside else None
            result = real(request, num_new_tokens, *args, **kwargs)
            if inside:
                assert result is not None and _fingerprint(manager, rid) == before, (
                    f"{rid}: the decode step at {c} was predicted to be a no-op (until {self.until[rid]})")
                self.checked += 1
            elif decoding and result is not None:
                self.until[rid] = c + 1 + manager.decode_quiet_steps(request, c + 1)
            else:
                self.until.pop(rid, None)
            return result

        manager.allocate_slots = allocate_slots


def _check_quiet_claim(doc: dict) -> int:
    """Runs the workload of ``doc`` step by step under :class:`_QuietChecker`; the calls checked."""
    served = simulate_document(copy.deepcopy(doc))
    if served["status"] != "ok" or "steps" not in (served.get("workload") or {}):
        return 0  # refused, bad input, no workload, or one vLLM does not serve
    geometry = load_geometry(copy.deepcopy(doc))
    the_plan = plan(geometry)
    manager = KVCacheManager.from_plan(the_plan)
    if not manager.supports_decode_runs:
        return 0
    checker = _QuietChecker(manager)
    with step_by_step():
        assert simulate_workload(the_plan, geometry.simulate, kv_cache_manager=manager) == served["workload"]
    return checker.checked


@pytest.mark.parametrize("geometry", ["plain-32-full-attention.json", "bamba-like-align.json",
                                      "gemma-like-sliding-window.json"])
def test_quiet_predictions_hold_on_bench_workloads(geometry: str) -> None:
    assert _check_quiet_claim(_bench_like(10, geometry)) > 500


def test_quiet_predictions_hold_on_goldens() -> None:
    checked = sum(_check_quiet_claim(json.loads(path.read_text())) for path in GOLDEN)
    assert checked > 100


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(geometries_with_requests())
def test_quiet_predictions_hold_on_generated(doc: dict) -> None:
    _check_quiet_claim(doc)


# --- the closed-form inverses --------------------------------------------------------------------------

def _managers(doc_name: str, **settings_) -> KVCacheManager:
    doc = json.loads((ROOT / "examples" / "geometries" / doc_name).read_text())
    doc.update(settings_)
    return KVCacheManager.from_plan(plan(load_geometry(doc)))


def _spec_managers() -> list:
    """Sliding-window and chunked-local managers of several shapes, and the example plans' managers."""
    pool = BlockPool(1_000, True, 16)
    common = {"num_kv_heads": 1, "head_size": 64, "dtype": "bfloat16"}
    out = []
    for block_size in (16, 32):
        for window in (1, 7, 16, 100, 4096):
            for extra in (0, 5):
                out.append(SlidingWindowManager(
                    SlidingWindowSpec(block_size=block_size, sliding_window=window, extra_retained_tokens=extra, **common),
                    block_pool=pool, enable_caching=True, kv_cache_group_id=0, scheduler_block_size=block_size))
        for chunk in (16, 24, 96, 256):
            out.append(ChunkedLocalAttentionManager(
                ChunkedLocalAttentionSpec(block_size=block_size, attention_chunk_size=chunk, **common),
                block_pool=pool, enable_caching=True, kv_cache_group_id=0, scheduler_block_size=block_size))
    for doc_name in ("gemma-like-sliding-window.json", "bamba-like-align.json", "bamba-like-none.json",
                     "plain-32-full-attention.json"):
        out.extend(_managers(doc_name).coordinator.single_type_managers)
    return out


def test_min_computed_skipping_inverts_get_num_skipped_tokens() -> None:
    kinds = set()
    for m in _spec_managers():
        kinds.add(type(m))
        for target in range(1, 3 * m.block_size + 300):
            least = m.min_computed_skipping(target)
            if least is None:
                assert all(m.get_num_skipped_tokens(c) < target for c in range(0, 4 * target + 200))
            else:
                assert m.get_num_skipped_tokens(least) >= target
                assert least == 0 or m.get_num_skipped_tokens(least - 1) < target
    assert kinds == {SlidingWindowManager, ChunkedLocalAttentionManager, MambaManager, FullAttentionManager}


def test_inverses_cover_the_modelled_managers() -> None:
    """Every manager class that claims decode runs is one the inverse test above reaches."""
    modelled = {FullAttentionManager, SlidingWindowManager, ChunkedLocalAttentionManager, MambaManager}
    for cls in modelled:
        assert cls.supports_decode_runs


@pytest.mark.parametrize("settings_", [{}, {"enable_prefix_caching": True}])
@pytest.mark.parametrize("doc_name", ["gemma-like-sliding-window.json", "bamba-like-align.json",
                                      "plain-32-full-attention.json"])
def test_min_tokens_cacheable_inverts_get_num_cacheable_tokens(doc_name: str, settings_: dict) -> None:
    coordinator = _managers(doc_name, **settings_).coordinator
    assert isinstance(coordinator, KVCacheCoordinator)
    for gid in range(len(coordinator.single_type_managers)):
        for target in range(1, 3 * coordinator.scheduler_block_size + 40):
            least = coordinator.min_tokens_cacheable(target, gid)
            assert coordinator.get_num_cacheable_tokens(least, gid) >= target
            assert coordinator.get_num_cacheable_tokens(least - 1, gid) < target


def test_hybrid_partial_hits_inverse() -> None:
    """The partial-hash-hit branch of the hybrid inverse (no geometry example needs it)."""
    coordinator = _managers("bamba-like-align.json", enable_prefix_caching=True).coordinator
    assert isinstance(coordinator, HybridKVCacheCoordinator)
    coordinator.enable_partial_hash_hits = True
    try:
        for target in range(1, 200):
            least = coordinator.min_tokens_cacheable(target, 0)
            assert coordinator.get_num_cacheable_tokens(least, 0) >= target > coordinator.get_num_cacheable_tokens(least - 1, 0)
    finally:
        coordinator.enable_partial_hash_hits = False


def test_step_by_step_restores_the_default() -> None:
    assert scheduler_module._decode_runs_default is True
    with step_by_step():
        assert scheduler_module._decode_runs_default is False
    assert scheduler_module._decode_runs_default is True


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
