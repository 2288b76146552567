"""Wall time of ``kvproof prove --all`` and of one rule (issue #6).

Run: python bench/bench_prove.py [--rule BO007 --rule VC007] [--jobs 2] [--max-shape ...] [--skip-all] [--cache]

Prints, for one fresh process each (so nothing is cached between them):

* ``prove RULE``: one rule with its candidate shapes (default BO007, reachable in the first shape,
  and VC007, the seed-001 refusal expected dead: every shape of the bound is solved);
* ``prove --all``: every rule of the registry with ``--jobs`` processes (``KVPROOF_JOBS``; default
  2, the machine's two cores), the verdict counts, and the five slowest rules;
* the ratio of the two;
* ``--cache``: ``prove --all --cache DIR`` cold (a fresh folder) and warm (the same folder again),
  the CPU time of each (children included), whether the two reports (and one without the cache)
  are byte-identical once the clock (``seconds``) is dropped, and the cold / warm ratio.

Wall times on a shared machine move with its load; the verdicts do not (the z3 resource limit is
deterministic).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import ROOT, machine


def run(args: list[str], jobs: int = 1) -> tuple[float, dict, int]:
    import os

    start = time.perf_counter()
    env = dict(os.environ, KVPROOF_JOBS=str(jobs))
    proc = subprocess.run([sys.executable, "-m", "kvproof", "prove", *args, "--format", "json", "--timings"],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"rules": [], "error": proc.stderr[-2000:]}
    return seconds, report, proc.returncode


def cached(bound: list[str], jobs: int) -> None:
    """Cold and warm ``prove --all --cache DIR`` in one run: wall, CPU, same report, ratio."""
    import os
    import resource
    import tempfile

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def without_clock(report: dict) -> list:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in report.get("rules", [])]

    with tempfile.TemporaryDirectory() as folder:
        reports = []
        for label in ("cold", "warm"):
            before = cpu()
            seconds, report, code = run(["--all", *bound, "--cache", folder], jobs)
            reports.append((seconds, cpu() - before, report, code))
            print(f"prove --all --cache (jobs {jobs}) {label}: {seconds:8.2f} s wall  {cpu() - before:7.2f} s CPU  "
                  f"exit {code}  load {os.getloadavg()[0]:.2f}")
        (cold, cold_cpu, cold_report, _), (warm, warm_cpu, warm_report, _) = reports
        slowest = sorted(warm_report.get("rules", []), key=lambda r: -r.get("seconds", 0))[:3]
        print("   warm, slowest re-checks: " + ", ".join(f"{r['rule']} {r['seconds']:.2f} s" for r in slowest))
        same = without_clock(cold_report) == without_clock(warm_report) and bool(cold_report.get("rules"))
        print(f"   cold and warm reports identical: {same}")
        print(f"ratio cold / warm: {cold / warm:.1f} wall, {cold_cpu / max(warm_cpu, 1e-9):.1f} CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", action="append", default=None, help="a rule to time alone (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="processes for prove --all (default 2)")
    parser.add_argument("--max-shape", default=None)
    parser.add_argument("--skip-all", action="store_true", help="only the one rule")
    parser.add_argument("--cache", action="store_true", help="only prove --all --cache: cold, then warm")
    options = parser.parse_args()
    bound = ["--max-shape", options.max_shape] if options.max_shape else []
    rules = options.rule or ["BO007", "VC007"]

    print(machine())
    if options.cache:
        cached(bound, options.jobs)
        return 0
    one = 0.0
    for rule in rules:
        one, report, code = run([rule, *bound])
        (result,) = report["rules"] or [{"verdict": "?", "shapes_tried": 0}]
        print(f"prove {rule}: {one:8.2f} s  verdict {result['verdict']}  shapes {result.get('shapes_tried')}  "
              f"solver {result.get('seconds', 0):.2f} s  exit {code}")
    if options.skip_all:
        return 0
    total, report, code = run(["--all", *bound], options.jobs)
    rules = report["rules"]
    counts: dict[str, int] = {}
    for r in rules:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"prove --all (jobs {options.jobs}): {total:8.2f} s  {len(rules)} rules  "
          + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) + f"  exit {code}")
    for r in sorted(rules, key=lambda r: -r["seconds"])[:5]:
        print(f"   {r['rule']}  {r['seconds']:7.2f} s  {r['verdict']}  shapes {r['shapes_tried']}")
    print(f"ratio --all / {options.rule[-1] if options.rule else 'VC007'}: {total / one:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
