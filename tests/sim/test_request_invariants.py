"""Properties of requests over time (docs/requests.md) on generated geometries and workloads
(``kvproof.fuzz.strategies.geometries_with_requests``), without vLLM: what vLLM 0.33.0's managers and
scheduler guarantee must hold of the simulation.  The exact numbers are compared with vLLM itself in
``tests/conformance/test_requests_parity.py`` (opt-in)."""

from __future__ import annotations

from hypothesis import given

from kvproof.fuzz.strategies import geometries_with_requests
from kvproof.sim import simulate_document


def _slack(doc: dict, geometry: dict) -> list[int]:
    """Finding R1 (docs/requests.md): a chunked-local group whose attention chunk is not a multiple
    of its block size holds up to one block more than its start-up term (vLLM 0.33.0 does the same,
    checked with the requests oracle)."""
    chunks = [entry.get("attention_chunk_size") for entry in geometry["layers"]
              if entry["spec"] == "ChunkedLocalAttentionSpec"]
    return [int(group["spec"] in ("ChunkedLocalAttentionSpec", "UniformTypeKVCacheSpecs")
                and any(c and c % group["block_size"] for c in chunks)) for group in doc["groups"]]


def _check_single(doc: dict, geometry: dict) -> None:
    groups = len(doc["groups"])
    usable = doc["num_usable_blocks"]
    simulate = geometry["simulate"]
    steps = [s for s in doc["simulation"] if s["phase"] != "prefix_hit_probe"]
    computed = 0
    for step in steps:
        assert len(step["blocks_held"]) == len(step["row_length"]) == groups
        assert step["num_computed_tokens"] == computed  # steps follow each other without gaps
        computed += step["num_new_tokens"]
        assert step["num_new_tokens"] >= 1
        for held, row in zip(step["blocks_held"], step["row_length"]):
            assert 0 <= held <= row
        # one request alone: every usable block is either its own or free (cached ones are free)
        assert step["free_blocks"] + sum(step["blocks_held"]) == usable, step
        # the start-up bound: a request never holds more than the concurrency denominator's term,
        # but for one case vLLM itself exceeds by a block (docs/requests.md, finding R1)
        for held, bound, slack in zip(step["blocks_held"], doc["per_group_blocks_per_request"], _slack(doc, geometry)):
            assert held <= bound + slack, (step, doc["per_group_blocks_per_request"])
    if doc.get("simulation_stalled"):  # the lone request never fit: nothing more to check
        assert doc["prefix_hit_probe"] is None
        return
    if doc.get("simulation_truncated"):  # max_steps reached (a token budget below chunk_tokens)
        assert len(steps) == simulate.get("max_steps", 100_000) and doc["prefix_hit_probe"] is None
        return
    prefill = [s for s in steps if s["phase"] == "prefill"]
    prompt, decode = simulate["prompt_tokens"], simulate.get("decode_tokens", 0)
    assert sum(s["num_new_tokens"] for s in prefill) + (steps[0]["num_computed_tokens"] if steps else 0) == prompt
    # one token sampled per step once the prefill is complete, up to max_tokens or max_model_len
    assert len(steps) - len(prefill) == max(min(decode, doc["max_model_len"] - prompt) - 1, 0)
    probe = doc["prefix_hit_probe"]
    if simulate.get("prefix_hit_probe"):
        assert probe is not None and doc["simulation"][-1] == probe
        assert 0 <= probe["hit_tokens"] <= simulate["prompt_tokens"] - 1  # the last token is recomputed
        if not doc["enable_prefix_caching"]:
            assert probe["hit_tokens"] == 0
    else:
        assert probe is None


def _check_workload(doc: dict, geometry: dict) -> None:
    workload = doc["workload"]
    if "refused" in workload or "raised" in workload:
        return
    requests = geometry["simulate"]["requests"]
    budget = doc.get("max_in_flight_tokens")
    seqs = geometry.get("max_num_seqs")
    request_steps = 0
    for step in workload["steps"]:
        request_steps += len(step["scheduled"])
        assert all(n >= 1 for n in step["scheduled"].values())
        if seqs is not None:
            assert len(step["running"]) <= seqs
        assert set(step["scheduled"]) <= set(step["running"]) | set(step["finished"]) | set(step["preempted"])
        assert step["free_blocks"] <= doc["num_usable_blocks"]
        assert budget is None or sum(step["scheduled"].values()) <= max(budget, geometry.get("max_num_batched_tokens", 0))
    totals = workload["totals"]
    assert totals["request_steps"] == request_steps and totals["steps"] == len(workload["steps"])
    finished = [r for r in workload["requests"].values() if r.get("finished_step") is not None]
    assert totals["finished"] == len(finished)
    assert totals["preemptions"] == sum(r["num_preemptions"] for r in workload["requests"].values())
    if not workload["truncated"] and workload["steps"]:
        rejected = [r for r in workload["requests"].values() if r.get("rejected")]
        assert len(finished) + len(rejected) == len(requests)
        # every request's blocks are back in the pool at the end
        assert workload["steps"][-1]["free_blocks"] == doc["num_usable_blocks"]


@given(geometries_with_requests())
def test_requests_over_time_keep_vllms_guarantees(geometry) -> None:
    doc = simulate_document(geometry)
    assert doc["status"] in ("ok", "refused"), doc.get("error")
    if doc["status"] != "ok":
        return
    if doc.get("simulation") is not None:
        _check_single(doc, geometry)
    if "workload" in doc:
        _check_workload(doc, geometry)
