"""Ablation: every rule is needed by some refused input.

The corpus is every mutant a rule refused in the mutation campaign and every refused fixture
under ``tests/rules/`` (documents and record sets, with their accepted probe). For each rule R,
the checker runs with the registry minus R on the inputs R refuses (fewest other refusing rules
first): R is *necessary* when one of them is then accepted. Otherwise R is

* a *guard*: no input gets through, but without R the checker raises on one (another rule's body
  relies on R as its prerequisite);
* *untested*: nothing in the corpus is refused by R;
* *redundant* (on this corpus): every input R refuses is still refused without it, and the report
  names the rules that refuse the first one instead;
* *expected dead* (``expect="dead"``, e.g. PF011 and VC007): reported with the rule's reason; such a
  rule that fires contradicts its expectation, which is the campaign's one failure.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterable

import attrs

from ..diagnostics import InputError
from ..models.documents import Document, load_path
from ..rules.check import check
from ..rules.core import Rule
from ..rules.registry import all_rules
from ..rules.state_storage import replay_document
from .campaigns import mutant_documents

__all__ = ["CorpusItem", "RuleAblation", "AblationReport", "fixture_corpus", "mutation_corpus", "run_ablation",
           "default_fixtures"]


@attrs.define
class CorpusItem:
    """A refused input: how to build its documents, and which rules refused it."""

    label: str
    source: str  # mutant | fixture
    fired: tuple[str, ...]
    build: Callable[[], list[Document]] = attrs.field(repr=False)
    size: int = 0


@attrs.define
class RuleAblation:
    rule: str
    verdict: str  # necessary | guard | untested | redundant | expected-dead | dead-but-fired
    reason: str = ""
    witness: str | None = None
    tried: int = 0
    candidates: int = 0

    def to_json(self) -> dict:
        return {"rule": self.rule, "verdict": self.verdict, "reason": self.reason, "witness": self.witness,
                "tried": self.tried, "candidates": self.candidates}


@attrs.define
class AblationReport:
    results: list[RuleAblation] = attrs.field(factory=list)
    mutants: int = 0
    fixtures: int = 0
    seconds: float = 0.0

    @property
    def failures(self) -> list[RuleAblation]:
        return [r for r in self.results if r.verdict == "dead-but-fired"]

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def by_verdict(self, verdict: str) -> list[RuleAblation]:
        return [r for r in self.results if r.verdict == verdict]

    def summary(self) -> dict:
        counts: dict[str, int] = {}
        for result in self.results:
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
        return {"rules": len(self.results), "mutants": self.mutants, "fixtures": self.fixtures, **counts,
                "seconds": round(self.seconds, 2)}


def default_fixtures() -> Path | None:
    """``tests/rules`` of the source checkout kvproof runs from, when there is one."""
    path = Path(__file__).resolve().parents[2] / "tests" / "rules"
    return path if path.is_dir() else None


def fixture_corpus(root: Path | None, rules: list[Rule] | None = None,
                   ids: Iterable[str] | None = None) -> list[CorpusItem]:
    """Every refused fixture case under ``root`` (``<ID>/<case>.json`` and ``<ID>/<case>/``; only
    the folders ``ids`` when given), with the rules (default: the registry) that refuse it."""
    if root is None or not Path(root).is_dir():
        return []
    root = Path(root)
    out = []
    cases = sorted(root.glob("[A-Z][A-Z][0-9][0-9][0-9]/*.json")) + sorted(
        p for p in root.glob("[A-Z][A-Z][0-9][0-9][0-9]/*") if p.is_dir())
    wanted = set(ids) if ids is not None else None
    for case in cases:
        if case.name.startswith("good_") or (wanted is not None and case.parent.name not in wanted):
            continue

        def build(case: Path = case) -> list[Document]:
            if case.is_file():
                if case.stem.startswith("replay_"):  # a profile being sized or replayed (ST028), as kvproof plan checks it

                    return [replay_document(load_path(case))]
                return [load_path(case)]
            documents = [load_path(p) for p in sorted(case.glob("*.json"))]
            documents += [attrs.evolve(load_path(p), role="probe") for p in sorted((case / "probe").glob("*.json"))]
            return documents

        try:
            documents = build()
        except InputError:
            continue
        fired = tuple(dict.fromkeys(d.rule for d in check(documents, rules)))
        if fired:
            size = sum(p.stat().st_size for p in ([case] if case.is_file() else case.rglob("*.json")))
            out.append(CorpusItem(f"fixture {case.parent.name}/{case.name}", "fixture", fired, build, size))
    return out


def mutation_corpus(report) -> list[CorpusItem]:
    """The mutants a rule refused in a mutation report."""
    out = []
    for outcome in report.outcomes:
        if outcome.status != "rule":
            continue
        record_set = report.record_sets[outcome.set]

        def build(record_set=record_set, outcome=outcome) -> list[Document]:
            return mutant_documents(record_set, outcome.index, outcome.edit)

        # after the fixtures (small documents) among inputs refused by as many rules
        out.append(CorpusItem(f"mutant {outcome.edit.file}: {outcome.edit.describe()}", "mutant", outcome.rules,
                              build, 1 << 40))
    return out


def run_ablation(corpus: Iterable[CorpusItem], rules: list[Rule] | None = None, limit: int = 80,
                 progress: Callable[[int, int], None] | None = None) -> AblationReport:
    """Ablate every rule over the corpus (at most ``limit`` re-checks per rule)."""
    start = time.perf_counter()
    rules = all_rules() if rules is None else rules
    corpus = list(corpus)
    report = AblationReport(mutants=sum(1 for c in corpus if c.source == "mutant"),
                            fixtures=sum(1 for c in corpus if c.source == "fixture"))
    by_rule: dict[str, list[CorpusItem]] = {}
    for item in corpus:
        for rule_id in item.fired:
            by_rule.setdefault(rule_id, []).append(item)
    for number, rule in enumerate(rules):
        candidates = sorted(by_rule.get(rule.id, []), key=lambda c: (len(c.fired), c.size, c.label))
        if rule.expect == "dead":
            if candidates:
                report.results.append(RuleAblation(rule.id, "dead-but-fired", f"expected dead ({rule.reason}) but it "
                                                   f"refuses {len(candidates)} input(s)", candidates[0].label,
                                                   candidates=len(candidates)))
            else:
                report.results.append(RuleAblation(rule.id, "expected-dead", rule.reason or ""))
            continue
        if not candidates:
            report.results.append(RuleAblation(rule.id, "untested", "no generated mutation and no fixture is "
                                               "refused by it"))
            continue
        others = [r for r in rules if r.id != rule.id]
        result = None
        first_instead: tuple[str, ...] = ()
        crash: str | None = None
        for tried, item in enumerate(candidates[:limit], start=1):
            try:
                remaining = tuple(dict.fromkeys(d.rule for d in check(item.build(), others)))
            except Exception as exc:  # noqa: BLE001 - a body that needs this rule as its guard
                if crash is None:
                    crash = f"without it the checker raises {type(exc).__name__} on {item.label}: {exc}"
                continue
            if not remaining:
                result = RuleAblation(rule.id, "necessary", f"without it, {item.label} is accepted", item.label,
                                      tried, len(candidates))
                break
            if tried == 1:
                first_instead = remaining
        if result is None and crash is not None:
            result = RuleAblation(rule.id, "guard", f"{crash} (another rule's body relies on it as a prerequisite)",
                                  None, min(limit, len(candidates)), len(candidates))
        if result is None:
            tried = min(limit, len(candidates))
            scope = "every input it refuses" if tried == len(candidates) else f"the {tried} inputs tried (of {len(candidates)})"
            result = RuleAblation(rule.id, "redundant",
                                  f"{scope} is refused without it too; {candidates[0].label} by "
                                  f"{', '.join(first_instead)}", candidates[0].label, tried, len(candidates))
        report.results.append(result)
        if progress is not None:
            progress(number + 1, len(rules))
    report.seconds = time.perf_counter() - start
    return report
