"""A pytest plugin (entry point ``pytest11``, name ``kvproof``): assert kvproof's verdicts on your
own records and profiles from your own tests.

    from kvproof.pytest_plugin import assert_accepted, assert_refused

    def test_our_profile_is_accepted():
        assert_accepted("profiles/glm-tp4.json")

    def test_a_two_block_checkpoint_is_refused(kvproof):
        kvproof.assert_refused("fixtures/two_blocks.json", "CK002", path="$.cache.groups[0].state.num_prefill_checkpoint_blocks")

Each helper checks exactly as ``kvproof check PATHS`` does (a directory is one record set) and,
when the verdict is not the one asserted, fails with the check's text report. Nothing is imported
from kvproof's checker until a helper runs, so the plugin costs a test session nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .report import FileResult

__all__ = ["check", "assert_accepted", "assert_refused", "KvproofHelper"]



def _names(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def check(paths, probe=()) -> list[FileResult]:
    """The per-file results of ``kvproof check PATHS [--probe PROBE]``."""
    from .commands.check import evaluate

    return evaluate(_names(paths), _names(probe) if probe else ())


def _report(results) -> str:
    from .report import render_text

    return render_text(results)


def assert_accepted(paths, probe=()) -> None:
    """Every document under ``paths`` loads and every rule accepts it (``kvproof check`` exit 0)."""
    __tracebackhide__ = True
    from .report import exit_code

    results = check(paths, probe)
    if exit_code(results) != 0:
        pytest.fail(f"kvproof check did not accept {', '.join(_names(paths))}:\n{_report(results)}", pytrace=False)


def assert_refused(paths, rule: str, path: str | None = None, probe=(), first: bool = False) -> list:
    """``rule`` (an ID, case-insensitive: a rule's or a loader's LD ID) refuses the documents under
    ``paths``, at the JSON path ``path`` when given; with ``first``, before any other finding.
    Returns the matching diagnostics."""
    __tracebackhide__ = True
    wanted = rule.upper()
    results = check(paths, probe)
    found = [d for r in results for d in r.diagnostics]
    matching = [d for d in found if d.rule == wanted and (path is None or d.path == path)]
    where = f" at {path}" if path else ""
    if not matching:
        pytest.fail(f"kvproof check did not refuse {', '.join(_names(paths))} with {wanted}{where}:\n{_report(results)}",
                    pytrace=False)
    if first and found[0] is not matching[0]:
        pytest.fail(f"{wanted}{where} is not the first finding on {', '.join(_names(paths))}:\n{_report(results)}",
                    pytrace=False)
    return matching


class KvproofHelper:
    """The ``kvproof`` fixture: the helpers, with relative paths taken from the test's folder."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _here(self, paths) -> list[str]:
        return [p if os.path.isabs(p) else os.path.join(self.root, p) for p in _names(paths)]

    def check(self, paths, probe=()) -> list[FileResult]:
        return check(self._here(paths), self._here(probe) if probe else ())

    def assert_accepted(self, paths, probe=()) -> None:
        __tracebackhide__ = True
        assert_accepted(self._here(paths), self._here(probe) if probe else ())

    def assert_refused(self, paths, rule: str, path: str | None = None, probe=(), first: bool = False) -> list:
        __tracebackhide__ = True
        return assert_refused(self._here(paths), rule, path, self._here(probe) if probe else (), first)


@pytest.fixture
def kvproof(request) -> KvproofHelper:
    """kvproof's checker for this test: ``kvproof.assert_accepted(path)``,
    ``kvproof.assert_refused(path, "CK002")``, ``kvproof.check(path)``; relative paths are
    taken from the folder of the test file."""
    return KvproofHelper(os.fspath(request.path.parent))
