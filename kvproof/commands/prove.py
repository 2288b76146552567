"""``kvproof prove``: reachable / dead / unknown for every rule, against its ``expect``."""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_CONTRARY, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def run(
    rule_ids: tuple[str, ...] = (),
    all_rules: bool = False,
    max_shape: str | None = None,
    timeout: float = 10.0,
    fmt: str = "text",
    witness_dir: str | None = None,
    redundant: bool = False,
    rlimit: int | None = None,
    examples: str | None = None,
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

    if redundant:
        return _redundant(prover, selected, fmt)

    results = []
    for rule in selected:
        result = prover.prove(rule)
        if witness_dir and result.verdict == "reachable":
            result.witness = write_witness(Path(witness_dir), result)
        results.append(result)
        if fmt == "text":
            sys.stdout.write(summary_line(result) + "\n")
            sys.stdout.flush()
    if fmt == "json":
        sys.stdout.write(to_json(results))
    else:
        counts = {v: sum(1 for r in results if r.verdict == v) for v in ("reachable", "dead", "unknown", "mismatch", "error")}
        contrary = [r.rule for r in results if r.contrary]
        sys.stdout.write(
            f"{len(results)} rule(s): {counts['reachable']} reachable, {counts['dead']} dead, {counts['unknown']} unknown"
            + (f", {counts['mismatch']} mismatch" if counts["mismatch"] else "")
            + (f", {counts['error']} error" if counts["error"] else "")
            + (f"; contrary to expect: {', '.join(contrary)}" if contrary else "")
            + f" (shape bound {bound.label()})\n"
        )
    if any(r.contrary for r in results):
        return EXIT_CONTRARY
    if any(r.verdict == "unknown" for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def _redundant(prover, selected, fmt: str) -> int:
    import json

    results = []
    for rule in selected:
        result = prover.redundancy(rule)
        results.append(result)
        if fmt == "text":
            if result.verdict == "redundant":
                implied = ", ".join(result.implied_by) or "(the shape's structure)"
                line = f"{result.rule}  redundant  implied by: {implied}"
            elif result.verdict == "needed":
                line = f"{result.rule}  needed     (shape: {result.shape})"
            else:
                line = f"{result.rule}  unknown    {result.reason}"
            sys.stdout.write(f"{line}  {result.seconds:.2f}s\n")
            sys.stdout.flush()
    if fmt == "json":
        sys.stdout.write(json.dumps({"redundant": [r.to_json() for r in results]}, indent=2) + "\n")
    else:
        names = [r.rule for r in results if r.verdict == "redundant"]
        sys.stdout.write(f"{len(names)} redundant rule(s){': ' + ', '.join(names) if names else ''} "
                         f"(shape bound {prover.bound.label()})\n")
    return EXIT_UNKNOWN if any(r.verdict == "unknown" for r in results) else EXIT_OK
