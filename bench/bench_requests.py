"""Requests over time: request-steps per second of the workload simulator, steps per second of the
single-request trace, and, when vLLM is installed, the same workload through vLLM 0.33.0's own
scheduler (the requests oracle) for a ratio.

Run: python bench/bench_requests.py [--rounds N] [--requests 64] [--no-vllm]

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

vLLM: when ``.venv-vllm/bin/python`` exists (``KVPROOF_ORACLE_PYTHON`` names another interpreter),
``tests/conformance/oracle_requests.py`` runs the ``workload`` geometry once per round in its own
process; the ratio compares its in-process scheduling time (``workload_elapsed_s``, reported when
``KVPROOF_ORACLE_ELAPSED`` is set: ``Scheduler.schedule`` + ``update_from_output`` with vLLM's real
``KVCacheManager``, the oracle's bookkeeping included) with kvproof's ``simulate_workload``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import time

from _common import ROOT, interleaved, machine, median_ms, spread

from kvproof.models.geometry import load_geometry
from kvproof.sim import plan


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


def _geometry(name: str, n: int, **settings) -> dict:
    doc = json.loads((ROOT / "examples" / "geometries" / name).read_text())
    doc.update({"max_num_seqs": 32, "max_num_batched_tokens": 2048, "enable_prefix_caching": True})
    doc.update(settings)
    doc["simulate"] = {"requests": _requests(n), "max_steps": 100_000}
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()

    from kvproof.sim.request_trace import simulate_request
    from kvproof.sim.scheduler import simulate_workload

    docs = {
        "workload": _geometry("plain-32-full-attention.json", args.requests),
        "workload-preempting": _geometry("plain-32-full-attention.json", args.requests, num_gpu_blocks_override=600),
        "hybrid-workload": _geometry("bamba-like-align.json", args.requests),
    }
    single = json.loads((ROOT / "examples" / "geometries" / "gemma-like-sliding-window.json").read_text())
    single["simulate"] = {"prompt_tokens": 20_000, "chunk_tokens": 512, "decode_tokens": 2_000,
                          "prefix_hit_probe": True}

    planned = {}
    for name, doc in {**docs, "single-request": single}.items():
        geometry = load_geometry(copy.deepcopy(doc))
        planned[name] = (plan(geometry), geometry.simulate)

    units: dict[str, tuple[int, str]] = {}
    cases = {}
    for name in docs:
        the_plan, block = planned[name]
        result = simulate_workload(the_plan, block)
        totals = result["totals"]
        units[name] = (totals["request_steps"], "request-steps")
        print(f"{name}: {totals['steps']:,} steps, {totals['request_steps']:,} request-steps, "
              f"{totals['preemptions']} preemptions, {totals['finished']} finished"
              + (" (truncated)" if result.get("truncated") else ""))
        cases[name] = (lambda p=the_plan, b=block: simulate_workload(p, b))
    the_plan, block = planned["single-request"]
    trace = simulate_request(the_plan, block)
    units["single-request"] = (len(trace["simulation"]), "steps")
    cases["single-request"] = lambda: simulate_request(the_plan, block)

    print(machine())
    samples = interleaved(cases, args.rounds)
    rates = {}
    for name, values in samples.items():
        count, unit = units[name]
        rates[name] = count / (median_ms(values) / 1000)
        print(f"  {name:<22} {spread(values)}  ->  {rates[name]:,.0f} {unit}/s")

    oracle_python = os.environ.get("KVPROOF_ORACLE_PYTHON") or str(ROOT / ".venv-vllm" / "bin" / "python")
    oracle = ROOT / "tests" / "conformance" / "oracle_requests.py"
    if args.no_vllm or not os.path.exists(oracle_python) or not oracle.exists():
        print("vLLM: skipped (no .venv-vllm or no oracle_requests.py, or --no-vllm)")
        return
    path = ROOT / "out" / "bench-requests-workload.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(docs["workload"]))
    walls, elapsed = [], []
    for _ in range(max(1, min(args.rounds, 3))):
        start = time.perf_counter()
        run = subprocess.run([oracle_python, str(oracle), str(path)], capture_output=True, text=True, check=False,
                             env={**os.environ, "KVPROOF_ORACLE_ELAPSED": "1"})
        walls.append(time.perf_counter() - start)
        if run.returncode != 0:
            print(f"vLLM: the oracle failed ({run.returncode}): {run.stderr.strip().splitlines()[-1:]}")
            return
        answer = json.loads(run.stdout)
        if answer.get("workload") != simulate_workload(*planned["workload"]):  # time the same schedule
            print("vLLM: the oracle's workload differs from kvproof's; not timed (run the requests parity suite)")
            return
        if answer.get("workload_elapsed_s") is not None:
            elapsed.append(answer["workload_elapsed_s"])
    count = units["workload"][0]
    if elapsed:
        vllm_rate = count / (sorted(elapsed)[len(elapsed) // 2])
        what = "vLLM's Scheduler in process (schedule + update_from_output)"
    else:
        vllm_rate = count / (sorted(walls)[len(walls) // 2])
        what = "the oracle process, vLLM's import included"
    print(f"  vLLM workload          {vllm_rate:,.0f} request-steps/s ({what}); "
          f"kvproof / vLLM = {rates['workload'] / vllm_rate:.2f}")


if __name__ == "__main__":
    main()
