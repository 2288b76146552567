"""``kvproof fuzz``: the mutation, parity and ablation campaigns (issue #7).

Imports Hypothesis and z3 (through :mod:`kvproof.fuzz`), so only this command pays for them.
Every failure is written to ``-o/--output`` (default: a new temporary folder, made only when there is a
failure, and named in the report) as the documents that show it, with the ``kvproof check``
command that reproduces it. The files go through :class:`kvproof.output.OutputFolder`: staged,
then committed together; the next run into the same folder removes only what kvproof wrote there.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs

from ..diagnostics import Diagnostic, InputError
from ..executor import ExecutorError
from ..fuzz import ablation as ablation_mod
from ..fuzz import parity as parity_mod
from ..fuzz.campaigns import collect_inputs, run_mutation
from ..fuzz.mutate import apply
from ..models.codec import dumps, unstructure
from ..output import OutputFolder
from ..report import RuleInfo, findings
from ..report import render_github as github
from ..report import render_sarif as sarif
from ..rules.registry import all_rules
from ..solver.shapes import examples_dir
from ..terminal import progress, progress_enabled
from .check import expand
from .check import unloadable as load_problems

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

CAMPAIGNS = ("mutation", "parity", "ablation", "all")


@attrs.define
class Failure:
    campaign: str
    title: str
    detail: str
    directory: str | None = None
    command: str | None = None

    def to_json(self) -> dict:
        return {"campaign": self.campaign, "title": self.title, "detail": self.detail, "directory": self.directory,
                "command": self.command}


@attrs.define
class FuzzRun:
    paths: list[str]
    campaign: str
    examples: int
    seed: int
    mutation: Any = None
    parity: Any = None
    ablation: Any = None
    failures: list[Failure] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)
    strict: bool = False
    #: The campaigns' seconds and rates in the report (``--timings``; they differ run to run).
    timings: bool = False

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failures else EXIT_OK


def default_paths() -> list[str]:
    """The bundled examples (package data: records, profiles and geometries)."""
    root = examples_dir()
    return [str(root)] if root.is_dir() else []


def _progress(label: str, enabled: bool):
    """A progress bar on stderr (kvproof.terminal.progress) yielding ``update(done, total)``, or
    None when ``enabled`` is false."""
    if not enabled:
        return contextlib.nullcontext(None)

    return progress(f"fuzz {label}")


class Artifacts:
    """The failure documents of one run, staged in memory and written together by :meth:`commit`.

    ``out`` is the folder the user named, else None: a temporary folder is made at the first
    failure (so a run without failures writes nothing, and nothing lands in the working folder)."""

    def __init__(self, out: str | None):
        self.root: Path | None = Path(out) if out else None
        self.named = out is not None
        self.files: list[tuple[str, str]] = []

    def folder(self, name: str) -> Path:
        """The path ``name`` (a failure's folder) will have once committed."""
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="kvproof-fuzz-"))
        return self.root / name

    def add(self, name: str, text: str) -> None:
        self.files.append((name, text))

    def commit(self) -> None:
        if self.root is None or (not self.files and not self.root.exists()):
            return
        with OutputFolder(self.root) as folder:
            for name, text in self.files:
                folder.add(name, text)
            folder.clear_own()  # the previous run's artifacts that this run does not write again
            folder.commit()


def execute(paths: list[str], campaign: str = "all", examples: int = 50, seed: int = 0, out: str | None = None,
            jobs: int = 1, strict: bool = False, fixtures: str | None = None, progress: bool = False,
            geometries: int | None = None, exhaustive: bool = False, executor: str | None = None,
            timings: bool = False) -> FuzzRun:
    """Run the campaigns; raise :class:`InputError` for inputs that do not load, and
    :class:`kvproof.executor.ExecutorError` when ``executor`` cannot run the mutation batches."""
    run = FuzzRun(list(paths), campaign, examples, seed, strict=strict, timings=timings)
    record_sets, geometry_inputs = collect_inputs(paths)
    rules = all_rules()
    out_dir = Artifacts(out)

    if campaign in ("mutation", "ablation", "all"):
        with _progress("mutation", progress) as update:
            run.mutation = run_mutation(record_sets, geometry_inputs, random_count=examples, seed=seed, progress=update,
                                        strategy_geometries=(examples if geometries is None else geometries)
                                        if campaign in ("mutation", "all") else 0,
                                        jobs=jobs, exhaustive=exhaustive, executor=executor)
        _mutation_failures(run, out_dir)

    if campaign in ("parity", "all"):
        templates = parity_mod.shapes_from_sets(record_sets)
        shapes = []
        with _progress("parity shapes", progress) as update:
            for number, (name, documents) in enumerate(templates):
                shapes.append(parity_mod.build_shape(name, documents, rules))
                if update:
                    update(number + 1, len(templates))
        with _progress("parity", progress) as update:
            run.parity = parity_mod.run_parity(shapes, rules, examples, seed, progress=update)
        _parity_failures(run, out_dir)

    if campaign in ("ablation", "all"):
        root = Path(fixtures) if fixtures else ablation_mod.default_fixtures()
        corpus = ablation_mod.fixture_corpus(root) + ablation_mod.mutation_corpus(run.mutation)
        with _progress("ablation", progress) as update:
            run.ablation = ablation_mod.run_ablation(corpus, rules, progress=update)
        if root is None:
            run.notes.append("ablation: no rule fixtures found (use --fixtures DIR); the corpus is the mutants only")
        for result in run.ablation.failures:
            run.failures.append(Failure("ablation", f"{result.rule} {result.verdict}", result.reason))
    out_dir.commit()
    return run


def _write_set(out_dir: Artifacts, name: str, files: list[tuple[str, Any]]) -> Path:
    for file, tree in files:
        out_dir.add(f"{name}/{file}", dumps(tree))
    return out_dir.folder(name)


def _mutation_failures(run: FuzzRun, out_dir: Artifacts) -> None:
    report = run.mutation
    number = 0
    for name, problems in report.refused_inputs:
        run.failures.append(Failure("mutation", f"input not accepted: {name}", "; ".join(problems[:3]),
                                    command=f"kvproof check {name}"))
    for outcome in report.survivors + ([o for o in report.outcomes if o.verdict == "gap"] if run.strict else []):
        number += 1
        record_set = report.record_sets[outcome.set]
        files = []
        for index, document in enumerate(record_set.documents):
            tree = apply(document.tree, outcome.edit) if index == outcome.index else document.tree
            files.append((Path(document.file).name, tree))
        directory = _write_set(out_dir, f"mutant-{number:04d}", files)
        title = "surviving mutant" if outcome.verdict == "survivor" else f"known gap {outcome.explanation}"
        run.failures.append(Failure(
            "mutation", f"{title}: {Path(outcome.edit.file).name}: {outcome.edit.describe(record_set.documents[outcome.index].tree)}",
            f"accepted, but {outcome.reason}; a rule should refuse it or docs/fuzz-findings.md explain it",
            str(directory), f"kvproof check {directory}   # exits 0: accepted"))
    for result in report.synth:
        if result.status in ("refused", "error") or (run.strict and result.status == "known"):
            number += 1
            directory = out_dir.folder(f"synth-{number:04d}")
            if result.geometry is not None:
                geometry = result.geometry if isinstance(result.geometry, dict) else unstructure(result.geometry)
                _write_set(out_dir, f"synth-{number:04d}", [("geometry.json", geometry)])
            run.failures.append(Failure(
                "mutation", f"synthesized records {result.status}{' ' + result.finding if result.finding else ''}: "
                f"{result.source}", "; ".join(result.diagnostics[:3]),
                str(directory),
                f"kvproof synth {directory / 'geometry.json'} -o {directory / 'records'} && kvproof check {directory / 'records'}"))
    invalid = [r for r in report.synth if r.status == "invalid-geometry"]
    if invalid:
        run.notes.append(f"{len(invalid):,} geometries drawn by kvproof.fuzz.strategies do not load (skipped): "
                         f"{invalid[0].diagnostics[0] if invalid[0].diagnostics else ''}")
    if report.stale_gaps:
        run.notes.append(f"known gaps no mutant reached as a gap (fixed? remove them from kvproof/fuzz/explained.py): "
                         f"{', '.join(report.stale_gaps)}")


def _parity_failures(run: FuzzRun, out_dir: Artifacts) -> None:
    report = run.parity
    number = 0
    for mismatch in report.mismatches:
        if mismatch.known is not None and not run.strict:
            continue
        number += 1
        directory = None
        command = None
        if mismatch.documents:
            directory = _write_set(out_dir, f"parity-{number:04d}", mismatch.documents)
            command = f"kvproof check {directory}"
        where = f" at {mismatch.subject}" if mismatch.subject else ""
        changed = f"; input: {', '.join(mismatch.changed)}" if mismatch.changed else ""
        run.failures.append(Failure(
            "parity", f"{mismatch.rule} {mismatch.kind}{where} ({mismatch.shape})", f"{mismatch.detail}{changed}",
            str(directory) if directory else None, command))
    if report.stale_known:
        run.notes.append(f"known parity differences not seen (fixed? remove them): {', '.join(report.stale_known)}")


# --------------------------------------------------------------------------------------------
# Rendering


def _pairs(pairs) -> str:
    return ", ".join(f"{cls}.{field}" for cls, field in pairs) or "none"


def render_text(run: FuzzRun) -> str:
    lines = [f"kvproof fuzz: campaign {run.campaign}, seed {run.seed}, count {run.examples:,}"]
    m = run.mutation
    if m is not None:
        s = m.summary()
        lines.append("")
        lines.append(f"mutation: {len(m.sets):,} record set(s): {', '.join(m.sets) or 'none'}")
        if m.twins:
            lines.append(f"  TP-rank twins edited once: {len(m.twins):,} worker record(s)")
        lines.append(f"  single-field edits tried  {s['edits']:>7,}  ({s['systematic']:,} systematic, {s['random']:,} random)")
        lines.append(f"  refused                   {s['refused']:>7,}  (loader LD: {s['refused_by_loader']:,}, rules: {s['refused_by_rule']:,})")
        lines.append(f"  accepted                  {s['accepted']:>7,}")
        lines.append(f"    field no rule reads     {s['accepted_unread']:>7,}  ({s['unread_keys']:,} fields)")
        lines.append(f"    declared valid variant  {s['valid_variants']:>7,}  ({s['valid_variant_kinds']:,} kinds)")
        lines.append(f"    known gap               {s['known_gaps']:>7,}  ({', '.join(s['known_gap_ids']) or 'none'}: docs/fuzz-findings.md)")
        lines.append(f"    SURVIVING (unexplained) {s['surviving']:>7,}")
        synth = m.synth
        if synth:
            counts: dict[str, int] = {}
            for result in synth:
                counts[result.status] = counts.get(result.status, 0) + 1
            known = sorted({r.finding for r in synth if r.finding})
            lines.append("  synthesized records: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                         + " (vllm-refusal: vLLM would not start, skipped"
                         + (f"; known: {', '.join(known)}" if known else "") + ")")
        lines.append(f"  fields accepted because unread: {_pairs(m.unread_edited())}")
        lines.append(f"  fields never read: {_pairs(m.fields_never_read())}")
        never = m.rules_never_fired()

        expect = {r.id: r.expect for r in all_rules()}
        lines.append("  rules never fired: " + (", ".join(f"{r}{' (expected dead)' if expect.get(r) == 'dead' else ''}"
                                                          for r in never) or "none"))
        if run.timings:
            lines.append(f"  {s['seconds']} s")
    p = run.parity
    if p is not None:
        s = p.summary()
        lines.append("")
        lines.append(f"parity: {s['examples']:,} inputs over {s['shapes']:,} shapes, {s['instances']:,} rule instances compared"
                     + (f", {s['examples_per_second']:,} inputs/s (shapes built in {s['shape_seconds']} s)"
                        if run.timings else ""))

        lines.append(f"  differences: {s['mismatches']:,} unexplained, {s['known']:,} known (docs/fuzz-findings.md)")
        known: dict[tuple, list] = {}
        for mismatch in p.mismatches:
            if mismatch.known:
                known.setdefault((mismatch.known, mismatch.rule, mismatch.kind), []).append(mismatch)
                continue
            where = f" {mismatch.subject}" if mismatch.subject else ""
            lines.append(f"    [FAIL] {mismatch.rule} {mismatch.kind}{where} ({mismatch.shape}): {mismatch.detail}")
            if mismatch.changed:
                lines.append(f"        input: {', '.join(mismatch.changed)}")
        for (finding, rule, kind), found in sorted(known.items()):
            first = found[0]
            lines.append(f"    [known {finding}] {rule} {kind} on {len(found):,} shape(s), e.g. {first.shape}: {first.detail}"
                         + (f"; input: {', '.join(first.changed)}" if first.changed else ""))
        lines.append(f"  rules never compared: {', '.join(p.never_compared(all_rules())) or 'none'}")
    a = run.ablation
    if a is not None:
        s = a.summary()
        lines.append("")
        lines.append(f"ablation: {s['rules']:,} rules over {s['mutants']:,} refused mutants and {s['fixtures']:,} refused fixtures")
        for verdict in ("necessary", "guard", "redundant", "untested", "expected-dead", "dead-but-fired"):
            results = a.by_verdict(verdict)
            if not results:
                continue
            if verdict == "necessary":
                lines.append(f"  necessary ({len(results):,}): {', '.join(r.rule for r in results)}")
                continue
            lines.append(f"  {verdict} ({len(results):,}):")
            for result in results:
                lines.append(f"    {result.rule}: {result.reason}")
    if run.notes:
        lines.append("")
        lines += [f"note: {note}" for note in run.notes]
    lines.append("")
    if run.failures:
        lines.append(f"FAILED: {len(run.failures):,} failure(s)")
        for failure in run.failures:
            lines.append(f"  [{failure.campaign}] {failure.title}")
            lines.append(f"      {failure.detail}")
            if failure.command:
                lines.append(f"      reproduce: {failure.command}")
    else:
        lines.append("ok: no failure")
    return "\n".join(lines) + "\n"


def render_json(run: FuzzRun) -> str:
    out: dict[str, Any] = {"tool": "kvproof", "command": "fuzz", "campaign": run.campaign, "seed": run.seed,
                           "examples": run.examples, "paths": run.paths, "exit_code": run.exit_code}
    m = run.mutation
    if m is not None:
        out["mutation"] = {
            **m.summary(),
            "fields_never_read": [f"{c}.{f}" for c, f in m.fields_never_read()],
            "fields_accepted_unread": [f"{c}.{f}" for c, f in m.unread_edited()],
            "rules_never_fired": m.rules_never_fired(),
            "reads": m.reads.to_json(),
            "surviving": [o.to_json() for o in m.survivors],
            "valid_variants": m.variants_used(),
            "stale_gaps": m.stale_gaps,
            "synthesized": [{"source": r.source, "status": r.status, "diagnostics": r.diagnostics} for r in m.synth],
        }
    p = run.parity
    if p is not None:
        out["parity"] = {**p.summary(), "differences": [x.to_json() for x in p.mismatches],
                         "rules_never_compared": p.never_compared(all_rules()), "stale_known": p.stale_known}
    a = run.ablation
    if a is not None:
        out["ablation"] = {**a.summary(), "rules": [r.to_json() for r in a.results]}
    out["notes"] = run.notes
    out["failures"] = [f.to_json() for f in run.failures]
    if not run.timings:
        for campaign in ("mutation", "parity", "ablation"):
            for key in CLOCK_KEYS:
                out.get(campaign, {}).pop(key, None)
    return json.dumps(out, indent=2) + "\n"


#: The summary keys that read the clock: in the report only with ``--timings``.
CLOCK_KEYS = ("seconds", "shape_seconds", "examples_per_second")


def _findings(run: FuzzRun) -> list:
    """A failure per finding, ID ``fuzz-CAMPAIGN``, placed at the first document written to
    reproduce it."""
    items = []
    for failure in run.failures:
        directory = Path(failure.directory) if failure.directory else None
        files = sorted(directory.rglob("*.json")) if directory and directory.is_dir() else []
        reproduce = f" (reproduce: {failure.command})" if failure.command else ""
        items.append((f"fuzz-{failure.campaign}", "$", f"{failure.title}: {failure.detail}{reproduce}",
                      str(files[0]) if files else None))
    return findings(items, "fuzz")


def render_sarif(run: FuzzRun) -> str:
    rules = [RuleInfo(f"fuzz-{c}", c, f"the {c} campaign found a failure", f"kvproof fuzz --campaign {c}: see docs/fuzz.md")
             for c in CAMPAIGNS if c != "all"]
    return sarif(_findings(run), rules, command="fuzz")


def render_github(run: FuzzRun) -> str:
    summary = f"FAILED: {len(run.failures)} failure(s)" if run.failures else "ok: no failure"
    return github(_findings(run), summary)


def unloadable(paths: list[str]) -> list:
    """The loader diagnostics of every input file, read the way ``kvproof check`` reads them
    (bounded size, a FIFO without blocking, unreadable files and directories as ``LD001``), before
    a campaign touches them: bad input is exit 2 with a diagnostic, never a hang or a traceback."""
    files, missing = expand(paths)
    return [d for result in missing for d in result.diagnostics] + load_problems(files)


@contextlib.contextmanager
def _hypothesis_storage():
    """Hypothesis keeps caches (its Unicode tables, the constants it saw) in its home directory,
    by default ``.hypothesis`` in the working directory: ``kvproof fuzz`` writes nothing outside
    its output folder, so a campaign's caches go to a temporary folder, removed at the end (the
    campaigns keep no example database: ``database=None``; forked workers inherit the folder)."""
    from hypothesis.configuration import set_hypothesis_home_dir

    with tempfile.TemporaryDirectory(prefix="kvproof-hypothesis-") as folder:
        set_hypothesis_home_dir(folder)
        try:
            yield
        finally:
            set_hypothesis_home_dir(None)


def run(paths: tuple[str, ...], campaign: str, examples: int, seed: int, fmt: str, out: str | None, jobs: int,
        strict: bool, fixtures: str | None, geometries: int | None = None, exhaustive: bool = False,
        executor: str | None = None, timings: bool = False) -> int:
    chosen = list(paths) or default_paths()
    if not chosen:
        sys.stderr.write("kvproof fuzz: no PATH given and no bundled examples found\n")
        return EXIT_BAD_INPUT
    problems = unloadable(chosen)
    if fixtures is not None and not Path(fixtures).is_dir():
        problems.append(Diagnostic("LD001", "$", "--fixtures: no such directory", fixtures))
    if problems:
        for diagnostic in problems:
            sys.stdout.write(diagnostic.render(diagnostic.file or "-") + "\n")
        return EXIT_BAD_INPUT

    try:
        with _hypothesis_storage():
            result = execute(chosen, campaign, examples, seed, out, jobs, strict, fixtures,
                             progress=progress_enabled(), geometries=geometries, exhaustive=exhaustive,
                             executor=executor, timings=timings)
    except ExecutorError as exc:
        sys.stderr.write(f"kvproof fuzz: {exc}\n")
        return EXIT_BAD_INPUT
    except InputError as exc:
        for diagnostic in exc.diagnostics:
            sys.stdout.write(diagnostic.render(diagnostic.file or "-") + "\n")
        return EXIT_BAD_INPUT
    sys.stdout.write({"json": render_json, "sarif": render_sarif, "github": render_github}.get(fmt, render_text)(result))
    return result.exit_code
