"""Rules: declared once, evaluated on concrete documents (the checker) and on z3 terms (the solver).

A rule is a *body* (a function over model objects written with :mod:`kvproof.logic` helpers
that returns whether the checked property **holds**), a *binding* (which objects of a document
the body judges, each with the JSON path of that object), a stable ID, an exact message, the
vLLM 0.33.0 source it follows, and its prerequisites (``after``).

Bindings only walk lists and mappings, whose lengths are concrete even in a symbolic document;
every test of a *value* belongs in the body, so the solver sees it.
"""

from __future__ import annotations

import functools
import inspect
import json
import weakref
from typing import Any, Callable, Iterable, Literal

import attrs

from ..diagnostics import Diagnostic

__all__ = [
    "Instance", "Binding", "binding", "Rule", "rule", "declared_rules", "Diagnostic", "child", "FAMILIES",
]

#: The rule families: two-letter ID prefix -> (module, title).
FAMILIES: dict[str, tuple[str, str]] = {
    "VG": ("version_gate", "version gate"),
    "SC": ("spec_classes", "cache-spec classes"),
    "VC": ("view_coverage", "view coverage"),
    "BO": ("block_ownership", "block ownership and placement"),
    "SU": ("startup_concurrency", "startup concurrency"),
    "CK": ("checkpoint_counts", "checkpoint counts"),
    "PC": ("prefix_caching", "prefix caching and block sizes"),
    "PF": ("profile_fields", "profile fields"),
    "SS": ("state_support", "ReplaySSM / RecoverSSM state support"),
    "RS": ("record_sets", "record sets"),
    "PA": ("profile_records", "profile against records"),
    "CA": ("profile_capacity", "profile capacity"),
    "ST": ("state_storage", "storage policies and state layouts"),
}

DocumentKind = Literal["profile", "worker", "scheduler", "bundle"]


def child(path: str, key: str | int) -> str:
    """The JSON path of ``key`` under ``path`` (``$.a.b``, ``$.a[3]``, ``$.a["x.y"]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return path + _step(key)


class identity_cache:  # noqa: N801 - a decorator, named as functools' are
    """Memoize a pure function of one immutable object by the object's identity (a record or a
    symbolic document: hashing one by value would cost a walk of it). An entry is dropped when
    its object is collected, so an id is never reused for another object."""

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn
        self._entries: dict[int, tuple] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, obj: Any) -> Any:
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = self.fn(obj)
        entries = self._entries
        self._entries[id(obj)] = (weakref.ref(obj, lambda _ref, key=id(obj): entries.pop(key, None)), value)
        return value

    def cache_clear(self) -> None:
        self._entries.clear()


# A pure function of the key, cached: layer names such as ``model.layers.0.attn`` need a quoted
# step, and ``json.dumps`` per call was a visible part of a check. Bounded, so arbitrary input
# cannot grow it without limit.
@functools.lru_cache(maxsize=4096)
def _step(key: str) -> str:
    return f".{key}" if key.isidentifier() else f"[{json.dumps(key)}]"


@attrs.define(eq=False)
class Instance:
    """One application of a rule: the judged object's path and the body's arguments (treated
    as immutable; not frozen because the checker creates thousands per document set)."""

    subject: str
    args: tuple
    #: Placeholder values for the message (concrete documents only).
    names: dict = attrs.field(factory=dict)
    #: JSON path of the offending value; defaults to ``subject`` (+ the rule's ``field``).
    blame: str | None = None
    #: The file the subject lives in, for bindings over a bundle of documents.
    file: str | None = None


@attrs.frozen
class Binding:
    """Which objects of which kind of document a rule judges."""

    kinds: tuple[str, ...]
    walk: Callable[[Any], Iterable[Instance]]
    name: str

    def __call__(self, document: Any) -> Iterable[Instance]:
        memo = _MEMO
        if memo is None:
            return self.walk(document)
        # Inside a concrete check: each binding walks each target once (bindings built on
        # others, such as VC005's on layer_views, reuse its instances).
        key = (id(self), id(document))
        found = memo.get(key)
        if found is None:
            found = memo[key] = list(self.walk(document))
        return found


#: The instances of every (binding, target) walked during the running concrete check, or None
#: (set by :func:`kvproof.rules.check.check` through :func:`binding_memo`; its targets, the
#: checked documents and their bundles, stay alive while it runs, so their ids stay theirs).
_MEMO: dict | None = None


class binding_memo:
    """Context manager: bindings called inside it remember their instances per target."""

    def __enter__(self) -> dict:
        global _MEMO
        self._previous = _MEMO
        _MEMO = {}
        return _MEMO

    def __exit__(self, *exc) -> bool:
        global _MEMO
        _MEMO = self._previous
        return False


def binding(*kinds: str):
    """Declare a binding function over documents of the given kinds."""

    def wrap(fn: Callable[[Any], Iterable[Instance]]) -> Binding:
        return Binding(tuple(kinds), fn, fn.__name__)

    return wrap


@attrs.frozen
class Rule:
    id: str
    message: str
    over: Binding
    body: Callable[..., Any]
    source: str
    after: tuple[str, ...] = ()
    expect: Literal["reachable", "dead"] = "reachable"
    #: Why a rule is expected dead (required when ``expect == "dead"``).
    reason: str | None = None
    #: The field of the subject that a failure blames (appended to the subject path).
    field: str | None = None
    #: Extra message placeholders computed from the (concrete) body arguments on failure.
    explain: Callable[..., dict] | None = None
    doc: str = ""

    @property
    def family(self) -> str:
        return self.id[:2]

    def holds(self, instance: Instance) -> Any:
        """The body's verdict: a bool for concrete arguments, a z3 term for symbolic ones."""
        return self.body(*instance.args)

    def diagnostic(self, instance: Instance, file: str | None = None) -> Diagnostic:
        names = dict(instance.names)
        if self.explain is not None:
            names.update(self.explain(*instance.args))
        text = self.message.format(**names) if names else self.message
        path = instance.blame or instance.subject
        if instance.blame is None and self.field:
            for part in self.field.split("."):
                path = child(path, part)
        return Diagnostic(self.id, path, text, file)


_DECLARED: dict[str, Rule] = {}


def rule(
    *,
    id: str,
    message: str,
    over: Binding,
    source: str,
    after: tuple[str, ...] = (),
    expect: Literal["reachable", "dead"] = "reachable",
    reason: str | None = None,
    field: str | None = None,
    explain: Callable[..., dict] | None = None,
) -> Callable[[Callable[..., Any]], Rule]:
    """Declare a rule; the decorated function is its body (returns whether the property holds)."""

    if id[:2] not in FAMILIES or len(id) != 5 or not id[2:].isdigit():
        raise ValueError(f"rule ID {id!r} is not a family prefix and three digits")
    if expect == "dead" and not reason:
        raise ValueError(f"rule {id} expects dead but gives no reason")

    def wrap(body: Callable[..., Any]) -> Rule:
        if id in _DECLARED:
            raise ValueError(f"rule ID {id} declared twice")
        declared = Rule(
            id=id, message=message, over=over, body=body, source=source, after=tuple(after),
            expect=expect, reason=reason, field=field, explain=explain,
            doc=inspect.cleandoc(body.__doc__ or ""),
        )
        _DECLARED[id] = declared
        return declared

    return wrap


def declared_rules() -> dict[str, Rule]:
    """Every rule declared so far, by ID (the registry orders them)."""
    return dict(_DECLARED)
