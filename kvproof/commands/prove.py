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
    executor: str | None = None,
    cache_dir: str | None = None,
) -> int:
    from ..rules.registry import all_rules as registry
    from ..solver.calls import Config
    from ..solver.prove import Prover, to_json
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

    cache = None
    if cache_dir and not redundant:  # --redundant is not cached
        if Path(cache_dir).exists() and not Path(cache_dir).is_dir():
            sys.stderr.write(f"kvproof prove: --cache {cache_dir}: exists and is not a folder\n")
            return EXIT_USAGE
        from ..solver.proof_cache import ProofCache
        from ..solver.shapes import examples_dir

        cache = ProofCache(cache_dir, rules, bound, config, prover.examples or examples_dir())

    from ..executor import ExecutorError, executor_for

    try:
        with executor_for(executor, jobs if len(selected) > 1 else 1) as pool:
            if redundant:
                return _redundant(prover, selected, fmt, pool, jobs, timings)
            results = _proved(prover, selected, fmt, pool, jobs, witness_dir, timings, cache)
    except ExecutorError as exc:  # no cluster extra or scheduler; a worker with other code or examples
        sys.stderr.write(f"kvproof prove: {exc}\n")
        return EXIT_USAGE
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


def _proved(prover, selected, fmt: str, pool, jobs: int, witness_dir: str | None, timings: bool, cache=None) -> list:
    from ..solver.prove import summary_line
    from ..solver.witnesses import write_documents

    results = []
    for result in tracked(_results(prover, selected, "prove", pool, jobs, cache), "prove", len(selected), _rule,
                          finished=True):
        if witness_dir and result.verdict == "reachable" and result.documents:
            result.witness = write_documents(Path(witness_dir), result.rule, result.documents)
        results.append(result)
        if fmt == "text":
            sys.stdout.write(summary_line(result, timings) + "\n")
            sys.stdout.flush()
    return results


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


# -- units: rules are independent questions, one rule per unit (kvproof.executor) --

def prove_unit(kind: str, rule_ids: tuple[str, ...], bound, config, examples: str | None,
               digest: str | None = None, proofs: bool = False) -> list:
    """The verdicts (``kind`` prove) or redundancy of these rules, in registry order, in whichever
    process runs them: the prover of this process for these settings (the parent's, inherited by a
    fork, or built here), which closes the pins of the kinds they read lazily. A rule is never
    split: its shapes are asked in one order, the cores of earlier shapes steering later ones, so
    its result does not depend on where or beside which rules it runs. ``digest``: the example
    documents the submitting process reads; a worker that reads others refuses. ``proofs``: the
    run keeps a proof cache: a dead verdict's stored proof is written here, beside the search
    that found it (``RuleResult.proof``), not in the submitting process after every unit."""
    from ..executor import ExecutorError, process_state
    from ..solver.prove import Prover

    if digest is not None and process_state(("kvproof.prove.examples", examples),
                                            lambda: _examples_digest(examples)) != digest:
        raise ExecutorError(f"this worker's example documents ({examples or 'the bundled examples or KVPROOF_EXAMPLES'})"
                            " differ from the submitting process's: the shapes would differ (docs/scale.md)")
    prover = process_state(_prover_key(bound, config, examples),
                           lambda: Prover(None, bound, config, Path(examples) if examples else None))
    by_id = {r.id: r for r in prover.rules}
    prover.keep_proofs = proofs
    results = [prover.prove(by_id[i]) if kind == "prove" else prover.redundancy(by_id[i]) for i in rule_ids]
    if proofs and kind == "prove":
        from ..solver.core_check import proof_payload

        for result in results:
            if result.verdict == "dead" and result.steps:
                result.proof = proof_payload(by_id[result.rule], prover.rules, prover.config, result.steps) or False
                # the questions' z3 terms stay here: the result travels to the submitting process
                result.steps = [(shape, pins, core, None) for shape, pins, core, _question in result.steps]
    return results


def _prover_key(bound, config, examples: str | None) -> tuple:
    import attrs

    return "kvproof.prove.prover", bound, attrs.astuple(config), examples


def _examples_digest(examples: str | None) -> str:
    from ..executor import folder_digest
    from ..solver.shapes import examples_dir

    return folder_digest(Path(examples) if examples else examples_dir(), "*.json")


def _results(prover, selected, kind: str, pool, jobs: int = 1, cache=None):
    """Results in registry order, from ``pool`` (kvproof.executor): here, from local processes
    forked from this one, or from a cluster's workers; the order and the bytes of the output do
    not change.

    Locally the unit is a group of rules (:func:`kvproof.solver.prove.job_groups`): the rules
    reading a document kind share one process, which closes that kind's pins once (most of a
    kind's cost); a parent closing every kind before it forks would pay them serially. On a
    cluster the unit is one rule, each worker closing the pins of the kinds it meets.

    ``cache`` (:class:`kvproof.solver.proof_cache.ProofCache`): the rules with a believed entry
    are answered from it here, before any shape is built; the others are proved and stored."""
    from ..executor import InProcess, results_in_order, seeded
    from ..solver.prove import job_groups

    examples = str(prover.examples) if prover.examples else None
    remote = getattr(pool, "kvproof_address", None) is not None
    ready: dict[str, object] = {}
    if cache is not None:
        ready.update(_cached(cache, selected, None if remote or isinstance(pool, InProcess) else pool, jobs,
                             (_prover_key(prover.bound, prover.config, examples), prover)))
    proved = [rule for rule in selected if rule.id not in ready]

    digest = _examples_digest(examples) if remote else None
    first = None  # job_groups gives its units in the order to submit them
    if not proved:
        groups = []
    elif isinstance(pool, InProcess) or remote or jobs <= 1:  # one rule a unit: results as they come
        groups = [[rule] for rule in proved]
        # a rule expected dead searches every shape of the bound (the long pole): it goes first
        first = sorted(range(len(groups)), key=lambda i: groups[i][0].expect != "dead")
    else:
        groups = job_groups(prover, proved, jobs)
    units = [(kind, tuple(r.id for r in group), prover.bound, prover.config, examples, digest, cache is not None)
             for group in groups]
    pending = iter(selected)
    upcoming = next(pending, None)

    def drain():  # yield, in registry order, every result whose predecessors are in
        nonlocal upcoming
        while upcoming is not None and upcoming.id in ready:
            yield ready.pop(upcoming.id)
            upcoming = next(pending, None)

    yield from drain()
    if not units:
        return
    with seeded(_prover_key(prover.bound, prover.config, examples), prover):
        for group, results in zip(groups, results_in_order(pool, prove_unit, units, first)):
            ready.update({r.id: result for r, result in zip(group, results)})
            if cache is not None:
                for result in results:
                    _store(cache, result)
            yield from drain()


def _cached(cache, selected, pool=None, jobs: int = 1, prover_state: tuple | None = None) -> dict:
    """The believed entries of the proof cache (each re-checked: a witness replayed through the
    checker, a dead proof's cores solved again), by rule ID; ``seconds`` is the time the re-check
    took. ``pool``: the local processes (``--jobs``) the re-checks are spread over, a dead proof's
    shapes split among them (its re-check is most of a warm run). ``prover_state``: the parent's
    prover, seeded for the workers these re-checks fork (they prove the rules not answered)."""
    import contextlib
    import time

    from ..executor import results_in_order, seeded
    from ..solver.prove import RuleResult

    entries = {}
    for rule in selected:
        entry = cache.read(rule)
        if entry is not None:
            entries[rule.id] = (rule, entry)
    if not entries:
        return {}
    by_rule: dict[str, list[tuple[bool, float]]] = {}
    if pool is None or jobs <= 1:
        for rule_id, (rule, entry) in entries.items():
            start = time.perf_counter()
            by_rule[rule_id] = [(cache.verify(rule, entry), time.perf_counter() - start)]
    else:
        units: list[tuple] = []
        plain: list[tuple] = []
        for rule_id, (_rule, entry) in entries.items():
            parts = min(jobs, cache.parts(entry))
            if entry["result"]["verdict"] == "dead":
                units += [(((rule_id, part, parts),),) for part in range(parts)]
            else:
                plain.append((rule_id, 0, 1))
        units += [(tuple(plain[index::jobs]),) for index in range(jobs) if plain[index::jobs]]
        key = ("kvproof.prove.cache", str(cache.root))
        with contextlib.ExitStack() as stack:  # the workers fork with these
            stack.enter_context(seeded(key, (cache, entries)))
            if prover_state is not None:
                stack.enter_context(seeded(*prover_state))
            for unit, answers in zip(units, results_in_order(pool, verify_unit, [(key, *u) for u in units])):
                for (rule_id, _part, _parts), answer in zip(unit[0], answers):
                    by_rule.setdefault(rule_id, []).append(answer)
    found = {}
    for rule_id, (rule, entry) in entries.items():
        answers = by_rule[rule_id]
        if all(ok for ok, _ in answers):
            result = cache.accept(rule, entry, RuleResult)
            result.seconds = sum(seconds for _, seconds in answers)
            found[rule_id] = result
        else:
            cache.rejected.append(rule_id)
    return found


def verify_unit(key, pieces: tuple) -> list[tuple[bool, float]]:
    """In a local worker: the re-checks ``(rule ID, part, parts)`` of the entries the parent read
    (inherited through the fork, :func:`_cached`), each with its seconds."""
    import time

    from ..executor import process_state

    def missing():
        raise RuntimeError("the proof cache entries were not inherited from the parent process")

    cache, entries = process_state(key, missing)
    out = []
    for rule_id, part, parts in pieces:
        rule, entry = entries[rule_id]
        start = time.perf_counter()
        out.append((cache.verify(rule, entry, part, parts), time.perf_counter() - start))
    return out


def _store(cache, result) -> None:
    """Keep a result in the proof cache; a cache that cannot be written costs a warning, not the run."""
    from ..output import OutputError, failure

    try:
        cache.store(result)
    except (OSError, OutputError) as exc:
        sys.stderr.write(f"kvproof prove: proof cache not written: {failure(exc, cache.root)}\n")


def _redundant(prover, selected, fmt: str, pool, jobs: int, timings: bool = False) -> int:
    import json

    results = []
    for result in tracked(_results(prover, selected, "redundancy", pool, jobs), "redundancy", len(selected), _rule,
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
