"""The concrete checker: every applicable rule, in registry order, over loaded documents.

Every failing rule instance is reported, except an instance whose prerequisites (``after``)
failed, or were themselves skipped, on the same object, an enclosing object or an object inside
it (no cascades).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import attrs

from ..diagnostics import Diagnostic
from ..logic import concrete_bool, concrete_only
from ..models.documents import Document
from .core import Rule, binding_memo
from .registry import all_rules

__all__ = ["Bundle", "bundles", "check"]


@attrs.frozen
class Bundle:
    """The documents checked together (cross-record rules bind over it)."""

    documents: tuple[Document, ...]
    #: The documents are one import's whole record set (every phase it reads): the RS rules judge
    #: it as one however few records it holds (``kvproof import``).
    whole: bool = False

    def of_kind(self, kind: str) -> list[Document]:
        """The checked documents of a kind (an accepted probe's records are not among them)."""
        return [document for document in self.documents if document.kind == kind and document.role != "probe"]


def _related(a: str, b: str) -> bool:
    """One JSON path is the other or lies inside it."""
    if a == b:
        return True
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return longer.startswith(shorter) and longer[len(shorter)] in ".["


def bundles(documents: tuple[Document, ...], whole: bool = False) -> list[Bundle]:
    """The record sets checked together: the checked documents of one directory (a probe run or a
    phase writes one directory of records), each with every probe document; with ``whole`` every
    checked document in one bundle (an import's phases and the profile it derived)."""
    probes = tuple(d for d in documents if d.role == "probe")
    if whole:
        return [Bundle(tuple(d for d in documents if d.role != "probe") + probes, whole=True)]
    by_directory: dict[str, list[Document]] = {}
    for document in documents:
        if document.role != "probe":
            by_directory.setdefault(str(Path(document.file).parent) if document.file else "", []).append(document)
    return [Bundle(tuple(members) + probes) for _, members in sorted(by_directory.items())]


def _targets(rule: Rule, documents: tuple[Document, ...], groups: list[Bundle]) -> Iterable[tuple[str | None, object]]:
    if "bundle" in rule.over.kinds:
        for bundle in groups:
            yield None, bundle
    for document in documents:
        if document.kind in rule.over.kinds and document.role != "probe":
            yield document.file, document.obj


def check(documents: Iterable[Document], rules: Iterable[Rule] | None = None, whole: bool = False) -> list[Diagnostic]:
    """All diagnostics for the documents, in rule order then binding order (``whole``: the
    checked documents are one record set, see :func:`bundles`)."""
    with concrete_only(), binding_memo():
        return _check(tuple(documents), rules, whole)


def _check(documents: tuple[Document, ...], rules: Iterable[Rule] | None, whole: bool = False) -> list[Diagnostic]:
    groups = bundles(documents, whole)
    twins = _twins(documents)
    failed: dict[str, list[tuple[str | None, str]]] = {}
    diagnostics: list[Diagnostic] = []
    for rule in all_rules() if rules is None else rules:
        found: dict[int, list[tuple[str, Diagnostic | None]]] = {}
        blocked = [entry for prerequisite in rule.after for entry in failed.get(prerequisite, ())]
        body = rule.body  # Rule.holds without the call (the hot loop)
        for file, target in _targets(rule, documents, groups):
            twin = twins.get(id(target))
            if twin is not None and id(twin[0]) in found:
                # Same content as an earlier worker record (another TP rank): same findings.
                for subject, diagnostic in found[id(twin[0])]:
                    failed.setdefault(rule.id, []).append((file, subject))
                    if diagnostic is not None:
                        diagnostics.append(attrs.evolve(diagnostic, file=file))
                continue
            mine = found.setdefault(id(target), [])
            for instance in rule.over(target):  # bindings are pure: walked once per target (binding_memo)
                where = instance.file or file
                if blocked and _suppressed(where, instance.subject, blocked):
                    # Not judged: rules that depend on this one skip the same objects too.
                    failed.setdefault(rule.id, []).append((where, instance.subject))
                    mine.append((instance.subject, None))
                    continue
                verdict = body(*instance.args)
                if verdict is True or concrete_bool(verdict):
                    continue
                failed.setdefault(rule.id, []).append((where, instance.subject))
                diagnostic = rule.diagnostic(instance, where)
                diagnostics.append(diagnostic)
                mine.append((instance.subject, diagnostic))
    return diagnostics


def _twins(documents: tuple[Document, ...]) -> dict[int, tuple]:
    """Worker records the loader found to be TP-rank twins (``Document.rank_twin_of``, set by
    models.documents.RankTwins: equal but for ranks and devices, types included), each mapped to
    the first checked record of its kind: record-level rules judge them alike. Records loaded
    without a RankTwins are each judged on their own.

    The rules of a worker record read neither ranks nor devices, which a test checks."""
    twins: dict[int, tuple] = {}
    first: dict[int, object] = {}
    for document in documents:
        if document.kind != "worker" or document.role == "probe":
            continue
        original = id(document.rank_original())
        if original in first:
            twins[id(document.obj)] = (first[original],)
        else:
            first[original] = document.obj
    return twins


def _suppressed(file: str | None, subject: str, blocked: list[tuple[str | None, str]]) -> bool:
    """A prerequisite failed (or was skipped) on this object, one around it or one inside it."""
    for failed_file, failed_subject in blocked:
        if failed_file == file and _related(failed_subject, subject):
            return True
    return False

