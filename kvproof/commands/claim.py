"""``kvproof claim``: prove an invariant over accepted documents or print a counterexample."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..output import check_destination
from ..report import RuleInfo, render_verdicts
from ..solver.calls import Config
from ..solver.claims import expression_claim, load_claims_file, prove_claim, shipped_claims
from ..solver.expression import ExpressionError
from ..solver.prove import Prover
from ..solver.shapes import Bound
from ..solver.witnesses import write_documents
from ..terminal import tracked  # a progress bar on stderr when it is a terminal

EXIT_OK, EXIT_REFUTED, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def run(
    expression: str | None,
    kind: str | None = None,
    claims_file: str | None = None,
    all_claims: bool = False,
    max_shape: str | None = None,
    timeout: float = 10.0,
    fmt: str = "text",
    counterexample_dir: str | None = None,
    rlimit: int | None = None,
    examples: str | None = None,
    timings: bool = False,
) -> int:
    if sum(bool(x) for x in (expression, claims_file, all_claims)) != 1:
        sys.stderr.write("kvproof claim: give one of EXPRESSION, --claims FILE or --all\n")
        return EXIT_USAGE
    try:
        bound = Bound.parse(max_shape)
    except ValueError as exc:
        sys.stderr.write(f"kvproof claim: {exc}\n")
        return EXIT_USAGE
    try:
        if expression:
            claims = [expression_claim(expression, kind or "profile")]
        elif claims_file:
            claims = load_claims_file(claims_file)
        else:
            claims = shipped_claims()
    except ExpressionError as exc:
        sys.stderr.write(f"kvproof claim: EXPRESSION {exc.render()}\n")
        return EXIT_USAGE
    except (SyntaxError, OSError, ValueError) as exc:
        sys.stderr.write(f"kvproof claim: {exc}\n")
        return EXIT_USAGE
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's claims file raised: user code, not a kvproof bug
        sys.stderr.write(f"kvproof claim: loading the claims raised {type(exc).__name__}: {exc}\n")
        return EXIT_USAGE
    if kind and not expression:
        claims = [c for c in claims if c.kind == kind]
    if not claims:  # nothing checked is nothing proved
        source = f"--claims {claims_file}" if claims_file else "the shipped claims"
        reason = f"{source} declare no claim{f' of kind {kind}' if kind else ''}: nothing was checked"
        if fmt == "json":
            sys.stdout.write(json.dumps({"claims": [], "verdict": "unknown", "reason": reason}, indent=2) + "\n")
        else:
            sys.stdout.write(f"unknown: {reason}\n")
        return EXIT_UNKNOWN
    if counterexample_dir:  # refused now, not after the claims are decided

        check_destination(counterexample_dir, [n for c in claims for n in (f"{c.id}.json", f"{c.id}/c.json")])
    config = Config(timeout=timeout)
    if rlimit is not None:
        config.rlimit = rlimit
    prover = Prover(bound=bound, config=config, examples=Path(examples) if examples else None)
    results = []
    for target in tracked(claims, "claim", len(claims), lambda c: c.id, finished=False):
        try:
            result = prove_claim(target, prover)
        except ExpressionError as exc:
            what = "EXPRESSION" if expression else target.id
            sys.stderr.write(f"kvproof claim: {what} {exc.render()}\n")
            return EXIT_USAGE
        if result.documents and counterexample_dir:
            result.counterexample = write_documents(Path(counterexample_dir), result.claim, result.documents)
        results.append(result)
        if fmt == "text":
            clock = f"  {result.seconds:6.2f}s" if timings else ""
            line = f"{result.claim}  {result.verdict:<8} (expect {result.expect}){clock}  {result.text}"
            sys.stdout.write(line + "\n")
            if result.verdict == "refuted":
                where = result.counterexample or "(pass -o DIR to keep it)"
                sys.stdout.write(f"       counterexample ({result.shape}): {where}\n")
                if not result.counterexample:
                    for file, text in result.documents:
                        sys.stdout.write(f"       --- {file}\n")
                        sys.stdout.write("".join(f"       {line}\n" for line in text.splitlines()))
            elif result.verdict != "holds":
                sys.stdout.write(f"       {result.reason}\n")
    if fmt == "json":
        sys.stdout.write(json.dumps({"claims": [r.to_json(timings) for r in results]}, indent=2) + "\n")
    elif fmt in ("sarif", "github"):
        sys.stdout.write(render_findings(results, fmt))
    else:  # the verdict line (all --quiet keeps)
        sys.stdout.write(summary(results) + "\n")
    if any(r.contrary for r in results):
        return EXIT_REFUTED
    if any(r.verdict == "unknown" for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def render_findings(results: list, fmt: str) -> str:
    """The SARIF or GitHub report of a claim run (kvproof.report.render_verdicts)."""
    rules = {r.claim: RuleInfo(r.claim, "claim", r.text, f"{r.text} (expect {r.expect})", {"expect": r.expect})
             for r in results}
    items = [(r.claim, r.verdict, r.expect, r.contrary, f"{r.text}; {r.reason}" if r.reason else r.text, r.counterexample)
             for r in results]
    return render_verdicts(items, fmt, "claim", list(rules.values()), summary(results, person=False))


def summary(results: list, person: bool = True) -> str:
    """The verdict line; ``person``: counts with thousands separators (not in sarif/github)."""
    n = "{:,}".format if person else str
    return (f"{n(len(results))} claim(s): {n(sum(r.verdict == r.expect for r in results))} as expected, "
            f"{n(sum(r.contrary for r in results))} contrary, {n(sum(r.verdict == 'unknown' for r in results))} unknown")
