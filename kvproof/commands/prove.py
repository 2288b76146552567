"""``kvproof prove``: reachable / dead / unknown for every rule, against its ``expect``."""

from __future__ import annotations

import sys
from pathlib import Path

from ..terminal import tracked  # a progress bar on stderr when it is a terminal

EXIT_OK, EXIT_CONTRARY, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def _rule(result) -> str:
    return result.rule


def run(
    rule_ids: tuple[str, ...] = (),
    all_rules: bool = False,
    max_shape: str | None = None,
    timeout: float = 60.0,
    fmt: str = "text",
    witness_dir: str | None = None,
    redundant: bool = False,
    rlimit: int | None = None,
    examples: str | None = None,
    jobs: int | None = None,
    timings: bool = False,
) -> int:
    from ..rules.registry import all_rules as registry
    from ..solver.engine import Config
    from ..solver.prove import Prover, summary_line, to_json, write_witness
    from ..solver.shapes import Bound

    rules = registry()
    known = {rule.id for rule in rules}
    if not rule_ids and not all_rules:
        sys.stderr.write("kvproof prove: name rule IDs or pass --all\n")
        return EXIT_USAGE
    unknown_ids = [rule_id for rule_id in rule_ids if rule_id not in known]
    if unknown_ids:
        sys.stderr.write(f"kvproof prove: unknown rule ID(s): {', '.join(unknown_ids)}\n")
        return EXIT_USAGE
    try:
        bound = Bound.parse(max_shape)
    except ValueError as exc:
        sys.stderr.write(f"kvproof prove: {exc}\n")
        return EXIT_USAGE
    if timeout <= 0:
        sys.stderr.write("kvproof prove: --timeout must be positive\n")
        return EXIT_USAGE
    config = Config(timeout=timeout)
    if rlimit is not None:
        config.rlimit = rlimit
    prover = Prover(rules, bound, config, Path(examples) if examples else None)
    selected = [rule for rule in rules if all_rules or rule.id in rule_ids]

    if jobs is None:
        jobs = _jobs_from_env()
    if jobs < 1:
        sys.stderr.write("kvproof prove: --jobs must be at least 1\n")
        return EXIT_USAGE

    if witness_dir:  # refused now, not after minutes of proving (a witness is RULE.json or RULE/)
        from ..output import check_destination

        check_destination(witness_dir, [n for r in selected for n in (f"{r.id}.json", f"{r.id}/w.json")])

    if redundant:
        return _redundant(prover, selected, fmt, jobs, timings)

    results = []
    for result in tracked(_results(prover, selected, "prove", jobs), "prove", len(selected), _rule, finished=True):
        if witness_dir and result.verdict == "reachable":
            result.witness = write_witness(Path(witness_dir), result)
        results.append(result)
        if fmt == "text":
            sys.stdout.write(summary_line(result, timings) + "\n")
            sys.stdout.flush()
    if fmt == "json":
        sys.stdout.write(to_json(results, timings))
    elif fmt in ("sarif", "github"):  # kvproof.report: a finding per contrary or unknown verdict
        from ..report import render_verdicts

        contrary = [r.rule for r in results if r.contrary]
        sys.stdout.write(render_verdicts([(r.rule, r.verdict, r.expect, r.contrary, r.reason or r.verdict, r.witness)
                                          for r in results], fmt, "prove", None,
                                         f"{len(results)} rule(s), contrary to expect: {', '.join(contrary) or 'none'}"))
    else:
        counts = {v: sum(1 for r in results if r.verdict == v) for v in ("reachable", "dead", "unknown", "mismatch", "error")}
        contrary = [r.rule for r in results if r.contrary]
        sys.stdout.write(
            f"{len(results):,} rule(s): {counts['reachable']:,} reachable, {counts['dead']:,} dead, "
            f"{counts['unknown']:,} unknown"
            + (f", {counts['mismatch']:,} mismatch" if counts["mismatch"] else "")
            + (f", {counts['error']:,} error" if counts["error"] else "")
            + (f"; contrary to expect: {', '.join(contrary)}" if contrary else "")
            + f" (shape bound {bound.label()})\n"
        )
    if any(r.contrary for r in results):
        return EXIT_CONTRARY
    if any(r.verdict == "unknown" for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def run_table(timeout: float = 10.0, fmt: str = "text") -> int:
    """``kvproof prove --table``: the state support table (kvproof/solver/state_support.py)."""
    import json

    from ..solver.state_support import prove_table

    result = prove_table(int(timeout * 1000))
    if fmt == "json":
        sys.stdout.write(json.dumps({
            "rows": [{"revision": r.row.revision, "row": r.row.name, "rule": r.row.rule, "verdict": r.verdict,
                      "witness": r.witness} for r in result.rows],
            "overlaps": [{"rows": [a, b], "witness": w} for a, b, w in result.overlaps],
            "totality": result.totality, "proved": result.proved}, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(result.lines()) + "\n")
        reachable = sum(r.verdict == "reachable" for r in result.rows)
        sys.stdout.write(f"{len(result.rows):,} row(s): {reachable:,} reachable, {len(result.overlaps):,} overlap(s), "
                         + ", ".join(f"{rev[:12]} {'total' if v == 'total' else 'not total'}"
                                     for rev, v in result.totality.items()) + "\n")
    if result.proved:
        return EXIT_OK
    undecided = any(r.verdict == "unknown" for r in result.rows) or "unknown" in result.totality.values()
    return EXIT_UNKNOWN if undecided and not result.overlaps else EXIT_CONTRARY


def _jobs_from_env() -> int:
    import os

    try:
        return int(os.environ.get("KVPROOF_JOBS", "1"))
    except ValueError:
        return 1


# -- several processes: rules are independent questions; each process keeps its own sessions --

_WORKER: dict = {}


def _init_worker(bound, config, examples) -> None:
    import signal

    from ..solver.prove import Prover

    # Ctrl-C is the parent's to handle: it ends the workers itself (a worker that raised
    # KeyboardInterrupt would only hand it back as a result and take the next rule)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "parent" in _WORKER:  # forked: the parent's prover, its pins closed and its shapes built
        _WORKER["prover"] = _WORKER["parent"]
        return
    _WORKER["prover"] = Prover(None, bound, config, examples)


def _work(task: tuple):
    kind, rule_id = task
    prover = _WORKER["prover"]
    rule = next(r for r in prover.rules if r.id == rule_id)
    return prover.prove(rule) if kind == "prove" else prover.redundancy(rule)


def _results(prover, selected, kind: str, jobs: int):
    """Results in registry order; with ``jobs`` > 1 from a process pool (each process proves the
    rules handed to it with its own Prover, forked from this one where the platform forks; the
    order and the bytes of the output do not change)."""
    from ..solver.prove import job_groups

    groups = [selected] if jobs <= 1 or len(selected) <= 1 else job_groups(prover, selected, jobs)
    if len(groups) == 1:
        # the pins of the kinds these rules read, once, before the first rule (and the fork);
        # with several groups each process closes the pins of its own kinds (job_groups)
        prover.close_pins(sorted({k for rule in selected for k in rule.over.kinds}))
    if jobs <= 1 or len(selected) <= 1:
        for rule in selected:
            yield prover.prove(rule) if kind == "prove" else prover.redundancy(rule)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    if context is not None:
        _WORKER["parent"] = prover  # every process starts from these shapes
    # one process per group (a pool of one each), or every process for the one group
    pools = [ProcessPoolExecutor(max_workers=jobs if len(groups) == 1 else 1, mp_context=context,
                                 initializer=_init_worker, initargs=(prover.bound, prover.config, prover.examples))
             for _ in groups]
    try:
        # a rule expected dead searches every shape of the bound (the long pole): it goes
        # first. A rule is never split among processes: its shapes are asked in one order,
        # the cores of earlier shapes steering later ones, so its result does not depend on
        # --jobs.
        futures = {rule.id: pool.submit(_work, (kind, rule.id))
                   for pool, group in zip(pools, groups) for rule in sorted(group, key=lambda r: r.expect != "dead")}
        for rule in selected:
            yield futures[rule.id].result()
    except BaseException:
        for pool in pools:
            _stop(pool)  # Ctrl-C (or a broken pipe): no rule is waited for
        raise
    else:
        for pool in pools:
            pool.shutdown(wait=True)
    finally:
        _WORKER.pop("parent", None)


def _stop(pool) -> None:
    """End the pool now: drop the queued rules and terminate the workers this run started (by
    their process ids; a worker inside a z3 call would otherwise finish it first)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=1)


def _redundant(prover, selected, fmt: str, jobs: int = 1, timings: bool = False) -> int:
    import json

    results = []
    for result in tracked(_results(prover, selected, "redundancy", jobs), "redundancy", len(selected), _rule,
                          finished=True):
        results.append(result)
        if fmt == "text":
            if result.verdict == "redundant":
                implied = ", ".join(r for r in result.implied_by if ":" not in r.split(" ")[0]) or "(axioms and structure)"
                line = f"{result.rule}  redundant  implied by: {implied}"
                if result.pinned:
                    line += f" (small-domain values held: SHAPE:pin ×{result.pinned})"
            elif result.verdict == "needed":
                line = f"{result.rule}  needed     (shape: {result.shape})"
            else:
                line = f"{result.rule}  unknown    {result.reason}"
            sys.stdout.write(f"{line}  {result.seconds:.2f}s\n" if timings else f"{line}\n")
            sys.stdout.flush()
    if fmt == "json":
        sys.stdout.write(json.dumps({"redundant": [r.to_json(timings) for r in results]}, indent=2) + "\n")
    else:
        names = [r.rule for r in results if r.verdict == "redundant"]
        sys.stdout.write(f"{len(names):,} redundant rule(s){': ' + ', '.join(names) if names else ''} "
                         f"(shape bound {prover.bound.label()})\n")
    return EXIT_UNKNOWN if any(r.verdict == "unknown" for r in results) else EXIT_OK
