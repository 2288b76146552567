"""The concrete checker: every applicable rule, in registry order, over loaded documents.

Every failing rule instance is reported, except an instance whose prerequisites (``after``)
failed on the same object, an enclosing object or an object inside it (no cascades).
"""

from __future__ import annotations

from typing import Iterable

import attrs

from ..diagnostics import Diagnostic
from ..logic import concrete_bool
from ..models.documents import Document
from .core import Rule
from .registry import all_rules

__all__ = ["Bundle", "check", "check_document", "first_refusal"]


@attrs.frozen
class Bundle:
    """The documents checked together (cross-record rules bind over it)."""

    documents: tuple[Document, ...]

    def of_kind(self, kind: str) -> list[Document]:
        return [document for document in self.documents if document.kind == kind]


def _related(a: str, b: str) -> bool:
    """One JSON path is the other or lies inside it."""
    if a == b:
        return True
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    return longer.startswith(shorter) and longer[len(shorter)] in ".["


def _targets(rule: Rule, documents: tuple[Document, ...]) -> Iterable[tuple[str | None, object]]:
    if "bundle" in rule.over.kinds:
        yield None, Bundle(documents)
    for document in documents:
        if document.kind in rule.over.kinds:
            yield document.file, document.obj


def check(documents: Iterable[Document], rules: Iterable[Rule] | None = None) -> list[Diagnostic]:
    """All diagnostics for the documents, in rule order then binding order."""
    documents = tuple(documents)
    failed: dict[str, list[tuple[str | None, str]]] = {}
    diagnostics: list[Diagnostic] = []
    for rule in all_rules() if rules is None else rules:
        for file, target in _targets(rule, documents):
            for instance in rule.over(target):
                if _suppressed(rule, file, instance.subject, failed):
                    continue
                if concrete_bool(rule.holds(instance)):
                    continue
                failed.setdefault(rule.id, []).append((file, instance.subject))
                diagnostics.append(rule.diagnostic(instance, file))
    return diagnostics


def _suppressed(rule: Rule, file: str | None, subject: str, failed: dict) -> bool:
    for prerequisite in rule.after:
        for failed_file, failed_subject in failed.get(prerequisite, ()):
            if failed_file == file and _related(failed_subject, subject):
                return True
    return False


def check_document(document: Document) -> list[Diagnostic]:
    return check([document])


def first_refusal(documents: Iterable[Document]) -> Diagnostic | None:
    diagnostics = check(documents)
    return diagnostics[0] if diagnostics else None
