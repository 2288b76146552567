"""The scheduler port (``kvproof/sim/requests/scheduler.py``) on hand-checkable workloads.

Two back ends: a small local full-attention manager (``FakeManager``, vLLM's accounting for one
full-attention group: ``cdiv(tokens, block_size)`` blocks, whole-block hits capped at
``num_tokens - 1``, LRU eviction, tail-first frees) and the real ``KVCacheManager.from_plan`` on a
planned geometry (which must agree with the fake on one full-attention group).

The expected numbers are hand-derived (see each test) and were checked against vLLM 0.33.0's own
``Scheduler`` + ``KVCacheManager`` driven on the CPU with the same workloads (a single
``FullAttentionSpec`` group of the same size): every step's ``scheduled``, ``preempted``,
``finished``, ``running``, ``waiting`` and ``free_blocks`` agree. ``test_workload_goldens_of_vllm``
compares with the stored answers of ``tests/conformance/oracle_requests.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvproof.sim.requests.scheduler import (
    RequestStatus,
    SchedulerConfig,
    output_token_id,
    simulate_workload,
    workload_token_ids,
)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# A local fake of vLLM's Request and KVCacheManager (one full-attention group)
# ---------------------------------------------------------------------------------------------


class FakeRequest:
    def __init__(self, request_id, prompt_token_ids, max_tokens):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self._all_token_ids = list(prompt_token_ids)
        self._output_token_ids = []
        self.num_prompt_tokens = len(prompt_token_ids)
        self.max_tokens = max_tokens
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_in_flight_tokens = 0
        self.num_preemptions = 0
        self.spec_token_ids = []
        self.is_prefill_chunk = False
        self.shared_prefix_boundary = 0

    @property
    def num_tokens(self):
        return len(self._all_token_ids)

    @property
    def num_output_tokens(self):
        return len(self._output_token_ids)

    def append_output_token_ids(self, token_id):
        self._output_token_ids.append(token_id)
        self._all_token_ids.append(token_id)


class FakePool:
    def __init__(self, num_blocks):
        self.free = list(range(1, num_blocks))  # block 0 is the null block
        self.ref = {}
        self.hash_of = {}
        self.cached = {}

    def get_num_free_blocks(self):
        return len(self.free)

    def free_blocks(self, blocks):
        for b in blocks:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.free.append(b)


class FakeManager:
    """vLLM's accounting for a single full-attention group, no speculative decoding."""

    def __init__(self, num_blocks, block_size, max_model_len, enable_caching=True):
        self.block_pool = FakePool(num_blocks)
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.req_blocks = {}
        self.num_cached = {}
        self.empty_kv_cache_blocks = []
        self.calls = []

    def _hash(self, request, i):
        return tuple(request._all_token_ids[: (i + 1) * self.block_size])

    def get_computed_blocks(self, request):
        if not self.enable_caching:
            return [], 0, 0
        blocks = []
        for i in range((request.num_tokens - 1) // self.block_size):
            b = self.block_pool.cached.get(self._hash(request, i))
            if b is None:
                break
            blocks.append(b)
        return blocks, len(blocks) * self.block_size, 0

    def _need(self, request, num_tokens, new_computed):
        pool = self.block_pool
        held = len(self.req_blocks.get(request.request_id, []))
        evictable = sum(1 for b in new_computed if pool.ref.get(b, 0) == 0)
        return max(cdiv(num_tokens, self.block_size) - held - len(new_computed), 0) + evictable

    def allocate_slots(self, request, num_new_tokens, num_new_computed_tokens=0, new_computed_blocks=None,
                       num_lookahead_tokens=0, full_sequence_must_fit=False, has_scheduled_reqs=True):
        self.calls.append((request.request_id, num_new_tokens, num_new_computed_tokens, full_sequence_must_fit))
        pool = self.block_pool
        new_computed = list(new_computed_blocks or [])
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            if self._need(request, full, new_computed) > pool.get_num_free_blocks():
                return None
        computed = request.num_computed_tokens + num_new_computed_tokens
        need_slot = min(computed + num_new_tokens + num_lookahead_tokens, self.max_model_len)
        n = self._need(request, need_slot, new_computed)
        if n > pool.get_num_free_blocks():
            return None
        blocks = self.req_blocks.setdefault(request.request_id, [])
        for b in new_computed:  # touch
            if pool.ref.get(b, 0) == 0:
                pool.free.remove(b)
            pool.ref[b] = pool.ref.get(b, 0) + 1
        blocks.extend(new_computed)
        self.num_cached.setdefault(request.request_id, len(blocks))
        new = []
        while len(blocks) < cdiv(need_slot, self.block_size):
            b = pool.free.pop(0)
            old = pool.hash_of.pop(b, None)
            if old is not None and pool.cached.get(old) == b:
                del pool.cached[old]
            pool.ref[b] = 1
            blocks.append(b)
            new.append(b)
        self.cache_blocks(request, min(computed + num_new_tokens, request.num_tokens))
        return new

    def cache_blocks(self, request, num_tokens):
        if not self.enable_caching:
            return
        pool = self.block_pool
        blocks = self.req_blocks[request.request_id]
        start = self.num_cached.get(request.request_id, 0)
        full = num_tokens // self.block_size
        for i in range(start, full):
            h = self._hash(request, i)
            if h not in pool.cached:
                pool.cached[h] = blocks[i]
                pool.hash_of[blocks[i]] = h
        self.num_cached[request.request_id] = max(start, full)

    def free(self, request):
        blocks = self.req_blocks.pop(request.request_id, [])
        self.num_cached.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(blocks))


def fake_run(requests, *, num_blocks, block_size=16, max_model_len=4096, max_num_seqs=64,
             max_num_batched_tokens=2048, chunk_tokens=None, max_steps=None, enable_caching=True, **cfg):
    manager = FakeManager(num_blocks, block_size, max_model_len, enable_caching)
    config = SchedulerConfig(
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
        block_size=block_size, hash_block_size=block_size, cache_block_size=block_size,
        long_prefill_token_threshold=chunk_tokens or 0, **cfg,
    )
    block = {"requests": requests}
    if max_steps is not None:
        block["max_steps"] = max_steps
    out = simulate_workload(None, block, kv_cache_manager=manager, request_factory=FakeRequest, config=config)
    return out, manager


def req(id, prompt, decode, arrival=0, **kw):
    return {"id": id, "prompt_tokens": prompt, "decode_tokens": decode, "arrival_step": arrival, **kw}


# ---------------------------------------------------------------------------------------------
# Token ids (docs/requests.md)
# ---------------------------------------------------------------------------------------------


def test_token_ids_follow_the_contract():
    ids = workload_token_ids([
        req("a", 5, 1, shared_prefix="sys", shared_prefix_tokens=3),
        req("b", 4, 1),
        SimpleNamespace(id="c", prompt_tokens=4, decode_tokens=1, shared_prefix="sys", shared_prefix_tokens=2),
        req("d", 2, 1, shared_prefix="other", shared_prefix_tokens=2),
    ])
    assert ids[0] == [10_000_000, 10_000_001, 10_000_002, 10_000_000 * 1000 + 3, 10_000_000 * 1000 + 4]
    assert ids[1] == [10_000_000 * 1001 + i for i in range(4)]
    assert ids[2] == [10_000_000, 10_000_001, 10_000_000 * 1002 + 2, 10_000_000 * 1002 + 3]
    assert ids[3] == [20_000_000, 20_000_001]
    assert output_token_id(2, 7) == 1_002_000_007


# ---------------------------------------------------------------------------------------------
# Fake-manager cases
# ---------------------------------------------------------------------------------------------


def test_single_request_prefill_then_decodes():
    out, _ = fake_run([req("a", 40, 3)], num_blocks=100)
    steps = out["steps"]
    assert [s["scheduled"] for s in steps] == [{"a": 40}, {"a": 1}, {"a": 1}]
    assert steps[0]["admitted"] == {"a": 0}
    assert [s["finished"] for s in steps] == [[], [], ["a"]]
    # 99 usable blocks; 40 tokens + 1 slot for nothing: cdiv(40, 16) = 3 held after step 0,
    # step 1 computes token 40 (41 tokens: 3 blocks), step 2 token 41 (3 blocks), then freed.
    assert [s["free_blocks"] for s in steps] == [96, 96, 99]
    assert out["requests"]["a"] == {"first_scheduled_step": 0, "finished_step": 2, "num_preemptions": 0,
                                    "prefix_hit_tokens": 0}
    assert out["totals"] == {"steps": 3, "request_steps": 3, "preemptions": 0, "finished": 1}
    assert out["truncated"] is False


def test_chunked_prefill_splits_under_the_token_budget():
    # Budget 64: a takes 64 of its 100 prompt tokens, b nothing; then a's 36 + b's 28.
    out, _ = fake_run([req("a", 100, 2), req("b", 50, 1)], num_blocks=100, max_num_batched_tokens=64)
    s = [x["scheduled"] for x in out["steps"]]
    assert s[0] == {"a": 64}
    assert s[1] == {"a": 36, "b": 28}
    assert s[2] == {"a": 1, "b": 22}
    assert out["steps"][2]["finished"] == ["a", "b"]
    assert out["totals"]["request_steps"] == 5


def test_long_prefill_threshold_caps_chunks_only_with_company():
    alone, _ = fake_run([req("a", 100, 1)], num_blocks=100, chunk_tokens=30)
    assert [x["scheduled"] for x in alone["steps"]] == [{"a": 100}]  # one eligible request: no cap
    both, _ = fake_run([req("a", 100, 1), req("b", 10, 3)], num_blocks=100, chunk_tokens=30)
    # b finishes in step 2; a alone in step 3 takes its whole remainder.
    assert [x["scheduled"] for x in both["steps"]] == [{"a": 30, "b": 10}, {"a": 30, "b": 1},
                                                      {"a": 30, "b": 1}, {"a": 10}]


def test_adaptive_threshold_floors_at_a_fair_share():
    out, _ = fake_run([req("a", 200, 1), req("b", 200, 1)], num_blocks=100, chunk_tokens=30,
                      max_num_batched_tokens=256, long_prefill_token_threshold_adaptive=True)
    assert out["steps"][0]["scheduled"] == {"a": 128, "b": 128}


def test_max_num_seqs_caps_admission():
    out, _ = fake_run([req(x, 16, 2) for x in "abc"], num_blocks=100, max_num_seqs=2)
    steps = out["steps"]
    assert steps[0]["scheduled"] == {"a": 16, "b": 16}
    assert steps[0]["running"] == ["a", "b"] and steps[0]["waiting"] == ["c"]
    assert steps[1]["scheduled"] == {"a": 1, "b": 1} and steps[1]["finished"] == ["a", "b"]
    assert steps[2]["scheduled"] == {"c": 16} and steps[2]["admitted"] == {"c": 0}
    assert out["requests"]["c"]["first_scheduled_step"] == 2


def test_pool_too_small_for_two_preempts_the_later_request_which_resumes_and_finishes():
    # 6 usable blocks of 16. a and b: 32-token prompts (2 blocks each, admitted: the full prompt
    # fits), 40 decode tokens each -> 72 tokens = 5 blocks each at the end: both cannot fit.
    out, _ = fake_run([req("a", 32, 40), req("b", 32, 40)], num_blocks=7, enable_caching=False)
    steps = out["steps"]
    assert steps[0]["scheduled"] == {"a": 32, "b": 32} and steps[0]["free_blocks"] == 2
    pre = [s for s in steps if s["preempted"]]
    assert pre, "expected a preemption"
    first = pre[0]
    assert first["preempted"] == ["b"]  # running[-1], the later request
    assert first["scheduled"] == {"a": 1}
    assert first["waiting"] == ["b"] and first["running"] == ["a"]
    # Decode step k computes position 31 + k (slots for 32 + k tokens): the 4th block is needed at
    # k = 17, when a and b hold 3 blocks each and nothing is free.
    assert first["step"] == 17
    ra, rb = out["requests"]["a"], out["requests"]["b"]
    assert ra["num_preemptions"] == 0 and rb["num_preemptions"] >= 1
    assert ra["finished_step"] == 39
    # b is re-admitted after a finishes, recomputes prompt + its 17 outputs in one step, then decodes.
    resumed = [s for s in steps if s["admitted"].get("b") is not None and s["step"] > 0]
    assert resumed[0]["step"] == 40 and resumed[0]["scheduled"] == {"b": 32 + 17}
    # a finishes at step 39 (1 + 39 outputs); b resumes at 40 with 32 + 17 tokens (17 outputs from
    # steps 0..16), samples its 18th output there and its 40th at step 62.
    assert rb["finished_step"] == 62
    assert out["totals"]["preemptions"] == rb["num_preemptions"] == 1
    assert out["totals"]["finished"] == 2 and not out["truncated"]


def test_shared_prefix_hits_the_first_requests_full_blocks():
    # a: 40-token prompt of which 36 are the shared prefix "sys" -> a caches 2 full blocks
    # (tokens 0..31) of the prefix; b (arriving later) shares 36 tokens -> hit = 2 blocks = 32.
    out, _ = fake_run([
        req("a", 40, 2, shared_prefix="sys", shared_prefix_tokens=36),
        req("b", 50, 1, arrival=1, shared_prefix="sys", shared_prefix_tokens=36),
    ], num_blocks=100)
    assert out["steps"][1]["admitted"] == {"b": 32}
    assert out["steps"][1]["scheduled"] == {"a": 1, "b": 18}
    assert out["requests"]["b"]["prefix_hit_tokens"] == 32


def test_prefix_hit_is_capped_at_prompt_minus_one():
    # Identical 32-token prompts (2 full blocks): the hit is capped at 31 tokens -> 1 block.
    out, _ = fake_run([
        req("a", 32, 1, shared_prefix="p", shared_prefix_tokens=32),
        req("b", 32, 1, arrival=1, shared_prefix="p", shared_prefix_tokens=32),
    ], num_blocks=100)
    assert out["requests"]["b"]["prefix_hit_tokens"] == 16
    assert out["steps"][1]["scheduled"] == {"b": 16}


def test_request_larger_than_the_pool_is_never_admitted():
    # 4 usable blocks: a 100-token prompt needs 7; with scheduler_reserve_full_isl it never starts,
    # and b behind it waits too (FCFS: the failed admission stops the loop).
    out, manager = fake_run([req("a", 100, 1), req("b", 10, 1)], num_blocks=5, max_steps=7)
    assert out["truncated"] is True
    assert all(s["scheduled"] == {} for s in out["steps"])
    assert out["steps"][-1]["waiting"] == ["a", "b"]
    assert out["requests"]["a"]["first_scheduled_step"] is None
    assert out["totals"] == {"steps": 7, "request_steps": 0, "preemptions": 0, "finished": 0}
    assert manager.calls[0] == ("a", 100, 0, True)


def test_without_the_full_sequence_gate_the_first_chunk_is_admitted():
    out, _ = fake_run([req("a", 100, 1)], num_blocks=5, max_steps=3, max_num_batched_tokens=32,
                      scheduler_reserve_full_isl=False)
    # 4 blocks = 64 tokens: chunks of 32 run, then the request preempts itself and restarts.
    s = out["steps"]
    assert s[0]["scheduled"] == {"a": 32} and s[1]["scheduled"] == {"a": 32}
    assert s[2]["preempted"] == ["a"] and s[2]["scheduled"] == {}


def test_prompt_at_max_model_len_is_rejected_by_the_input_processor():
    out, _ = fake_run([req("a", 64, 1), req("b", 10, 1)], num_blocks=100, max_model_len=64)
    assert "longer than the maximum model length of 64" in out["requests"]["a"]["rejected"]
    assert out["requests"]["a"]["finished_step"] is None
    assert out["steps"][0]["scheduled"] == {"b": 10}
    assert out["totals"]["finished"] == 1 and not out["truncated"]


def test_max_model_len_caps_the_outputs():
    out, _ = fake_run([req("a", 60, 50)], num_blocks=100, max_model_len=64)
    # check_stop: num_tokens >= max_model_len after 4 outputs.
    assert out["requests"]["a"]["finished_step"] == 3


def test_arrival_steps_and_empty_steps():
    out, _ = fake_run([req("a", 16, 1, arrival=2)], num_blocks=100)
    assert [s["scheduled"] for s in out["steps"]] == [{}, {}, {"a": 16}]
    assert out["requests"]["a"]["first_scheduled_step"] == 2 == out["requests"]["a"]["finished_step"]


def test_attrs_workload_request():
    from kvproof.models import geometry
    from kvproof.models.codec import ABSENT

    r = geometry.WorkloadRequest(id="a", prompt_tokens=20, decode_tokens=2)
    assert r.arrival_step is ABSENT
    out, _ = fake_run([r], num_blocks=100)
    assert out["requests"]["a"]["finished_step"] == 1


# ---------------------------------------------------------------------------------------------
# The real manager port
# ---------------------------------------------------------------------------------------------

ABSENT_ = object()


def real_plan(**settings):
    from sim_helpers import full_attention, geometry

    from kvproof.models.geometry import load_geometry
    from kvproof.sim import plan

    return plan(load_geometry(geometry(full_attention(count=2), **settings)))


FAKE_CASES = {
    "chunked": {"requests": [req("a", 100, 2), req("b", 50, 1)], "max_num_batched_tokens": 64},
    "max_num_seqs": {"requests": [req(x, 16, 2) for x in "abc"], "max_num_seqs": 2},
    "preemption": {"requests": [req("a", 32, 40), req("b", 32, 40)]},
    "shared_prefix": {"requests": [req("a", 40, 2, shared_prefix="sys", shared_prefix_tokens=36),
                                   req("b", 50, 1, arrival=1, shared_prefix="sys", shared_prefix_tokens=36)]},
    "hit_cap": {"requests": [req("a", 32, 1, shared_prefix="p", shared_prefix_tokens=32),
                             req("b", 32, 1, arrival=1, shared_prefix="p", shared_prefix_tokens=32)]},
    "mixed": {"requests": [req(f"r{i}", 30 + 7 * i, 5 + i, arrival=i // 3, shared_prefix="s" if i % 2 else ABSENT_,
                               shared_prefix_tokens=20 if i % 2 else 0) for i in range(12)],
              "max_num_batched_tokens": 96, "chunk_tokens": 40},
}


@pytest.mark.parametrize("name", sorted(FAKE_CASES))
def test_real_manager_agrees_with_the_fake_on_one_full_attention_group(name):
    """One full-attention group, 6 usable blocks (override 7, max_model_len 96): the real manager
    port and the fake give the same workload, step by step."""
    case = dict(FAKE_CASES[name])
    requests = [{k: v for k, v in r.items() if v is not ABSENT_} for r in case.pop("requests")]
    mnbt = case.pop("max_num_batched_tokens", 2048)
    max_num_seqs = case.pop("max_num_seqs", 64)
    p = real_plan(max_model_len=96, num_gpu_blocks_override=7, max_num_batched_tokens=mnbt,
                  max_num_seqs=max_num_seqs)
    assert p.num_blocks == 7
    block = {"requests": requests, **({"chunk_tokens": case["chunk_tokens"]} if "chunk_tokens" in case else {})}
    real = simulate_workload(p, block, max_num_seqs=max_num_seqs)
    fake, _ = fake_run(requests, num_blocks=7, max_model_len=96, max_num_seqs=max_num_seqs,
                       max_num_batched_tokens=mnbt, **case)
    assert real == fake


def test_real_manager_preemption_numbers():
    p = real_plan(max_model_len=96, num_gpu_blocks_override=7)
    out = simulate_workload(p, {"requests": [req("a", 32, 40), req("b", 32, 40)]})
    first = next(s for s in out["steps"] if s["preempted"])
    assert first["step"] == 17 and first["preempted"] == ["b"]
    assert out["requests"]["b"]["finished_step"] == 62 and out["requests"]["a"]["finished_step"] == 39
    # Prefix caching is on: b's 3 full blocks were freed tail-first (they stay hashed), then a's 4th
    # and 5th blocks evicted the first two of them from the free queue; b re-hits its block 0 only
    # (vLLM 0.33.0's own Scheduler: step 40 schedules {"b": 33} = 49 - 16).
    assert out["steps"][40]["admitted"] == {"b": 16}
    assert out["steps"][40]["scheduled"] == {"b": 33} and out["steps"][40]["free_blocks"] == 2


# ---------------------------------------------------------------------------------------------
# vLLM's own answers: the stored goldens of tests/conformance/requests (oracle_requests.py)
# ---------------------------------------------------------------------------------------------

REQUEST_GOLDENS = Path(__file__).resolve().parents[1] / "conformance" / "requests"


def _workload_goldens():
    if not REQUEST_GOLDENS.is_dir():
        return []
    out = []
    for path in sorted(REQUEST_GOLDENS.glob("*.json")):
        if path.name.endswith(".expected.json"):
            continue
        expected = path.with_name(path.name[: -len(".json")] + ".expected.json")
        if expected.exists() and "requests" in json.loads(path.read_text()).get("simulate", {}):
            out.append(path)
    return out


@pytest.mark.parametrize("path", _workload_goldens(), ids=lambda p: p.stem)
def test_workload_goldens_of_vllm(path):
    """``workload`` equals vLLM 0.33.0's real Scheduler's answer stored by ``oracle_requests.py``."""
    from kvproof.models.geometry import load_geometry
    from kvproof.sim import plan

    doc = json.loads(path.read_text())
    simulate = doc.pop("simulate")
    expected = json.loads(path.with_name(path.stem + ".expected.json").read_text())
    if expected.get("workload") is None:
        pytest.skip("the golden has no workload answer")
    got = simulate_workload(plan(load_geometry(doc)), simulate, max_num_seqs=doc.get("max_num_seqs"))
    assert got == expected["workload"]


def test_new_one_token_decode_is_padded_under_speculative_decoding():
    """``scheduler.py:1310-1330``: y's prompt is a full hit but for its last token (32 of 33), so it is
    admitted as a one-token decode and padded to ``1 + num_speculative_tokens`` (ngram, k = 3); the
    three placeholder drafts are rejected, which rolls ``num_computed_tokens`` back. Every number is
    vLLM 0.33.0's own Scheduler's (oracle_requests.py on this geometry)."""
    from sim_helpers import full_attention, geometry

    from kvproof.models.geometry import load_geometry
    from kvproof.sim import plan

    doc = geometry(full_attention(count=2), max_model_len=2048, num_gpu_blocks_override=300, async_scheduling=False,
                   speculative={"method": "ngram", "num_speculative_tokens": 3})
    shared = {"shared_prefix": "p", "shared_prefix_tokens": 33}
    out = simulate_workload(plan(load_geometry(doc)), {"requests": [
        req("x", 33, 10, **shared), req("y", 33, 4, arrival=2, **shared), req("z", 49, 2, arrival=2, **shared)]})
    steps = out["steps"]
    assert steps[2]["scheduled"] == {"x": 1, "y": 4, "z": 17}
    assert steps[2]["admitted"] == {"y": 32, "z": 32}
    assert [s["scheduled"] for s in steps[3:6]] == [{"x": 1, "y": 1, "z": 1}, {"x": 1, "y": 1}, {"x": 1, "y": 1}]
    assert [s["free_blocks"] for s in steps] == [296, 296, 293, 295, 295, 296, 296, 296, 296, 299]
    assert {k: v["finished_step"] for k, v in out["requests"].items()} == {"x": 9, "y": 5, "z": 3}
    assert out["totals"] == {"steps": 10, "request_steps": 16, "preemptions": 0, "finished": 3}
