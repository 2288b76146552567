"""Examples per second of the parity property (concrete verdict == z3 verdict for every rule).

Run: python bench/bench_parity.py [--examples N] [--seed S] [--sets DIR ...]

The shapes (shrunk record sets of the examples, each built once as a symbolic document set with
every rule encoded) are built first and timed apart; then N Hypothesis-drawn inputs are compared,
each over every rule instance of its shape. Printed: shape build time, inputs per second, rule
instances per second, and the share of the time spent in z3's evaluation of the terms (the rest:
drawing values, writing and loading the documents, the concrete bodies).
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import ROOT, machine

DEFAULT_SETS = ["examples/minimax-m27-tp4", "examples/gemma-like-swa", "examples/glm53flash-tp4"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="parity inputs (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", nargs="*", default=DEFAULT_SETS, help="record-set directories (default: the examples)")
    args = parser.parse_args()

    from kvproof.fuzz import parity
    from kvproof.fuzz.campaigns import collect_inputs
    from kvproof.rules.registry import all_rules

    print(machine())
    rules = all_rules()
    record_sets, _ = collect_inputs([str(ROOT / s) for s in args.sets])
    templates = parity.shapes_from_sets(record_sets)
    start = time.perf_counter()
    shapes = [parity.build_shape(name, documents, rules) for name, documents in templates]
    built = time.perf_counter() - start
    leaves = sum(len(s.leaves) for s in shapes)
    print(f"input: {len(shapes)} shapes from {', '.join(args.sets)} ({leaves} symbolic leaves), {len(rules)} rules")
    print(f"shapes built and encoded in {built:.2f} s ({built / max(len(shapes), 1) * 1000:.0f} ms per shape)")

    # The share of the time spent in z3's evaluation of the terms.
    timings = {"z3": 0.0}
    original_evaluate = parity._evaluate

    def timed_evaluate(*a, **k):
        t = time.perf_counter()
        try:
            return original_evaluate(*a, **k)
        finally:
            timings["z3"] += time.perf_counter() - t

    parity._evaluate = timed_evaluate
    report = parity.run_parity(shapes, rules, args.examples, args.seed)
    parity._evaluate = original_evaluate
    rate = report.examples / report.seconds if report.seconds else 0.0
    print(f"parity: {report.examples} inputs in {report.seconds:.2f} s = {rate:.1f} inputs/s, "
          f"{report.instances / report.seconds if report.seconds else 0:.0f} rule instances/s "
          f"({report.instances / max(report.examples, 1):.0f} instances per input)")
    print(f"  z3 evaluation {timings['z3'] / report.seconds * 100 if report.seconds else 0:.0f}% of the time; "
          f"differences found: {len(report.failures)} unexplained, {len(report.mismatches) - len(report.failures)} known")
    print(f"SUMMARY parity {rate:.1f} inputs/s over {len(shapes)} shapes (build {built:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
