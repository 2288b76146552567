"""The fuzz campaigns of ``kvproof fuzz``: mutation (with read instrumentation and the
synthesized-record acceptance check), parity and ablation.

Inputs are record sets as ``kvproof check`` groups them (the documents of one directory are
checked together), geometries (synthesized into records that must be accepted), and, when
``kvproof.fuzz.strategies`` provides ``geometries()``, random geometries.

The mutation campaign, per record set:

1. the set must be accepted, and its check is traced (:mod:`kvproof.fuzz.reads`) to learn
   which ``(class, field)`` pairs the rules read;
2. each distinct document is edited one field at a time (:mod:`kvproof.fuzz.mutate`; TP-rank twins
   of a worker are edited once), systematically and then at random (Hypothesis, seeded);
3. each mutant is loaded strictly (an ``LD`` diagnostic refuses it) and checked with the unchanged
   other documents of its set (a rule refuses it), or it is accepted;
4. an accepted mutant is traced too, and classified: the field is read by no rule (*unread*), a
   declared valid variant or a known gap explains it (:mod:`kvproof.fuzz.explained`), or it is a
   *surviving mutant* (a failure).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from ..diagnostics import Diagnostic, InputError
from ..executor import InProcess, executor_for, process_state, results_in_order, seeded
from ..models.codec import dumps, parse_json, unstructure
from ..models.documents import Document, RankTwins, load_bytes, load_parsed, load_tree, read_document
from ..models.geometry import load_geometry
from ..rules.check import check
from ..rules.registry import all_rules
from ..sim import PlanRefusal
from ..sim.synth import synthesize
from . import strategies
from .explained import KNOWN_GAPS, explain, known_synth_refusal
from .mutate import Edit, apply, document_class, edits, random_edit, sites, vocabulary_from
from .reads import ReadLog, trace_check

__all__ = [
    "InputDocument", "RecordSet", "Outcome", "MutationReport", "collect_inputs", "run_mutation",
    "check_set", "Progress", "SynthResult",
]

Progress = Callable[[int], None]


@attrs.define
class InputDocument:
    file: str
    kind: str
    tree: Any
    document: Document


@attrs.define
class RecordSet:
    """Documents checked together (one directory), as ``kvproof check`` bundles them."""

    name: str
    documents: list[InputDocument]

    def replaced(self, index: int, document: Document) -> list[Document]:
        return [document if i == index else d.document for i, d in enumerate(self.documents)]

    def trees(self, index: int | None = None, tree: Any = None) -> list[tuple[str, Any]]:
        return [(d.file, tree if i == index else d.tree) for i, d in enumerate(self.documents)]

    def twin_keys(self) -> list[int | None]:
        """Per document: for a worker record, the position of the first record of the set that
        has its TP-rank original (the loader's ``Document.rank_twin_of``: equal for TP twins),
        None for other kinds."""
        if self._twin_keys is None:
            first: dict[int, int] = {}
            self._twin_keys = [first.setdefault(id(d.document.rank_original()), index) if d.kind == "worker" else None
                               for index, d in enumerate(self.documents)]
        return self._twin_keys

    _twin_keys: list | None = attrs.field(default=None, repr=False, eq=False)

    def reduces(self, index: int) -> bool:
        """The reduced set of a mutant of document ``index`` leaves documents out."""
        keys = self.twin_keys()
        seen: set[int] = set()
        for position, key in enumerate(keys):
            if position == index or key is None:
                continue
            if key == keys[index] or key in seen:
                return True
            seen.add(key)
        return False


@attrs.define
class SynthResult:
    source: str
    status: str  # accepted | refused | known | vllm-refusal | error | invalid-geometry | unavailable
    diagnostics: list[str] = attrs.field(factory=list)
    geometry: Any = None
    #: The finding a known refusal belongs to (status "known").
    finding: str | None = None


def _expand(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        elif path.exists():
            files.append(path)
        else:
            raise InputError([_diag("LD001", "no such file or directory", name)])
    return files


def _diag(rule: str, message: str, file: str):
    return Diagnostic(rule, "$", message, file)


def collect_inputs(paths: Iterable[str]) -> tuple[list[RecordSet], list[tuple[str, Any]]]:
    """Record sets (by directory) and geometries ``(file, Geometry)`` of the given paths; a file
    that does not load raises :class:`InputError`."""
    by_directory: dict[str, list[InputDocument]] = {}
    ranks: dict[str, RankTwins] = {}  # a set's TP-rank twins, found by the loader as check finds them
    geometries: list[tuple[str, Any]] = []
    problems = []
    for path in _expand(paths):
        try:
            data = read_document(path)  # bounded: /dev/zero is too large, a FIFO reads empty
            tree = parse_json(data, str(path))
            document = load_parsed(data, tree, str(path), ranks=ranks.setdefault(str(path.parent), RankTwins()))
        except InputError as exc:
            problems.extend(exc.diagnostics)
            continue
        if document.kind == "geometry":
            geometries.append((str(path), document.obj))
            continue
        by_directory.setdefault(str(path.parent), []).append(InputDocument(str(path), document.kind, tree, document))
    if problems:
        raise InputError(problems)
    sets = [RecordSet(name, docs) for name, docs in sorted(by_directory.items())]
    return sets, geometries


# --------------------------------------------------------------------------------------------
# Outcomes


@attrs.define
class Outcome:
    """What happened to one mutant."""

    set: str
    edit: Edit
    #: loader | rule | accepted
    status: str
    #: Index of the edited document in its record set.
    index: int = 0
    #: The refusing IDs in report order (LD IDs for the loader), without repeats.
    rules: tuple[str, ...] = ()
    #: For an accepted mutant: unread | variant | gap | survivor.
    verdict: str = ""
    reason: str = ""
    explanation: str | None = None
    random: bool = False
    #: The diagnostics' text (first few), for the report.
    detail: list[str] = attrs.field(factory=list)

    def to_json(self) -> dict:
        out = {"set": self.set, "edit": self.edit.to_json(), "description": self.edit.describe(),
               "status": self.status, "rules": list(self.rules), "random": self.random}
        if self.status == "accepted":
            out.update(verdict=self.verdict, reason=self.reason, explanation=self.explanation)
        return out


@attrs.define
class MutationReport:
    sets: list[str] = attrs.field(factory=list)
    outcomes: list[Outcome] = attrs.field(factory=list)
    reads: ReadLog = attrs.field(factory=ReadLog)
    #: Inputs that are not accepted to begin with: (set, diagnostics).
    refused_inputs: list[tuple[str, list[str]]] = attrs.field(factory=list)
    synth: list[SynthResult] = attrs.field(factory=list)
    #: Documents not edited separately: (file, the document it is a twin of).
    twins: list[tuple[str, str]] = attrs.field(factory=list)
    #: Known gaps whose fields were edited but no mutant survived as them (a note, not a failure:
    #: the inputs may not reach the gap; the test suite requires none on the examples).
    stale_gaps: list[str] = attrs.field(factory=list)
    seconds: float = 0.0
    #: Record sets by name (for reproducing mutants and for the ablation campaign).
    record_sets: dict[str, RecordSet] = attrs.field(factory=dict, repr=False)

    def count(self, status: str | None = None, verdict: str | None = None, random: bool | None = None) -> int:
        return sum(1 for o in self.outcomes
                   if (status is None or o.status == status) and (verdict is None or o.verdict == verdict)
                   and (random is None or o.random == random))

    @property
    def survivors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict == "survivor"]

    @property
    def failed(self) -> bool:
        return bool(self.survivors or self.refused_inputs
                    or any(s.status in ("refused", "error") for s in self.synth))

    def fired(self) -> dict[str, int]:
        """Rule ID -> number of mutants it refused (any position in the report)."""
        out: dict[str, int] = {}
        for outcome in self.outcomes:
            if outcome.status == "rule":
                for rule in outcome.rules:
                    out[rule] = out.get(rule, 0) + 1
        return out

    def rules_never_fired(self) -> list[str]:
        fired = self.fired()
        return [rule.id for rule in all_rules() if rule.id not in fired]

    def fields_never_read(self) -> list[tuple[str, str]]:
        return self.reads.unread()

    def unread_edited(self) -> list[tuple[str, str]]:
        """Fields whose edits were accepted because no rule reads them."""
        return sorted({o.edit.pair for o in self.outcomes if o.verdict == "unread"})

    def variants_used(self) -> list[str]:
        return sorted({o.explanation for o in self.outcomes if o.verdict == "variant" and o.explanation})

    def gaps_seen(self) -> list[str]:
        return sorted({o.explanation for o in self.outcomes if o.verdict == "gap" and o.explanation})

    def summary(self) -> dict:
        return {
            "sets": self.sets,
            "edits": len(self.outcomes),
            "systematic": self.count(random=False),
            "random": self.count(random=True),
            "refused": self.count("loader") + self.count("rule"),
            "refused_by_loader": self.count("loader"),
            "refused_by_rule": self.count("rule"),
            "accepted": self.count("accepted"),
            "accepted_unread": self.count(verdict="unread"),
            "unread_keys": len(self.unread_edited()),
            "valid_variants": self.count(verdict="variant"),
            "valid_variant_kinds": len(self.variants_used()),
            "known_gaps": self.count(verdict="gap"),
            "known_gap_ids": self.gaps_seen(),
            "surviving": len(self.survivors),
            "synthesized": len(self.synth),
            "synthesized_refused": sum(1 for s in self.synth if s.status in ("refused", "error")),
            "seconds": round(self.seconds, 2),
        }


# --------------------------------------------------------------------------------------------
# Checking a mutant


def check_set(documents: list[Document], rules=None) -> list:
    return check(documents, rules)


def _reduced(record_set: RecordSet, index: int, document: Document) -> list[Document]:
    """The mutant with the set's other documents, TP-rank twins of one worker kept once and the
    unchanged twins of the mutated worker left out (they pass as they did in the accepted set).

    Rules only add instances when documents are added (a prerequisite suppresses only within one
    file), so the reduced set refuses a subset of what the whole set refuses: a mutant it accepts
    is checked again with the whole set before it counts as accepted."""
    keys = record_set.twin_keys()
    mine = keys[index]
    kept: set[int] = set()
    out = []
    for position, doc in enumerate(record_set.documents):
        if position == index:
            out.append(document)
            continue
        key = keys[position]
        if key is not None and (key == mine or key in kept):
            continue
        if key is not None:
            kept.add(key)
        out.append(doc.document)
    return out


#: Rules that refuse a record set for a record it lacks (not judged on a reduced set).
_COUNTING_RULES = ("RS005",)


def evaluate(record_set: RecordSet, index: int, edit: Edit, rules=None,
             reduced: bool = False) -> tuple[str, tuple[str, ...], list[str]]:
    """``(status, IDs, detail)`` of one mutant: loader | rule | accepted. ``reduced``: check it in
    the reduced set (see :func:`_reduced`), whose acceptance is exact only for unread fields."""
    original = record_set.documents[index]

    tree = apply(original.tree, edit)
    try:
        document = load_tree(tree, original.file)
    except InputError as exc:
        ids = tuple(dict.fromkeys(d.rule for d in exc.diagnostics))
        return "loader", ids, [d.text() for d in exc.diagnostics[:3]]
    documents = _reduced(record_set, index, document) if reduced else record_set.replaced(index, document)
    if reduced:
        # RS005 counts a scheduler's workers: the reduced set leaves twins out, so it would refuse
        # what the whole set accepts (an acceptance is checked again with the whole set anyway)
        rules = [r for r in (rules if rules is not None else all_rules()) if r.id not in _COUNTING_RULES]
    diagnostics = check_set(documents, rules)
    if diagnostics:
        ids = tuple(dict.fromkeys(d.rule for d in diagnostics))
        return "rule", ids, [d.text() for d in diagnostics[:3]]
    return "accepted", (), []


def mutant_documents(record_set: RecordSet, index: int, edit: Edit) -> list[Document]:
    tree = apply(record_set.documents[index].tree, edit)
    return record_set.replaced(index, load_tree(tree, record_set.documents[index].file))


# --------------------------------------------------------------------------------------------
# The campaign


def _random_edits(file: str, cls: type, tree: Any, vocabulary: dict, count: int, seed: int) -> list[Edit]:
    """``count`` Hypothesis-drawn edits (deterministic for a seed), duplicates removed."""
    if count <= 0:
        return []

    all_sites = sites(cls, tree, exhaustive=True)
    drawn: list[Edit] = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=False)
    @given(random_edit(file, all_sites, tree, vocabulary))
    def draw(edit: Edit) -> None:
        drawn.append(edit)

    draw()

    seen: set[str] = set()
    original = json.dumps(tree)
    out = []
    for edit in drawn:
        key = json.dumps([edit.site.path, edit.op, repr(edit.value)], default=str)
        if key in seen:
            continue
        seen.add(key)
        if json.dumps(apply(tree, edit)) != original:  # an edit that changes nothing is no mutant
            out.append(edit)
    return out


def plan_edits(record_set: RecordSet, vocabulary: dict, random_count: int, seed: int,
               twins: list | None = None, sample: int | None = None,
               exhaustive: bool = False) -> list[tuple[int, Edit, bool]]:
    """``(document index, edit, random)`` for every mutant of a record set (``sample``: at most
    that many systematic edits per document, drawn with the seed, in document order)."""
    planned: list[tuple[int, Edit, bool]] = []
    keys = record_set.twin_keys()
    for index, doc in enumerate(record_set.documents):
        if keys[index] is not None and keys[index] != index:  # a TP-rank twin of an earlier worker
            if twins is not None:
                twins.append((doc.file, record_set.documents[keys[index]].file))
            continue
        cls = document_class(doc.kind)
        systematic = list(edits(doc.file, cls, doc.tree, vocabulary, exhaustive))
        if sample is not None and len(systematic) > sample:
            chosen = sorted(random.Random(f"{seed}:{Path(doc.file).name}").sample(range(len(systematic)), sample))
            systematic = [systematic[i] for i in chosen]
        for edit in systematic:
            planned.append((index, edit, False))
        doc_seed = (seed * 1_000_003 + _stable_hash(Path(doc.file).name)) % (2**32)
        for edit in _random_edits(doc.file, cls, doc.tree, vocabulary, random_count, doc_seed):
            planned.append((index, edit, True))
    return planned


def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def run_mutation(record_sets: list[RecordSet], geometries: list[tuple[str, Any]] = (), random_count: int = 0,
                 seed: int = 0, progress: Callable[[int, int], None] | None = None,
                 strategy_geometries: int = 0, jobs: int = 1, sample: int | None = None,
                 exhaustive: bool = False, executor: str | None = None) -> MutationReport:
    """The mutation campaign over record sets (and the acceptance of synthesized records); the
    mutants run in batches on ``executor`` (kvproof.executor: ``local`` with ``jobs`` processes,
    or a cluster's address)."""
    with executor_for(executor, jobs) as pool:  # an address that cannot serve is refused before any work
        return _mutation(record_sets, geometries, random_count, seed, progress, strategy_geometries, sample,
                         exhaustive, pool)


def _mutation(record_sets: list[RecordSet], geometries, random_count: int, seed: int,
              progress: Callable[[int, int], None] | None, strategy_geometries: int, sample: int | None,
              exhaustive: bool, pool) -> MutationReport:
    start = time.perf_counter()
    report = MutationReport(sets=[s.name for s in record_sets])
    report.record_sets = {s.name: s for s in record_sets}
    vocabulary = vocabulary_from(d.tree for s in record_sets for d in s.documents)

    report.synth = synth_acceptance(geometries, strategy_geometries, seed)

    accepted_sets = []
    for record_set in record_sets:
        diagnostics, log = trace_check([d.document for d in record_set.documents])
        if diagnostics:
            report.refused_inputs.append((record_set.name, [d.render() for d in diagnostics[:10]]))
            continue
        report.reads.merge(log)
        accepted_sets.append(record_set)

    items = [(record_set.name, index, edit, is_random)
             for record_set in accepted_sets
             for index, edit, is_random in plan_edits(record_set, vocabulary, random_count, seed, report.twins,
                                                      sample, exhaustive)]
    accepted = _evaluate_mutants(report, items, pool, progress)
    for record_set, index, outcome in accepted:
        if outcome.status == "accepted":
            classify(outcome, report.reads, record_set.documents[index].tree)
    report.stale_gaps = _stale_gaps(report)
    report.seconds = time.perf_counter() - start
    return report


def _evaluate_mutants(report: MutationReport, items: list[tuple], pool,
                      progress: Callable[[int, int], None] | None) -> list[tuple[RecordSet, int, Outcome]]:
    """Every mutant on its reduced set, then the accepted ones on the whole set; the outcomes go
    to ``report``, and the accepted ones are returned."""
    accepted: list[tuple[RecordSet, int, Outcome]] = []
    tasks = [("reduced", name, index, edit) for name, index, edit, _ in items]
    results = _evaluate_all(report.record_sets, tasks, pool, progress)
    for (name, index, edit, is_random), (status, ids, detail, _) in zip(items, results):
        outcome = Outcome(name, edit, status, index=index, rules=ids, random=is_random, detail=detail)
        report.outcomes.append(outcome)
        if status == "accepted":
            accepted.append((report.record_sets[name], index, outcome))

    # The reduced set accepted these: confirm with the whole set, and trace the reads of the first
    # few mutants of each field no rule read in the accepted sets (a branch only a mutant takes).
    traced: dict[tuple[str, str], int] = {}
    tasks = []
    for record_set, index, outcome in accepted:
        pair = outcome.edit.pair
        trace = not report.reads.read(*pair) and traced.get(pair, 0) < TRACES_PER_FIELD
        if trace:
            traced[pair] = traced.get(pair, 0) + 1
        tasks.append(("confirm", record_set.name, index, outcome.edit, trace))
    results = _evaluate_all(report.record_sets, tasks, pool, None)
    for (record_set, index, outcome), (status, ids, detail, reads) in zip(accepted, results):
        if status != "accepted":
            outcome.status, outcome.rules, outcome.detail = status, ids, detail
        if reads:
            report.reads.merge(ReadLog(reads))
    return accepted


#: Accepted mutants traced per field that no rule read in the accepted sets.
TRACES_PER_FIELD = 1
#: Mutants per unit (kvproof.executor): one record set's, so a unit carries that set alone.
BATCH = 64


def _run_task(record_set: RecordSet, task: tuple) -> tuple:
    kind, index, edit = task[:3]
    if kind == "reduced":
        return (*evaluate(record_set, index, edit, reduced=True), None)
    status, ids, detail = "accepted", (), []
    if record_set.reduces(index):
        status, ids, detail = evaluate(record_set, index, edit)
    reads = None
    if status == "accepted" and task[3]:
        _, log = trace_check(mutant_documents(record_set, index, edit))
        reads = log.reads
    return status, ids, detail, reads


def set_payload(record_set: RecordSet) -> tuple:
    """A record set as plain data, ``(key, name, ((file, tree, twin key), ...))``: what a unit
    carries to a process that has not loaded it (the key is the digest of the rest; the twin key
    is :meth:`RecordSet.twin_keys`', the loader's finding, not found again there)."""
    files = tuple((d.file, d.tree, twin) for d, twin in zip(record_set.documents, record_set.twin_keys()))
    key = hashlib.sha256(json.dumps([record_set.name, files], sort_keys=True, default=repr).encode()).hexdigest()
    return key, record_set.name, files


def _loaded_set(name: str, files: tuple) -> RecordSet:
    documents: list[InputDocument] = []
    for index, (file, tree, twin) in enumerate(files):
        document = load_tree(tree, file)
        if twin is not None and twin != index:
            document = attrs.evolve(document, rank_twin_of=documents[twin].document)
        documents.append(InputDocument(file, document.kind, tree, document))
    return RecordSet(name, documents)


def mutation_batch(payload: tuple, tasks: list[tuple]) -> list[tuple]:
    """A unit of the mutation campaign: ``(status, IDs, detail, reads)`` of each mutant of
    ``tasks`` (``(kind, index, edit[, trace])``) of the record set ``payload``
    (:func:`set_payload`), loaded once per process."""
    key, name, files = payload
    record_set = process_state(("kvproof.fuzz.set", key), lambda: _loaded_set(name, files))
    return [_run_task(record_set, task) for task in tasks]


def _evaluate_all(record_sets: dict[str, RecordSet], items: list[tuple], pool,
                  progress: Callable[[int, int], None] | None) -> list:
    """Run mutant tasks ``(kind, set name, index, edit[, trace])`` in batches of one record set
    each on ``pool`` (kvproof.executor); results in input order, so the report does not depend on
    where they ran."""
    payloads = {name: set_payload(record_set) for name, record_set in record_sets.items()}
    units: list[tuple] = []
    for name, run in itertools.groupby(items, key=lambda task: task[1]):  # a record set's mutants, in turn
        tasks = [(task[0], *task[2:]) for task in run]
        units += [(payloads[name], tasks[i:i + BATCH]) for i in range(0, len(tasks), BATCH)]
    if len(units) <= 1 and getattr(pool, "kvproof_address", None) is None:
        pool = InProcess()  # a local pool would only fork for one batch
    results: list = []
    with contextlib.ExitStack() as stack:
        for name, record_set in record_sets.items():  # here and in forked workers: nothing to load
            stack.enter_context(seeded(("kvproof.fuzz.set", payloads[name][0]), record_set))
        for batch in results_in_order(pool, mutation_batch, units):
            results.extend(batch)
            if progress is not None:
                progress(len(results), len(items))
    return results


def classify(outcome: Outcome, reads: ReadLog, tree: Any) -> None:
    owner, field = outcome.edit.pair
    if not reads.read(owner, field):
        outcome.verdict = "unread"
        outcome.reason = f"no rule reads {owner}.{field}"
        return
    found = explain(outcome.edit, tree)
    if found is None:
        outcome.verdict = "survivor"
        outcome.reason = f"{owner}.{field} is read by {', '.join(reads.readers(owner, field))}"
        return
    kind, entry = found
    outcome.verdict = kind
    outcome.reason = entry.reason
    outcome.explanation = entry.label


def _stale_gaps(report: MutationReport) -> list[str]:
    """Known-gap IDs that matched edits of fields some rule reads, none of which survived as that gap:
    the rule was fixed (remove the entry) or the entry is too wide. Edits of fields no rule reads in
    these inputs say nothing about a gap."""
    matched: set[str] = set()
    for outcome in report.outcomes:
        if outcome.verdict == "unread" or not report.reads.read(*outcome.edit.pair):
            continue
        tree = report.record_sets[outcome.set].documents[outcome.index].tree
        for entry in KNOWN_GAPS:
            if entry.matches(outcome.edit, tree):
                matched.add(entry.label)
    return sorted(matched - set(report.gaps_seen()))


# --------------------------------------------------------------------------------------------
# Synthesized records must be accepted


def synth_acceptance(geometries: Iterable[tuple[str, Any]], strategy_examples: int, seed: int) -> list[SynthResult]:
    """Synthesize the records of every geometry (and of ``strategy_examples`` geometries from
    :func:`kvproof.fuzz.strategies.geometries`, when that module exists) and check them."""
    results = [_synth_one(source, geometry) for source, geometry in geometries]
    if strategy_examples > 0:
        drawn = strategy_geometry_examples(strategy_examples, seed)
        if drawn is None:
            results.append(SynthResult("kvproof.fuzz.strategies", "unavailable",
                                       ["kvproof.fuzz.strategies.geometries() is not available"]))
        else:
            for number, tree in enumerate(drawn):
                source = f"strategies.geometries() example {number}"
                try:
                    geometry = load_geometry(tree, source)
                except InputError as exc:
                    results.append(SynthResult(source, "invalid-geometry", [d.render() for d in exc.diagnostics[:3]], tree))
                    continue
                result = _synth_one(source, geometry)
                result.geometry = tree
                results.append(result)
    return results


def strategy_geometry_examples(count: int, seed: int) -> list | None:
    factory = getattr(strategies, "geometries", None)
    if factory is None:
        return None

    drawn: list = []

    @hypothesis_seed(seed)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(factory())
    def draw(geometry) -> None:
        drawn.append(geometry)

    draw()
    return drawn


def _synth_one(source: str, geometry: Any) -> SynthResult:
    try:
        synthesized = synthesize(geometry)
    except PlanRefusal as exc:
        return SynthResult(source, "vllm-refusal", [str(exc)], geometry)
    except Exception as exc:  # noqa: BLE001 - a simulator crash is a finding, not a campaign crash
        return SynthResult(source, "error", [f"synthesize raised {type(exc).__name__}: {exc}"], geometry)
    try:
        documents = [load_bytes(dumps(unstructure(record)), f"synth/{name}") for name, record in synthesized.files()]
    except InputError as exc:
        return SynthResult(source, "refused", [d.render() for d in exc.diagnostics[:10]], geometry)
    diagnostics = check(documents)
    if diagnostics:
        known = known_synth_refusal({d.rule for d in diagnostics}, synthesized.plan)
        rendered = [d.render() for d in diagnostics[:10]]
        if known is not None:
            return SynthResult(source, "known", rendered, geometry, finding=known[0])
        return SynthResult(source, "refused", rendered, geometry)
    return SynthResult(source, "accepted", [], geometry)
