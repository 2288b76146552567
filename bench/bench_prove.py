"""Wall time of ``kvproof prove --all`` and of one rule (issue #6).

Run: python bench/bench_prove.py [--rule PF011] [--max-shape groups=2,layers=2,workers=1,mutations=60] [--skip-all]

Prints, for one fresh process each (so nothing is cached between them):

* ``prove RULE``: one rule with its candidate shapes (default PF011, a dead rule: every shape of
  the bound is solved);
* ``prove --all``: every rule of the registry, the verdict counts, and the five slowest rules;
* the ratio of the two.

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


def run(args: list[str]) -> tuple[float, dict, int]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kvproof", "prove", *args, "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"rules": [], "error": proc.stderr[-2000:]}
    return seconds, report, proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rule", default="PF011")
    parser.add_argument("--max-shape", default=None)
    parser.add_argument("--skip-all", action="store_true", help="only the one rule")
    options = parser.parse_args()
    bound = ["--max-shape", options.max_shape] if options.max_shape else []

    print(machine())
    one, report, code = run([options.rule, *bound])
    (result,) = report["rules"] or [{"verdict": "?", "shapes_tried": 0}]
    print(f"prove {options.rule}: {one:8.2f} s  verdict {result['verdict']}  shapes {result.get('shapes_tried')}  "
          f"exit {code}")
    if options.skip_all:
        return 0
    total, report, code = run(["--all", *bound])
    rules = report["rules"]
    counts: dict[str, int] = {}
    for r in rules:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(f"prove --all: {total:8.2f} s  {len(rules)} rules  "
          + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) + f"  exit {code}")
    for r in sorted(rules, key=lambda r: -r["seconds"])[:5]:
        print(f"   {r['rule']}  {r['seconds']:7.2f} s  {r['verdict']}  shapes {r['shapes_tried']}")
    print(f"ratio --all / {options.rule}: {total / one:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
