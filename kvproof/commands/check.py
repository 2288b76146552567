"""``kvproof check``: the CI gate over records and profiles."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
from pathlib import Path
from typing import Iterable

import attrs

from ..diagnostics import LOAD_SYNTAX, Diagnostic, InputError
from ..models.documents import Document, RankTwins, load_path, unreadable_reason
from ..output import OutputError, failure, write_file
from ..report import (  # noqa: F401 - re-exported
    EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, FileResult, exit_code, render_github, render_json, render_junit,
    render_sarif, render_text,
)


def expand(paths: Iterable[str]) -> tuple[list[Path], list[FileResult]]:
    """Files named directly, and every *.json under a named directory, sorted."""
    files: list[Path] = []
    problems: list[FileResult] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        elif path.exists():
            files.append(path)
        else:
            problems.append(FileResult(name, None, "bad_input", [Diagnostic(LOAD_SYNTAX, "$", _missing(path), name)]))
    return files, problems


def _missing(path: Path) -> str:
    """Why a named path cannot be opened: a link loop and a dangling link are told apart from a
    path that does not exist."""
    try:
        os.stat(path)
    except OSError as exc:
        if path.is_symlink() and exc.errno == errno.ENOENT:
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        if exc.errno != errno.ENOENT:
            return unreadable_reason(exc)
    return "no such file or directory"


def unloadable(files: Iterable[Path]) -> list[Diagnostic]:
    """The loader diagnostics of the given files, each read and loaded as ``check`` does
    (bounded size, a FIFO without blocking, strict JSON). Commands that hand documents to code
    that reads them less carefully (``fuzz`` PATHs, ``prove --examples``) call this first."""
    problems: list[Diagnostic] = []
    for path in files:
        try:
            load_path(path)
        except InputError as exc:
            problems.extend(exc.diagnostics)
    return problems


def evaluate(paths: Iterable[str], probe: Iterable[str] = ()) -> list[FileResult]:
    """Load every document, check the loadable ones together, one result per file.

    ``probe`` names an accepted probe's records: phases are compared with them (PC008, PC009);
    they are loaded strictly but not reported on themselves."""
    with _collector_paused():
        return _evaluate(paths, probe)


@contextlib.contextmanager
def _collector_paused():
    """Pause the cyclic garbage collector while documents are loaded and checked.

    Loading allocates tens of thousands of container objects that all stay alive until the
    check ends, and none of them form reference cycles, so every collection the allocations
    trigger walks live objects for nothing (about 4% of a check of the GLM record set, counted
    under cachegrind). Reference counting still frees everything as before; cycles that a
    refusal's exceptions leave are collected once the collector runs again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _evaluate(paths: Iterable[str], probe: Iterable[str]) -> list[FileResult]:
    files, results = expand(paths)
    documents: list[Document] = []
    probe_files, probe_problems = expand(probe)
    results.extend(probe_problems)
    probe_set = {p.resolve() for p in probe_files}
    both = [p for p in files if p.resolve() in probe_set]
    if both:  # checking the probe against itself would check nothing: a usage error, said per file
        results.extend(FileResult(str(p), None, "bad_input", [Diagnostic(
            LOAD_SYNTAX, "$", "named both as a document to check and by --probe; the probe's records are the "
            "reference a phase is compared with, so give the phase's records apart from the probe's", str(p))])
            for p in both)
        return sorted(results, key=lambda r: r.file)
    for path in probe_files:
        try:
            documents.append(attrs.evolve(load_path(path), role="probe"))
        except InputError as exc:
            results.append(FileResult(str(path), None, "bad_input", exc.diagnostics))
    by_file: dict[str, FileResult] = {}
    ranks = RankTwins()  # the TP ranks of one deployment are structured once
    for path in files:
        try:
            document = load_path(path, ranks=ranks)
        except InputError as exc:
            results.append(FileResult(str(path), None, "bad_input", exc.diagnostics))
            continue
        result = FileResult(str(path), document.kind, "skipped" if document.kind == "geometry" else "accepted")
        results.append(result)
        by_file[str(path)] = result
        if document.kind != "geometry":
            documents.append(document)
    if any(d.role != "probe" for d in documents):
        # imported here: the rules cost ~200 ms and 38 modules (python -X importtime), which a check
        # of geometries or probes only, and the callers of unloadable(), do not need
        from ..rules.check import check

        for diagnostic in check(documents):
            result = by_file.get(diagnostic.file or "")
            if result is None:  # a finding without a checked file: attach it to the first checked document
                result = by_file[next(d.file for d in documents if d.role != "probe")]
            result.diagnostics.append(diagnostic)
            result.status = "refused"
    return sorted(results, key=lambda r: r.file)


#: The renderers live in kvproof.report (claim, fuzz and prove use them too); re-exported here
#: for the commands and tests that import them from check.
RENDERERS = {"text": render_text, "json": render_json, "sarif": render_sarif, "junit": render_junit,
             "github": render_github}


def run(paths: Iterable[str], fmt: str = "text", output: str | None = None, probe: Iterable[str] = ()) -> int:
    results = evaluate(paths, probe)
    text = RENDERERS[fmt](results)
    if output:
        try:  # atomic, and never through a link (kvproof.output)
            write_file(output, text, errors="backslashreplace")
        except (OutputError, OSError) as exc:
            sys.stderr.write(f"kvproof check: cannot write the report: {failure(exc, output)}\n")
            return EXIT_BAD_INPUT
    else:
        sys.stdout.write(text)  # a closed pipe (`kvproof check ... | head`) is kvproof.cli's to absorb
    return exit_code(results)
