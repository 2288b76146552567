"""``kvproof import PHASE_DIR... -o PROFILE.json``: the import gate (docs/import.md).

Exit 0: every rule accepts the record sets and the profile is written (or, with ``--verify``,
the given profile holds what the records give); 1: refused, nothing written, one
``FILE: ID $.path: message`` line per refusal as ``check`` prints them; 2: bad input or usage.
"""

from __future__ import annotations

import sys
from typing import Iterable

from ..diagnostics import LOAD_KIND, Diagnostic, InputError
from ..importer import read_phases, run_import
from ..models.documents import load_path
from ..output import OutputError, write_file
from .check import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, FileResult, expand, render_text


def _report(diagnostics: Iterable[Diagnostic], status: str) -> str:
    by_file: dict[str, FileResult] = {}
    for diagnostic in diagnostics:
        name = diagnostic.file or ""
        by_file.setdefault(name, FileResult(name, None, status)).diagnostics.append(diagnostic)
    return render_text(sorted(by_file.values(), key=lambda r: r.file))


def run(phase_dirs: Iterable[str], output: str | None, probe: Iterable[str] = (), verify: str | None = None,
        model: str | None = None, layout: str = "grouped") -> int:
    if (output is None) == (verify is None):
        sys.stderr.write("kvproof import: give exactly one of -o PROFILE.json and --verify PROFILE.json\n")
        return EXIT_BAD_INPUT
    try:
        phases = read_phases(phase_dirs)
        probe_files, problems = expand(probe)
        if problems:
            raise InputError([d for p in problems for d in p.diagnostics])
        probes = [load_path(path) for path in probe_files]
        profile = load_path(verify) if verify is not None else None
        if profile is not None and profile.kind != "profile":
            sys.stdout.write(Diagnostic(LOAD_KIND, "$", f"--verify takes a profile, not a {profile.kind}", verify).render() + "\n")
            return EXIT_BAD_INPUT
    except InputError as exc:
        sys.stdout.write(_report(exc.diagnostics, "bad_input"))
        return EXIT_BAD_INPUT
    try:
        result = run_import(phases, probes, model, profile_file=output or verify, verify=profile, layout=layout)
    except ValueError as exc:  # no model named
        sys.stderr.write(f"kvproof import: {exc}\n")
        return EXIT_BAD_INPUT
    if result.diagnostics:
        sys.stdout.write(_report(result.diagnostics, "refused"))
        sys.stdout.write("kvproof import: refused; nothing written\n" if verify is None else "")
        return EXIT_REFUSED
    if verify is not None:
        sys.stdout.write(f"{verify}: holds what the {len(phases):,} phase(s) give\n")
        return EXIT_OK
    try:
        write_file(output, result.text)
    except (OutputError, OSError) as exc:
        sys.stderr.write(f"kvproof import: cannot write {output}: {getattr(exc, 'strerror', None) or exc}\n")
        return EXIT_BAD_INPUT
    groups = result.profile.resources.cache_groups
    state = sum(1 for g in groups if g.kind == "state")
    sys.stdout.write(f"wrote {output}: {state:,} state and {len(groups) - state:,} attention cache groups, "
                     f"kv_cache_bytes {result.profile.resources.runtime_memory.kv_cache_bytes:,}\n")
    return EXIT_OK
