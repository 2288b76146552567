"""Which model fields the rules read, learned by instrumentation (not by a hand list).

:func:`tracing` installs a ``__getattribute__`` hook on every attrs class of the document models
(records and profiles) for the duration of a ``with`` block, and :func:`traced_rules` wraps each
rule's binding and body so that the hook records an attribute read only while that rule's code
runs (the checker's own bookkeeping, such as its prerequisite suppression, and any other read
outside a rule must not count). A read is a ``(class name, field name)`` pair with the IDs of the rules that
read it; a binding's reads count (a binding that pairs records by ``dp_rank`` reads it).

The checker is run unchanged (:func:`kvproof.rules.check.check` with the wrapped rules), so
prerequisite suppression and twin sharing behave exactly as in ``kvproof check``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

import attrs

from ..models import profile as _profile
from ..models import record as _record
from ..models.documents import Document
from ..rules.check import check
from ..rules.core import Binding, Rule
from ..rules.registry import all_rules

__all__ = ["MODEL_CLASSES", "ReadLog", "tracing", "traced_rules", "trace_check", "model_fields"]


def _classes() -> tuple[type, ...]:
    out = []
    for module in (_record, _profile):
        for name in sorted(vars(module)):
            value = getattr(module, name)
            if isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__:
                out.append(value)
    return tuple(out)


#: Every attrs class of records and profiles (the classes a rule can read).
MODEL_CLASSES: tuple[type, ...] = _classes()


def model_fields() -> list[tuple[str, str]]:
    """Every ``(class, field)`` pair of the document models, sorted."""
    return sorted((cls.__name__, field.name) for cls in MODEL_CLASSES for field in attrs.fields(cls))


@attrs.define
class ReadLog:
    """Reads recorded while a rule's code runs: ``(class, field) -> {rule IDs}``."""

    reads: dict[tuple[str, str], set[str]] = attrs.field(factory=dict)
    #: The rule whose binding or body is running (None: not recording).
    active: str | None = None

    def record(self, cls: str, field: str) -> None:
        self.reads.setdefault((cls, field), set()).add(self.active)

    def merge(self, other: "ReadLog") -> None:
        for key, rules in other.reads.items():
            self.reads.setdefault(key, set()).update(rules)

    def read(self, cls: str, field: str) -> bool:
        return (cls, field) in self.reads

    def readers(self, cls: str, field: str) -> list[str]:
        return sorted(self.reads.get((cls, field), ()))

    def unread(self) -> list[tuple[str, str]]:
        """Model fields no rule read."""
        return [pair for pair in model_fields() if pair not in self.reads]

    def to_json(self) -> dict:
        return {f"{cls}.{field}": sorted(rules) for (cls, field), rules in sorted(self.reads.items())}


def _installed() -> bool:
    """A :func:`tracing` block is running: its hook is on the model classes (the hooks are the
    only state tracing keeps)."""
    return getattr(MODEL_CLASSES[0].__dict__.get("__getattribute__"), "traced_log", None) is not None


@contextlib.contextmanager
def tracing(log: ReadLog) -> Iterator[ReadLog]:
    """Record the field reads of rule code into ``log`` inside the block (not re-entrant)."""
    if _installed():
        raise RuntimeError("read tracing is already active")
    saved: list[tuple[type, Any]] = []
    for cls in MODEL_CLASSES:
        names = frozenset(field.name for field in attrs.fields(cls))
        own = cls.__dict__.get("__getattribute__")
        original = cls.__getattribute__

        def getattribute(self, name, _original=original, _names=names, _cls=cls.__name__, _log=log):
            if _log.active is not None and name in _names:
                _log.record(_cls, name)
            return _original(self, name)

        getattribute.traced_log = log
        saved.append((cls, own))
        cls.__getattribute__ = getattribute
    try:
        yield log
    finally:
        for cls, own in saved:
            if own is None:
                del cls.__getattribute__
            else:
                cls.__getattribute__ = own


def _traced_binding(rule: Rule, log: ReadLog) -> Binding:
    walk = rule.over.walk

    def traced(document):
        iterator = None
        previous = log.active
        log.active = rule.id
        try:
            iterator = iter(walk(document))
        finally:
            log.active = previous
        while True:
            previous = log.active
            log.active = rule.id
            try:
                instance = next(iterator)
            except StopIteration:
                return
            finally:
                log.active = previous
            yield instance

    return attrs.evolve(rule.over, walk=traced)


def _traced_body(rule: Rule, log: ReadLog):
    body = rule.body

    def traced(*args):
        previous = log.active
        log.active = rule.id
        try:
            return body(*args)
        finally:
            log.active = previous

    traced.__name__ = getattr(body, "__name__", "body")
    return traced


def traced_rules(rules: Iterable[Rule], log: ReadLog) -> list[Rule]:
    """The rules with bindings and bodies that record their reads into ``log``."""
    return [attrs.evolve(rule, over=_traced_binding(rule, log), body=_traced_body(rule, log)) for rule in rules]


def trace_check(documents: Iterable[Document], rules: Iterable[Rule] | None = None,
                log: ReadLog | None = None) -> tuple[list, ReadLog]:
    """Run the checker on ``documents`` and return its diagnostics and the reads of its rules."""
    log = log if log is not None else ReadLog()
    wrapped = traced_rules(all_rules() if rules is None else rules, log)
    with tracing(log):
        diagnostics = check(list(documents), wrapped)
    return diagnostics, log
