"""Requests over time: request-steps per second of the workload simulator against vLLM 0.33.0's own
scheduler on the same schedules, steps per second of the single-request trace, and the long workload
(10,000 requests over 1,000,000 steps).

Run: python bench/bench_requests.py [--rounds N] [--requests 64] [--no-vllm] [--no-long] [--parts]

``--parts`` prints, instead, where each workload's time goes: ``simulate_workload`` with and
without freeing its result inside the timing, and its parts timed by wrappers; then (unless
``--no-vllm``) the block pool floor: the time vLLM's and kvproof's ``BlockPool`` calls take (both
wrapped), against the 20x budget, vLLM's workload CPU / 20.

Cases (docs/requests.md), interleaved round by round:

* ``workload``: N requests (default 64) on the 32-layer full-attention example with prefix caching:
  prompts of 1,000-3,000 tokens, half of them behind one of four 1,024-token shared prefixes,
  64-256 decode tokens, staggered arrivals, ``max_num_seqs`` 32 and a 2,048-token budget, so that
  chunked prefill, queueing and prefix hits all happen; the rate is request-steps per second (a
  step with 32 running requests is 32 request-steps).
* ``workload-preempting``: the same requests on a 600-block pool (``num_gpu_blocks_override``), so
  that running requests are preempted and recomputed and cached blocks are evicted.
* ``hybrid-workload``: the same requests on the Bamba-like hybrid (Mamba align mode + full
  attention), every group's manager in play.
* ``single-request``: the single request of a 20,000-token prompt in 512-token chunks and 2,000
  decode steps on the Gemma-like sliding-window example (steps per second).

Each workload is also timed step by step (``kvproof.sim.requests.scheduler.step_by_step``: every step alone,
every ``allocate_slots`` call made), after checking that both paths give the same result: the ratio
shows what the decode runs (``kvproof/sim/requests/decode_runs.py``) bring.

vLLM: when ``.venv-vllm/bin/python`` exists (``KVPROOF_ORACLE_PYTHON`` names another interpreter),
``tests/conformance/oracle_requests.py`` runs each workload geometry in its own process, up to 3
times; with ``KVPROOF_ORACLE_ELAPSED`` set it reports its in-process scheduling time, wall and CPU
(``Scheduler.schedule`` + ``update_from_output`` with vLLM's real ``KVCacheManager``, request creation
and the oracle's bookkeeping included), which is compared with kvproof's ``simulate_workload`` (its
scheduler and manager construction included) after checking the two schedules are equal. Ratios
are of medians, all measured in this run; the CPU ratio is the steadier one on a loaded machine.

The long workload (``--no-long`` skips it): 10,000 requests arriving every 99.9 steps over 1,000,000
steps on the full-attention example (prompts of 256-2,000 tokens, half behind one of four 256-token
shared prefixes, 100-1,000 decode tokens), timed once, wall and CPU (target: under a minute).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import statistics
import subprocess
import time

from _common import ROOT, interleaved_with_cpu, load, machine, median_ms, spread

from kvproof.models.geometry import load_geometry
from kvproof.sim import plan

LONG_REQUESTS = 10_000
LONG_STEPS = 1_000_000


def _requests(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for r in range(n):
        prompt = rng.randrange(1000, 3001)
        request = {"id": f"r{r}", "arrival_step": r * 3, "prompt_tokens": prompt,
                   "decode_tokens": rng.randrange(64, 257)}
        if r % 2 == 0:
            request["shared_prefix"] = f"system-{r % 8 // 2}"
            request["shared_prefix_tokens"] = 1024
        out.append(request)
    return out


def _long_requests(seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for r in range(LONG_REQUESTS):
        request = {"id": f"r{r}", "arrival_step": r * LONG_STEPS // (LONG_REQUESTS + 10),
                   "prompt_tokens": rng.randrange(256, 2001), "decode_tokens": rng.randrange(100, 1001)}
        if r % 2 == 0:
            request["shared_prefix"] = f"system-{r % 8 // 2}"
            request["shared_prefix_tokens"] = 256
        out.append(request)
    return out


def _geometry(name: str, requests: list[dict], max_steps: int = 100_000, **settings) -> dict:
    doc = json.loads((ROOT / "examples" / "geometries" / name).read_text())
    doc.update({"max_num_seqs": 32, "max_num_batched_tokens": 2048, "enable_prefix_caching": True})
    doc.update(settings)
    doc["simulate"] = {"requests": requests, "max_steps": max_steps}
    return doc


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _vllm(docs: dict[str, dict], expected: dict[str, dict], rounds: int,
          block_pool: bool = False) -> dict[str, tuple[float, float]] | str:
    """vLLM's in-process (wall, CPU) seconds per workload, medians over ``rounds`` oracle runs, or
    why they were not measured; with ``block_pool``, (seconds, calls) in vLLM's ``BlockPool`` calls
    instead (timed by wrappers, ``KVPROOF_ORACLE_BLOCK_POOL``)."""
    oracle_python = os.environ.get("KVPROOF_ORACLE_PYTHON") or str(ROOT / ".venv-vllm" / "bin" / "python")
    oracle = ROOT / "tests" / "conformance" / "oracle_requests.py"
    if not os.path.exists(oracle_python) or not oracle.exists():
        return "no .venv-vllm or no oracle_requests.py"
    (ROOT / "out").mkdir(exist_ok=True)
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in docs}
    for _ in range(rounds):
        for name, doc in docs.items():
            path = ROOT / "out" / f"bench-requests-{name}.json"
            path.write_text(json.dumps(doc))
            env = {**os.environ, "KVPROOF_ORACLE_ELAPSED": "1"}
            if block_pool:
                env["KVPROOF_ORACLE_BLOCK_POOL"] = "1"
            run = subprocess.run([oracle_python, str(oracle), str(path)], capture_output=True, text=True,
                                 check=False, env=env)
            if run.returncode != 0:
                return f"the oracle failed ({run.returncode}): {run.stderr.strip().splitlines()[-1:]}"
            answer = json.loads(run.stdout)
            if answer.get("workload") != expected[name]:  # time the same schedule
                return f"the oracle's {name} differs from kvproof's (run the requests parity suite)"
            if block_pool:
                calls = answer["block_pool_s"].values()
                times[name][0].append(sum(seconds for seconds, _ in calls))
                times[name][1].append(sum(count for _, count in calls))
            else:
                times[name][0].append(answer["workload_elapsed_s"])
                times[name][1].append(answer["workload_cpu_s"])
    return {name: (_median(wall), _median(cpu)) for name, (wall, cpu) in times.items()}


def _long(decode_runs: bool = True) -> None:
    from kvproof.sim.requests.scheduler import simulate_workload

    doc = _geometry("plain-32-full-attention.json", _long_requests(), max_steps=LONG_STEPS)
    geometry = load_geometry(doc)
    the_plan = plan(geometry)
    print(f"long workload: {LONG_REQUESTS:,} requests over {LONG_STEPS:,} steps; load average before {load()}")
    start, start_cpu = time.perf_counter(), time.process_time()
    result = simulate_workload(the_plan, geometry.simulate, decode_runs=decode_runs)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    totals = result["totals"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {totals['steps']:,} steps, {totals['request_steps']:,} request-steps, {totals['finished']:,} finished, "
          f"{totals['preemptions']} preemptions" + (" (truncated)" if result["truncated"] else ""))
    print(f"  simulate_workload: {wall:.1f} s wall, {cpu:.1f} s CPU ({totals['request_steps'] / wall:,.0f} "
          f"request-steps/s); peak RSS {peak:,.0f} MiB; load average after {load()}; "
          f"target < 60 s: {'met' if wall < 60 else 'NOT met'}")


#: The ``BlockPool`` methods through which every block is handed out, cached, found and freed (the
#: oracle times the same ones of vLLM's, ``tests/conformance/oracle_requests.py``).
BLOCK_POOL_CALLS = ("get_new_blocks", "cache_full_blocks", "get_cached_block", "touch", "free_blocks")


def _parts(planned: dict, rounds: int) -> dict[str, tuple[float, float, int]]:
    """Where each workload's time goes: ``simulate_workload`` timed as this bench's rounds time it
    (its result freed and the garbage collected outside the timing) and as they did before
    2026-12-06 (the result freed inside the timing, the collector left to run whenever, so in a
    later call), then the scheduler's and the manager's parts, each wrapped by a timer (the
    wrappers' cost is inside the parts, so they add up to more than the plain run), and
    ``allocate_slots`` by the kind of call: a decode (one token), an admission, a prefill chunk, and
    the block pool's calls. Returns, per workload, (CPU seconds as the rounds time it, seconds and
    calls in the block pool)."""
    import functools
    import gc

    from kvproof.sim.requests import block_pool, decode_runs, kv_manager, request, scheduler

    floors = {}

    print(f"parts ({rounds} rounds each; load average {load()}):")
    for name, (the_plan, block) in planned.items():
        before, now = [], []
        for _ in range(rounds):
            start = time.process_time()
            scheduler.simulate_workload(the_plan, block)  # the result is freed inside the timing
            before.append(time.process_time() - start)
        for _ in range(rounds):
            gc.collect()
            start = time.process_time()
            result = scheduler.simulate_workload(the_plan, block)
            now.append(time.process_time() - start)
            del result
        gc.collect()
        print(f"  {name}: CPU timed as the rounds time it {spread(now)}; "
              f"as before 2026-12-06 {spread(before)}")
        totals: dict[str, list[float]] = {}
        wrapped = [(scheduler.Scheduler, "schedule"), (scheduler.Scheduler, "update_from_output"),
                   (scheduler.Scheduler, "_schedule_waiting"), (scheduler.Scheduler, "_free_request"),
                   (decode_runs.DecodeRuns, "advance"), (decode_runs.DecodeRuns, "_catch_up"),
                   (kv_manager.KVCacheManager, "get_computed_blocks"),
                   (kv_manager.KVCacheManager, "decode_quiet_steps"), (kv_manager.KVCacheManager, "decode_event"),
                   (request.Request, "__init__"),
                   (scheduler, "workload_token_ids")]
        wrapped += [(block_pool.BlockPool, name) for name in BLOCK_POOL_CALLS]
        # (what an older tree lacks is left out, so that the script times older trees too)
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr in wrapped if hasattr(owner, attr)]
        saved.append((kv_manager.KVCacheManager, "allocate_slots", kv_manager.KVCacheManager.allocate_slots))

        def timed(fn, label):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    entry = totals.setdefault(label, [0.0, 0])
                    entry[0] += time.perf_counter() - start
                    entry[1] += 1
            return wrapper

        def allocate(self, req, num_new_tokens, *args, **kwargs):
            label = ("allocate_slots: decode" if num_new_tokens == 1 else
                     "allocate_slots: admission" if req.status != request.RequestStatus.RUNNING else
                     "allocate_slots: prefill chunk")
            return timed(saved[-1][2], label)(self, req, num_new_tokens, *args, **kwargs)

        try:
            for owner, attr, fn in saved[:-1]:
                setattr(owner, attr, timed(fn, f"{getattr(owner, '__qualname__', owner.__name__)}.{attr}"))
            kv_manager.KVCacheManager.allocate_slots = allocate
            for _ in range(rounds):
                scheduler.simulate_workload(the_plan, block)
        finally:
            for owner, attr, fn in saved:
                setattr(owner, attr, fn)
        for label, (seconds, calls) in sorted(totals.items(), key=lambda item: -item[1][0]):
            print(f"    {label:<38} {seconds / rounds * 1000:7.2f} ms  {calls // rounds:6,} calls  "
                  f"{seconds / calls * 1e6:7.1f} us each")
        pool_calls = [totals.get(f"BlockPool.{name}", [0.0, 0]) for name in BLOCK_POOL_CALLS]
        floors[name] = (_median(now), sum(s for s, _ in pool_calls) / rounds, sum(c for _, c in pool_calls) // rounds)
    return floors


def _floor(docs: dict[str, dict], results: dict[str, dict], floors: dict, rounds: int) -> None:
    """The block pool's share against 20x vLLM: the time both sides spend in the ``BlockPool`` calls
    (every block handed out, cached, looked up and freed, one object per block on both sides) and
    the 20x budget, vLLM's whole workload CPU / 20 (its runs unwrapped)."""
    whole = _vllm(docs, results, rounds)
    pool = _vllm(docs, results, rounds, block_pool=True)
    if isinstance(whole, str) or isinstance(pool, str):
        print(f"block pool floor: vLLM not timed: {whole if isinstance(whole, str) else pool}")
        return
    print(f"block pool floor ({rounds} oracle rounds each way; load average {load()}):")
    for name, (ours_cpu, ours_pool, ours_calls) in floors.items():
        budget = whole[name][1] / 20
        print(f"  {name}: 20x budget {budget * 1000:.2f} ms (vLLM CPU {whole[name][1] * 1000:.1f} ms / 20); "
              f"block pool calls: vLLM {pool[name][0] * 1000:.2f} ms ({int(pool[name][1]):,} calls), "
              f"kvproof {ours_pool * 1000:.2f} ms ({ours_calls:,} calls) = {ours_pool / budget:.0%} of the budget; "
              f"kvproof whole {ours_cpu * 1000:.2f} ms = {ours_cpu / budget:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--no-long", action="store_true")
    parser.add_argument("--parts", action="store_true",
                        help="only where each workload's time goes (wrapped parts; no ratios)")
    args = parser.parse_args()

    from kvproof.sim.requests.request_trace import simulate_request
    from kvproof.sim.requests.scheduler import simulate_workload, step_by_step

    requests = _requests(args.requests)
    docs = {
        "workload": _geometry("plain-32-full-attention.json", requests),
        "workload-preempting": _geometry("plain-32-full-attention.json", requests, num_gpu_blocks_override=600),
        "hybrid-workload": _geometry("bamba-like-align.json", requests),
    }
    single = json.loads((ROOT / "examples" / "geometries" / "gemma-like-sliding-window.json").read_text())
    single["simulate"] = {"prompt_tokens": 20_000, "chunk_tokens": 512, "decode_tokens": 2_000,
                          "prefix_hit_probe": True}

    planned = {}
    for name, doc in {**docs, "single-request": single}.items():
        geometry = load_geometry(copy.deepcopy(doc))
        planned[name] = (plan(geometry), geometry.simulate)
    if args.parts:
        print(machine())
        floors = _parts({name: planned[name] for name in docs}, max(args.rounds, 5))
        if not args.no_vllm:
            from kvproof.sim.requests.scheduler import simulate_workload as run
            _floor(docs, {name: run(*planned[name]) for name in docs}, floors, max(1, min(args.rounds, 3)))
        return

    def step_by_step_run(fn, *fn_args):
        with step_by_step():
            return fn(*fn_args)

    units: dict[str, tuple[int, str]] = {}
    cases = {}
    results = {}
    for name in docs:
        the_plan, block = planned[name]
        result = simulate_workload(the_plan, block)
        assert step_by_step_run(simulate_workload, the_plan, block) == result, f"{name}: decode runs differ"
        results[name] = result
        totals = result["totals"]
        units[name] = (totals["request_steps"], "request-steps")
        print(f"{name}: {totals['steps']:,} steps, {totals['request_steps']:,} request-steps, "
              f"{totals['preemptions']} preemptions, {totals['finished']} finished"
              + (" (truncated)" if result.get("truncated") else ""))
        cases[name] = (lambda p=the_plan, b=block: simulate_workload(p, b))
        cases[f"{name} step by step"] = (lambda p=the_plan, b=block: step_by_step_run(simulate_workload, p, b))
    the_plan, block = planned["single-request"]
    trace = simulate_request(the_plan, block)
    assert step_by_step_run(simulate_request, the_plan, block) == trace, "single request: decode runs differ"
    units["single-request"] = (len(trace["simulation"]), "steps")
    cases["single-request"] = lambda: simulate_request(the_plan, block)

    print(machine())
    wall, cpu = interleaved_with_cpu(cases, args.rounds)
    rates = {}
    for name, values in wall.items():
        count, unit = units[name.removesuffix(" step by step")]
        rates[name] = count / (median_ms(values) / 1000)
        print(f"  {name:<34} {spread(values)}  CPU {median_ms(cpu[name]):8.2f} ms  ->  {rates[name]:,.0f} {unit}/s")
    for name in docs:
        print(f"  {name}: decode runs / step by step = {rates[name] / rates[name + ' step by step']:.2f} (wall), "
              f"{_median(cpu[name + ' step by step']) / _median(cpu[name]):.2f} (CPU)")

    if args.no_vllm:
        print("vLLM: skipped (--no-vllm)")
    else:
        measured = _vllm(docs, results, max(1, min(args.rounds, 3)))
        if isinstance(measured, str):
            print(f"vLLM: not timed: {measured}")
        else:
            for name, (vllm_wall, vllm_cpu) in measured.items():
                count = units[name][0]
                print(f"  vLLM {name:<29} {vllm_wall * 1000:8.1f} ms  CPU {vllm_cpu * 1000:8.1f} ms  ->  "
                      f"{count / vllm_wall:,.0f} request-steps/s;  kvproof / vLLM = "
                      f"{vllm_wall / _median(wall[name]):.2f} (wall), {vllm_cpu / _median(cpu[name]):.2f} (CPU)")
        print(f"  (vLLM's Scheduler + KVCacheManager in the requests oracle, in process; load average now {load()})")

    if not args.no_long:
        _long()


if __name__ == "__main__":
    main()
