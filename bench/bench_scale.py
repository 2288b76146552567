"""Cost of kvproof check against the pool size: GLM-shaped records at 1e3 and at 1e12 pool blocks.

Run: python bench/bench_scale.py [--rounds N] [--strict]

The GLM-5.3-Flash TP4 record set (4 workers + scheduler) is rewritten in a temporary directory
with ``num_blocks`` = N and every value that depends on it: storage and tensor sizes
(N x bytes per pool block), the block axis of every tensor view (N x tokens per block over the
kernel block for an allocation-time split, (N - 1) x stride + pages per block for a packed
cache), the scheduler's ``kv_cache_max_concurrency`` (N / blocks per request, vLLM's float) and
``kv_cache_size_tokens`` (int(concurrency x max_model_len)). Both rewritten sets must be
accepted, so the benchmark times the same work at both sizes.

No rule may enumerate blocks, so the cost must not grow with N. Two measurements:

1. ``kvproof.commands.check.evaluate`` on the rewritten files (strict load + every rule) at
   N = 1e3 and at the largest N whose byte sizes stay within 2**53. At N = 1e12 the storages
   of this model would hold 1e12 x 13,516,800 B = 1.35e19 B, past 2**53, which the loader
   refuses by policy (LD002, printed below), so the file path cannot carry 1e12 blocks.
2. ``kvproof.rules.check.check`` (every rule, no loading) on the documents at N = 1e3 and at
   N = 1e12, structured by a converter whose 2**53 cap is lifted for this measurement only.

--strict exits 1 when a large/small ratio exceeds 1.5 (cost growing with the pool).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

from _common import glm_records, interleaved, machine, median_ms, spread

SMALL, LARGE = 10**3, 10**12
MAX_SAFE_INT = 2**53
FLAT = 1.5


def rewrite(tree: dict, num_blocks: int) -> dict:
    """A copy of a GLM-shaped record with ``num_blocks`` pool blocks and every dependent value."""
    tree = copy.deepcopy(tree)
    cache = tree["cache"]
    old = cache["num_blocks"]
    cache["num_blocks"] = num_blocks

    def scaled(value: int, what: str) -> int:
        if value % old:
            raise SystemExit(f"cannot rewrite {what}={value}: not a multiple of num_blocks {old}")
        return value // old * num_blocks

    if tree["kind"] == "worker":
        for storage in cache["storages"]:
            storage["size_bytes"] = scaled(storage["size_bytes"], "storage size_bytes")
        for tensor in cache["tensor_allocations"]:
            tensor["size"] = scaled(tensor["size"], "tensor size")
        for layer, views in cache["layer_tensors"].items():
            for view in views:
                axis, stride = view["block_axis"], view["kernel_block_stride"]
                if axis != 0:
                    raise SystemExit(f"{layer}: block axis {axis}; this rewrite handles block-outermost views only")
                extent = view["shape"][axis]
                if stride:  # packed cache: (num_blocks - 1) * stride + kernel pages per block
                    per_block = extent - (old - 1) * stride
                    view["shape"][axis] = (num_blocks - 1) * stride + per_block
                else:  # allocation-time split: num_blocks * kernel pages per block
                    view["shape"][axis] = scaled(extent, f"{layer} view extent")
    else:
        concurrency = cache["kv_cache_max_concurrency"]
        per_request = round(old / concurrency)
        if old / per_request != concurrency:
            raise SystemExit(f"cannot rewrite concurrency {concurrency}: not num_blocks / an integer")
        cache["kv_cache_max_concurrency"] = num_blocks / per_request
        cache["kv_cache_size_tokens"] = int(num_blocks / per_request * tree["resolved_config"]["max_model_len"])
    return tree


def largest_integer(tree) -> int:
    if isinstance(tree, dict):
        return max((largest_integer(v) for v in tree.values()), default=0)
    if isinstance(tree, list):
        return max((largest_integer(v) for v in tree), default=0)
    return tree if type(tree) is int else 0


def largest_loadable(trees: list[dict]) -> int:
    """The largest pool whose rewritten records keep every integer within 2**53 (bisection)."""
    low, high = SMALL, LARGE
    while low < high:
        mid = (low + high + 1) // 2
        if max(largest_integer(rewrite(t, mid)) for t in trees) <= MAX_SAFE_INT:
            low = mid
        else:
            high = mid - 1
    return low


def write_set(directory: Path, trees: dict[str, dict], num_blocks: int) -> list[str]:
    directory.mkdir()
    names = []
    for name, tree in trees.items():
        path = directory / name
        path.write_text(json.dumps(rewrite(tree, num_blocks), indent=2) + "\n", encoding="utf-8")
        names.append(str(path))
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="rounds per measurement (default 60)")
    parser.add_argument("--strict", action="store_true", help=f"exit 1 when a ratio exceeds {FLAT}")
    args = parser.parse_args()

    from kvproof.commands.check import evaluate
    from kvproof.models import codec
    from kvproof.models.documents import Document
    from kvproof.models.record import SchedulerRecord, WorkerRecord
    from kvproof.rules.check import check

    originals = {f.name: json.loads(f.read_text()) for f in glm_records()}
    print(machine())
    print(f"input: the {len(originals)} GLM-5.3-Flash TP4 records rewritten to N pool blocks "
          f"(originally {next(iter(originals.values()))['cache']['num_blocks']:,})")
    print()
    status = 0

    with tempfile.TemporaryDirectory(prefix="kvproof-bench-scale-") as tmp:
        # ------------------------------------------------------------ 1. files, load + rules
        n_max = largest_loadable(list(originals.values()))
        small = write_set(Path(tmp) / "small", originals, SMALL)
        large = write_set(Path(tmp) / "large", originals, n_max)
        huge = write_set(Path(tmp) / "huge", originals, LARGE)
        for label, names in (("1e3", small), (f"{n_max:,}", large)):
            refused = [(r.file, [d.render() for d in r.diagnostics]) for r in evaluate(names) if r.status != "accepted"]
            if refused:
                print(f"rewritten records at N={label} are not accepted (update the rewrite): {refused}")
                return 1
        at_huge = [d for r in evaluate(huge) for d in r.diagnostics]
        print(f"kvproof check at N=1e12: {len(at_huge)} diagnostic(s), first: {at_huge[0].render() if at_huge else 'none'}")
        print()

        samples = interleaved({"N=1e3": lambda: evaluate(small), "N=max": lambda: evaluate(large)}, args.rounds)
        ratio = median_ms(samples["N=max"]) / median_ms(samples["N=1e3"])
        print(f"1. kvproof check (evaluate: load + rules) on files, N=1e3 vs N={n_max:,} (largest within 2**53)")
        print(f"  N=1e3          {spread(samples['N=1e3'])}")
        print(f"  N={n_max:<12,} {spread(samples['N=max'])}")
        print(f"  RATIO large/small = {ratio:.3f}")
        print()

        # ------------------------------------------------------------ 2. rules only, 1e12
        conv = codec._make_converter()
        conv.register_structure_hook(int, lambda v, _t: v if type(v) is int and v >= 0 else codec._int(v, _t))
        conv.register_structure_hook(codec.SignedInt, lambda v, _t: v if type(v) is int else codec._signed_int(v, _t))

        def documents(num_blocks: int) -> list:
            out = []
            for name, tree in originals.items():
                tree = rewrite(tree, num_blocks)
                cls = WorkerRecord if tree["kind"] == "worker" else SchedulerRecord
                out.append(Document(tree["kind"], conv.structure(tree, cls), str(Path(tmp) / str(num_blocks) / name)))
            return out

        docs_small, docs_huge = documents(SMALL), documents(LARGE)
        for label, docs in (("1e3", docs_small), ("1e12", docs_huge)):
            found = check(docs)
            if found:
                print(f"rules refuse the rewritten records at N={label} (update the rewrite): {[d.render() for d in found[:5]]}")
                return 1
        rules = interleaved({"N=1e3": lambda: check(docs_small), "N=1e12": lambda: check(docs_huge)}, args.rounds)
        rules_ratio = median_ms(rules["N=1e12"]) / median_ms(rules["N=1e3"])
        print("2. every rule (kvproof.rules.check.check, no loading), N=1e3 vs N=1e12")
        print(f"  N=1e3          {spread(rules['N=1e3'])}")
        print(f"  N=1e12         {spread(rules['N=1e12'])}")
        print(f"  RATIO 1e12/1e3 = {rules_ratio:.3f}")
        print()
        print(f"SUMMARY check on files 1e3 {median_ms(samples['N=1e3']):.2f} ms vs {n_max:,} {median_ms(samples['N=max']):.2f} ms "
              f"(x{ratio:.3f}); rules 1e3 {median_ms(rules['N=1e3']):.2f} ms vs 1e12 {median_ms(rules['N=1e12']):.2f} ms "
              f"(x{rules_ratio:.3f})")
        if args.strict and max(ratio, rules_ratio) > FLAT:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
