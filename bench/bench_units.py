"""What one unit of each campaign costs (issue #19, docs/scale.md), and what the executors add.

Run: python bench/bench_units.py [--rules PF001,PF011,...] [--batches 4] [--geometries 100]
                                 [--overhead 300] [--no-cluster] [--no-vllm]

* **prove** (a unit = one rule): the fixed cost a fresh process pays once per document kind (a new
  ``Prover`` closing that kind's pins, as a worker does before its first rule of the kind), then
  each rule's seconds on that prover (``Prover.prove``, the unit's work);
* **fuzz** (a unit = a batch of ``kvproof.fuzz.campaigns.BATCH`` mutants of one record set): seconds
  per batch (``mutation_batch``, the record set loaded once beforehand, as a worker keeps it) and the
  pickled size of a unit (the record set travels with it), on a profile and on the GLM TP4 set;
* **conformance** (a unit = one geometry, ``scripts/conformance-campaign.py``): the oracle's start in
  a process (vLLM's import), then seconds per geometry (oracle + simulator + comparison);
* **executor overhead**: seconds per trivial unit through ``results_in_order`` on the local pool
  (2 processes) and on a local Dask cluster (2 worker processes, 1 thread each).

Every figure is from this one run; wall time moves with the load of a shared machine (printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import pickle
import statistics
import sys
import time

from _common import ROOT, machine


def prove_costs(rule_ids: list[str]) -> None:
    from kvproof.rules.registry import all_rules
    from kvproof.solver.prove import Prover

    rules = {rule.id: rule for rule in all_rules()}
    print(f"\nprove (a unit = one rule): {len(rule_ids)} rule(s)")
    prover = Prover()
    for kind in sorted({k for rule_id in rule_ids for k in rules[rule_id].over.kinds}):
        start = time.perf_counter()
        prover.close_pins([kind])
        print(f"  once per worker and kind: {kind:<9} pins closed in {time.perf_counter() - start:7.2f} s")
    for rule_id in rule_ids:
        start = time.perf_counter()
        result = prover.prove(rules[rule_id])
        print(f"  {rule_id}  {time.perf_counter() - start:7.2f} s  {result.verdict} ({result.shapes_tried} shapes)")


def fuzz_costs(batches: int) -> None:
    from kvproof.fuzz.campaigns import BATCH, collect_inputs, mutation_batch, plan_edits, set_payload
    from kvproof.fuzz.mutate import vocabulary_from

    print(f"\nfuzz (a unit = a batch of {BATCH} mutants of one record set; {batches} batches each)")
    for name in ("minimax-m27-tp4/profile.json", "glm53flash-tp4"):
        (record_set,), _ = collect_inputs([str(ROOT / "examples" / name)])
        vocabulary = vocabulary_from(d.tree for d in record_set.documents)
        tasks = [("reduced", index, edit) for index, edit, _ in plan_edits(record_set, vocabulary, 0, 0)]
        payload = set_payload(record_set)
        units = [(payload, tasks[i:i + BATCH]) for i in range(0, min(len(tasks), batches * BATCH), BATCH)]
        mutation_batch(*units[0])  # the record set loaded once, as a worker keeps it
        seconds = []
        for unit in units:
            start = time.perf_counter()
            mutation_batch(*unit)
            seconds.append(time.perf_counter() - start)
        size = len(pickle.dumps(units[0], protocol=pickle.HIGHEST_PROTOCOL))
        print(f"  {name:<30} {len(tasks):>6,} mutants: median {statistics.median(seconds):6.3f} s per batch "
              f"({statistics.median(seconds) / BATCH * 1000:5.1f} ms per mutant), unit pickled {size / 1024:,.0f} KiB")


def conformance_costs(count: int) -> None:
    import os
    from pathlib import Path

    python = Path(os.environ.get("KVPROOF_ORACLE_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
    if not python.exists():
        print(f"\nconformance: {python} is absent (bash scripts/conformance-setup.sh): skipped")
        return
    spec = importlib.util.spec_from_file_location("conformance_campaign", ROOT / "scripts" / "conformance-campaign.py")
    campaign = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(campaign)
    _, geometries = campaign.draw(count, 0)
    oracle_dir = str(ROOT / "tests" / "conformance")
    start = time.perf_counter()
    campaign.conformance_unit(geometries[0], str(python), oracle_dir)
    first = time.perf_counter() - start
    seconds = []
    for geometry in geometries[1:]:
        start = time.perf_counter()
        campaign.conformance_unit(geometry, str(python), oracle_dir)
        seconds.append(time.perf_counter() - start)
    print(f"\nconformance (a unit = one geometry): {len(geometries):,} distinct of {count:,} drawn")
    print(f"  once per process: the oracle started (vLLM imported) with the first geometry in {first:6.2f} s")
    print(f"  per geometry: median {statistics.median(seconds) * 1000:6.1f} ms, max {max(seconds) * 1000:6.1f} ms")


def overhead(units: int, cluster: bool) -> None:
    from kvproof.executor import executor_for, results_in_order

    print(f"\nexecutor overhead: {units:,} trivial units (abs) through results_in_order")
    work = [(-i,) for i in range(units)]
    places = [("local, --jobs 2", "local")]
    local_cluster = None
    if cluster and importlib.util.find_spec("distributed") is not None:
        from distributed import LocalCluster

        local_cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     host="127.0.0.1")
        places.append(("Dask cluster, 2 workers", local_cluster.scheduler_address))
    try:
        for label, address in places:
            start = time.perf_counter()
            with executor_for(address, 2) as pool:
                connected = time.perf_counter() - start
                start = time.perf_counter()
                assert list(results_in_order(pool, abs, work)) == list(range(units))
                seconds = time.perf_counter() - start
            print(f"  {label:<24} start {connected:5.2f} s, then {seconds / units * 1000:6.2f} ms per unit")
    finally:
        if local_cluster is not None:
            local_cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", default="PF001,PF011,PF024,CA001,BO005,SC002",
                        help="the rules whose unit cost is measured (comma-separated)")
    parser.add_argument("--batches", type=int, default=4, help="fuzz batches timed per record set")
    parser.add_argument("--geometries", type=int, default=100, help="conformance geometries drawn")
    parser.add_argument("--overhead", type=int, default=300, help="trivial units per executor")
    parser.add_argument("--no-cluster", action="store_true", help="no local Dask cluster")
    parser.add_argument("--no-vllm", action="store_true", help="no conformance units")
    args = parser.parse_args()
    print(machine())
    prove_costs([r for r in args.rules.split(",") if r])
    fuzz_costs(args.batches)
    if not args.no_vllm:
        conformance_costs(args.geometries)
    overhead(args.overhead, not args.no_cluster)
    print(f"\n{machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
