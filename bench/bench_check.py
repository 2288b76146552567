"""kvproof check of the GLM-5.3-Flash TP4 record set (4 workers + scheduler) against a bare json.load.

Run: python bench/bench_check.py [--rounds N] [--strict] [--instructions]

Two measurements, each interleaved round by round with its baseline so that load on a shared
machine hits both alike, and printed as medians and the ratio of the medians:

* in process: ``kvproof.commands.check.evaluate(files)`` (strict load + every rule) against
  ``json.load`` of the same files (open + parse, nothing else); warm, after one untimed call;
* as a process: ``python -m kvproof check FILES`` against ``python -c "json.load each file"``
  (both pay interpreter start-up; kvproof also pays its imports).

The target (issue #8) is check / json.load <= 5 in process. --strict exits 1 when it is missed.

--instructions also counts the instructions of one call of each in-process case under valgrind's
cachegrind (the difference of a run with three calls and a run with one, halved): a measure that
other load on a shared machine does not move. It needs valgrind and takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from _common import ROOT, glm_records, interleaved, interleaved_with_cpu, machine, median_ms, spread

TARGET = 5.0
CASES = ("json.load", "evaluate", "load only", "rules only")


def _cases(files: list) -> dict:
    from kvproof.commands.check import evaluate
    from kvproof.models.documents import RankTwins, load_path
    from kvproof.rules.check import check

    names = [str(f) for f in files]
    shared = RankTwins()  # loaded as evaluate loads them: the checker shares the TP-rank twins' findings
    documents = [load_path(f, ranks=shared) for f in files]

    def load_only() -> list:
        ranks = RankTwins()  # as evaluate loads a set: TP-rank twins structured once
        return [load_path(f, ranks=ranks) for f in files]

    def json_load() -> None:
        for f in files:
            with open(f, "rb") as fh:
                json.load(fh)

    return {
        "json.load": json_load,
        "evaluate": lambda: evaluate(names),
        "load only": load_only,
        "rules only": lambda: check(documents),
    }


def _worker(case: str, calls: int) -> int:
    """Hidden mode for --instructions: one warm-up call, then ``calls`` timed calls of a case."""
    fn = _cases(glm_records())[case]
    fn()
    for _ in range(calls):
        fn()
    return 0


def instructions() -> dict[str, int]:
    """Instructions of one call of each case, counted by cachegrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind")

    def count(case: str, calls: int) -> int:
        proc = subprocess.run(
            [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, __file__, "--worker", case, str(calls)],
            capture_output=True, text=True, cwd=ROOT, check=True)
        return int(re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr).group(1).replace(",", ""))

    jobs = [(case, calls) for case in CASES for calls in (1, 3)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        counted = dict(zip(jobs, pool.map(lambda job: count(*job), jobs)))
    return {case: (counted[(case, 3)] - counted[(case, 1)]) // 2 for case in CASES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="in-process rounds (default 200)")
    parser.add_argument("--process-rounds", type=int, default=15, help="process rounds (default 15)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the in-process ratio exceeds 5")
    parser.add_argument("--instructions", action="store_true", help="also count instructions under cachegrind")
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return _worker(args.worker[0], int(args.worker[1]))

    files = glm_records()
    names = [str(f) for f in files]
    size = sum(f.stat().st_size for f in files)
    print(machine())
    print(f"input: {len(files)} GLM-5.3-Flash TP4 records ({', '.join(f.name for f in files)}), {size:,} bytes")
    print()

    # ---------------------------------------------------------------- in process
    start = time.perf_counter()
    from kvproof.commands.check import evaluate
    from kvproof.rules.check import check  # noqa: F401 - imported here to time the imports

    imported = time.perf_counter() - start
    start = time.perf_counter()
    results = evaluate(names)
    cold = time.perf_counter() - start
    bad = [(r.file, r.status, [d.render() for d in r.diagnostics]) for r in results if r.status != "accepted"]
    if bad:
        print(f"the GLM records are not accepted, the benchmark would measure the wrong thing: {bad}")
        return 1
    samples, cpu = interleaved_with_cpu(_cases(files), args.rounds)
    base = median_ms(samples["json.load"])
    cpu_base = median_ms(cpu["json.load"])
    ratio = median_ms(samples["evaluate"]) / base
    cpu_ratio = median_ms(cpu["evaluate"]) / cpu_base
    print("in process (warm; kvproof.commands.check.evaluate vs json.load of the same files)")
    for name, values in samples.items():
        print(f"  {name:<11} wall {spread(values)}  x{median_ms(values) / base:5.2f}   "
              f"cpu median {median_ms(cpu[name]):7.2f} ms  x{median_ms(cpu[name]) / cpu_base:5.2f}")
    print(f"  first call (imports excluded: {imported * 1000:.0f} ms): evaluate {cold * 1000:.1f} ms (hook generation)")
    print(f"  RATIO check/json.load = {ratio:.2f} wall, {cpu_ratio:.2f} cpu  (target <= {TARGET:g}: "
          f"{'met' if ratio <= TARGET else 'NOT MET'})")
    print()

    # ---------------------------------------------------------------- as a process
    baseline_cmd = [sys.executable, "-c", "import json, sys\nfor p in sys.argv[1:]:\n    json.load(open(p, 'rb'))", *names]
    check_cmd = [sys.executable, "-m", "kvproof", "check", *names]
    probe = subprocess.run(check_cmd, capture_output=True, text=True, cwd=ROOT)
    if probe.returncode != 0:
        print(f"kvproof check exited {probe.returncode}: {probe.stdout}{probe.stderr}")
        return 1

    def run(cmd: list[str]):
        return lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)

    process = interleaved({"python json.load": run(baseline_cmd), "kvproof check": run(check_cmd)}, args.process_rounds)
    pbase = median_ms(process["python json.load"])
    pratio = median_ms(process["kvproof check"]) / pbase
    print("as a process (interpreter start-up included in both)")
    for name, values in process.items():
        print(f"  {name:<16} {spread(values)}")
    print(f"  RATIO kvproof check process / json.load process = {pratio:.2f}")
    print(f"  kvproof check process minus json.load process = {median_ms(process['kvproof check']) - pbase:.1f} ms (imports + check)")
    print()
    counted = None
    if args.instructions:
        counted = instructions()
        print("instructions per call (cachegrind; independent of other load)")
        for case in CASES:
            print(f"  {case:<11} {counted[case]:>13,}  x{counted[case] / counted['json.load']:5.2f}")
        print(f"  RATIO check/json.load = {counted['evaluate'] / counted['json.load']:.2f} in instructions")
        print()
    print(f"SUMMARY in-process ratio {ratio:.2f} wall / {cpu_ratio:.2f} cpu (evaluate {median_ms(samples['evaluate']):.2f} ms, "
          f"json.load {base:.2f} ms); "
          f"process ratio {pratio:.2f} ({median_ms(process['kvproof check']):.0f} ms vs {pbase:.0f} ms)")
    return 1 if args.strict and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
