"""A conformance sample as a campaign: generated planning geometries through kvproof's simulator and
vLLM 0.33.0's own planning (tests/conformance/oracle.py), one geometry per unit, on any executor.

    python scripts/conformance-campaign.py --count N [--seed S] [--executor ADDRESS] [--jobs J]
                                           [--format text|json] [--oracle-python PY] [--oracle-dir DIR]

The geometries are ``kvproof.fuzz.strategies.geometries()`` drawn by Hypothesis with the seed (as
``kvproof fuzz`` draws them), duplicates removed. Each unit runs one geometry through
``kvproof.sim.simulate_document`` and the oracle, and compares the two answers key by key exactly as
the conformance suite does (``tests/conformance/test_conformance.py``: ``check``, ``compare``). The
report on stdout is the same bytes for the same seed and count on any executor (results are taken by
unit index); the wall time goes to stderr. Exit 0: every geometry agrees; 1: a disagreement or an
oracle failure (each printed with its geometry); 2: usage (no oracle interpreter, no scheduler).

Every process that runs units needs kvproof, the checkout's ``tests/conformance`` (``--oracle-dir``,
default this checkout's) and vLLM 0.33.0's venv (``--oracle-python``, default ``KVPROOF_ORACLE_PYTHON``,
else this checkout's ``.venv-vllm/bin/python``), at the same paths: on a cluster, on every worker
(docs/scale.md). Each process starts the oracle once (vLLM's import: 8-17 s) and keeps it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORACLE_DIR = ROOT / "tests" / "conformance"


def conformance_unit(geometry: dict, oracle_python: str, oracle_dir: str) -> dict:
    """One geometry through the simulator and the oracle of this process (started at its first
    unit): vLLM's status and the differences, as ``test_conformance.check`` finds them."""
    from kvproof.executor import process_state

    def start():
        if oracle_dir not in sys.path:
            sys.path.insert(0, oracle_dir)
        from oracle_process import OracleProcess  # noqa: PLC0415 - beside the oracle, on this process's path

        return OracleProcess(Path(oracle_python), log_name=f"conformance-campaign.{os.getpid()}.stderr.log")

    oracle = process_state(("conformance-campaign.oracle", oracle_python, oracle_dir), start)
    from kvproof.sim import simulate_document
    from test_conformance import check  # noqa: PLC0415 - importable once start() ran

    answers: list[dict] = []

    class Record:  # check() reports each comparison with vLLM's answer
        def record(self, test, geometry, differences, vllm=None):
            answers.append(vllm)

    try:
        differences = check("campaign", geometry, oracle, simulate_document, Record())
    except (AssertionError, RuntimeError) as exc:  # the oracle failed (compare()), exited or went silent
        return {"status": "oracle_error", "differences": [], "error": str(exc)}
    vllm = json.dumps(answers[0], sort_keys=True).encode()  # in the results' digest: the answers themselves
    return {"status": answers[0].get("status"), "differences": differences, "vllm_sha256": hashlib.sha256(vllm).hexdigest()}


def draw(count: int, seed: int) -> tuple[int, list[dict]]:
    """``count`` geometries drawn with the seed (as ``kvproof fuzz`` draws them), duplicates removed
    in draw order: (drawn, distinct)."""
    from kvproof.fuzz.campaigns import strategy_geometry_examples

    drawn = strategy_geometry_examples(count, seed) if count else []
    if drawn is None:
        raise SystemExit("conformance-campaign: kvproof.fuzz.strategies.geometries() is not available")
    distinct: dict[str, dict] = {}
    for geometry in drawn:
        distinct.setdefault(json.dumps(geometry, sort_keys=True), geometry)
    return len(drawn), list(distinct.values())


def report(args, drawn: int, geometries: list[dict], results: list[dict]) -> tuple[str, int]:
    statuses: dict[str, int] = {}
    for result in results:
        statuses[result["status"]] = statuses.get(result["status"], 0) + 1
    failing = [(i, g, r) for i, (g, r) in enumerate(zip(geometries, results))
               if r["differences"] or r["status"] == "oracle_error"]
    digest = hashlib.sha256(json.dumps(results, sort_keys=True).encode()).hexdigest()
    code = 1 if failing else 0
    if args.format == "json":
        return json.dumps({"seed": args.seed, "count": args.count, "drawn": drawn, "geometries": len(geometries),
                           "vllm_status": dict(sorted(statuses.items())),
                           "agreements": len(geometries) - len(failing), "results_sha256": digest,
                           "failures": [{"index": i, "geometry": g, **r} for i, g, r in failing]},
                          indent=2) + "\n", code
    lines = [f"conformance campaign: seed {args.seed}, count {args.count:,}: {drawn:,} geometries drawn, "
             f"{len(geometries):,} distinct (kvproof.fuzz.strategies.geometries)",
             "vLLM 0.33.0: " + ", ".join(f"{n:,} {s}" for s, n in sorted(statuses.items())),
             f"agreements: {len(geometries) - len(failing):,} of {len(geometries):,}",
             f"results sha256: {digest}"]
    for index, geometry, result in failing:
        lines += ["", f"{'ORACLE ERROR' if result['status'] == 'oracle_error' else 'DISAGREEMENT'} at geometry {index}",
                  "  geometry: " + json.dumps(geometry)]
        if result.get("error"):
            lines.append(f"  {result['error']}")
        lines += [f"  {d['path']}: vLLM {d['vllm']} | kvproof {d['kvproof']}" for d in result["differences"]]
    lines += ["", f"FAILED: {len(failing):,} geometr{'y' if len(failing) == 1 else 'ies'}" if failing
              else "ok: no disagreement"]
    return "\n".join(lines) + "\n", code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, required=True, help="geometries drawn (duplicates are run once)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis' seed: the same seed gives the same report")
    parser.add_argument("--executor", default="local", metavar="ADDRESS",
                        help="local (the --jobs pool) or a Dask scheduler, e.g. tcp://host:8786 (docs/scale.md)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="processes of the local pool")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--oracle-python", default=os.environ.get("KVPROOF_ORACLE_PYTHON")
                        or str(ROOT / ".venv-vllm" / "bin" / "python"),
                        help="vLLM 0.33.0's interpreter on every process that runs units "
                             "[default: KVPROOF_ORACLE_PYTHON, else .venv-vllm/bin/python]")
    parser.add_argument("--oracle-dir", default=str(ORACLE_DIR),
                        help="tests/conformance of a kvproof checkout, on every process that runs units")
    args = parser.parse_args(argv)
    if args.count < 0 or args.jobs < 1:
        parser.error("--count must be at least 0 and --jobs at least 1")
    if args.executor == "local" and not Path(args.oracle_python).exists():
        parser.error(f"--oracle-python {args.oracle_python}: absent (bash scripts/conformance-setup.sh makes it)")
    if not (Path(args.oracle_dir) / "oracle.py").is_file() and args.executor == "local":
        parser.error(f"--oracle-dir {args.oracle_dir}: no oracle.py there")

    from kvproof.executor import ExecutorError, executor_for, results_in_order
    from kvproof.terminal import tracked

    start = time.perf_counter()
    drawn, geometries = draw(args.count, args.seed)
    units = [(geometry, args.oracle_python, args.oracle_dir) for geometry in geometries]
    try:
        with executor_for(args.executor, args.jobs) as pool:
            results = list(tracked(results_in_order(pool, conformance_unit, units), "conformance", len(units),
                                   lambda r: r["status"], finished=True))
    except ExecutorError as exc:
        sys.stderr.write(f"conformance-campaign: {exc}\n")
        return 2
    text, code = report(args, drawn, geometries, results)
    sys.stdout.write(text)
    sys.stderr.write(f"conformance-campaign: {len(units):,} geometries in {time.perf_counter() - start:.1f} s "
                     f"on {args.executor}{f' (--jobs {args.jobs})' if args.executor == 'local' else ''}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
