"""kvproof.diagnostics: one exception hierarchy, one diagnostic renderer."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import kvproof
from kvproof.diagnostics import Diagnostic, KvproofError

#: Packages whose exceptions join the hierarchy in their own change of issue #14 (the solver's
#: ``NeedPins``, the simulator's refusals, the parity fuzzer's ``_NeedPins``); drop each prefix
#: here once that change is merged.
_REPARENTED_ELSEWHERE = ()


def _kvproof_exceptions() -> list[type]:
    found = {}
    for info in pkgutil.walk_packages(kvproof.__path__, "kvproof."):
        if info.name == "kvproof.__main__":
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__.startswith("kvproof."):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


def test_every_exception_kvproof_defines_is_a_kvproof_error_with_a_name_of_its_own() -> None:
    classes = [c for c in _kvproof_exceptions() if not c.__module__.startswith(_REPARENTED_ELSEWHERE)]
    names = [c.__name__.lstrip("_") for c in _kvproof_exceptions()]
    assert len(classes) >= 8  # the walk found the modules (InputError, OutputError, ExecutorError, ...)
    assert [c.__qualname__ for c in classes if not issubclass(c, KvproofError)] == []
    mine = [c.__name__.lstrip("_") for c in classes]
    assert [n for n in mine if names.count(n) > 1] == []


def test_reparented_exceptions_keep_the_builtin_bases_callers_catch() -> None:
    from kvproof.executor import ExecutorError
    from kvproof.logic import ConcreteRequired
    from kvproof.models.codec import DocumentRefusal
    from kvproof.output import OutputError
    from kvproof.plot import PlotUnavailable

    assert issubclass(ConcreteRequired, TypeError) and issubclass(DocumentRefusal, ValueError)
    assert issubclass(ExecutorError, RuntimeError)
    for cls in (ExecutorError, ConcreteRequired, DocumentRefusal, OutputError, PlotUnavailable):
        assert issubclass(cls, KvproofError), cls


@pytest.mark.parametrize(("diagnostic", "file", "line"), [
    (Diagnostic("LD002", "$.a[0]", "expected a string", "r.json"), None, "r.json: LD002 $.a[0]: expected a string"),
    (Diagnostic("LD002", "$.a[0]", "expected a string"), None, "LD002 $.a[0]: expected a string"),
    (Diagnostic("BO001", "$", "m", "own.json"), "report.json", "report.json: BO001 $: m"),
    (Diagnostic("BO001", "$", "m"), "report.json", "report.json: BO001 $: m"),
])
def test_one_renderer_names_the_file_the_rule_the_path_and_the_text(diagnostic, file, line) -> None:
    assert diagnostic.render(file) == line
    assert diagnostic.render(file).endswith(diagnostic.text())
    assert diagnostic.text() == f"{diagnostic.rule} {diagnostic.at()}"
    assert diagnostic.at() == f"{diagnostic.path}: {diagnostic.message}"


#: The solver's witness replay (prove.py, claims/) still writes its own lines; its change of
#: issue #14 gives it one replay helper: drop this then.
_SOLVER_SPLIT_ELSEWHERE = ()


def test_no_module_formats_a_diagnostic_line_by_hand() -> None:
    """``RULE PATH: MESSAGE`` (and its ``PATH: MESSAGE`` part) is written only by Diagnostic's
    renderer; a command that prints a diagnostic of its own builds a Diagnostic and renders it."""
    import re
    from pathlib import Path

    hand_made = re.compile(r"\{[\w.]+\.rule\} \{[\w.]+\.path\}|\{[\w.]+\.path\}: \{[\w.]+\.message\}|f[\"'][^\"']*LD00\d \$")
    root = Path(kvproof.__file__).parent
    found = [f"{path.relative_to(root)}:{number}"
             for path in sorted(root.rglob("*.py"))
             if path.name != "diagnostics.py" and path.relative_to(root).parts[0] not in _SOLVER_SPLIT_ELSEWHERE
             for number, line in enumerate(path.read_text().splitlines(), 1) if hand_made.search(line)]
    assert found == []
