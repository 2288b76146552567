"""JSON Schema (draft 2020-12) export of the attrs models, from their type annotations.

The schema states what the loader accepts; the rules state what the values must satisfy. Each
schema has an ``$id`` (a URN: kvproof publishes no schema server), each class a ``title`` and its
docstring as ``description``, each field the ``#:`` comment above it in the model as its
``description``, so an editor that is given the schema (docs/formats.md) explains every key.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

import attrs

from .codec import ABSENT, MAX_SAFE_INT, Scalar, SignedInt

__all__ = ["schema_for", "schema_of_class", "schema_id", "field_docs"]

_FIELD = re.compile(r"^\s+(\w+)\s*:")
_DOC = re.compile(r"^\s+#:\s?(.*)$")


def schema_id(kind: str) -> str:
    return f"urn:kvproof:schema:{kind}:v1"


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of an attrs class (Sphinx's attribute-doc convention)."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    pending: list[str] = []
    for line in lines[1:]:
        doc = _DOC.match(line)
        if doc:
            pending.append(doc.group(1).strip())
            continue
        field = _FIELD.match(line)
        if field and pending:
            docs[field.group(1)] = " ".join(pending)
        pending = []
    return docs


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def type_schema(self, tp: Any) -> dict:
        if tp is SignedInt:
            return {"type": "integer", "minimum": -MAX_SAFE_INT, "maximum": MAX_SAFE_INT}
        if tp is int:
            return {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INT}
        if tp is Scalar:
            return {"type": ["integer", "number", "boolean", "null"]}
        if tp is float:
            return {"type": "number"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is str:
            return {"type": "string"}
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if tp is Any or tp is object:
            return {}
        origin = get_origin(tp)
        if origin is Literal:
            return {"enum": list(get_args(tp))}
        if _is_union(tp):
            return {"anyOf": [self.type_schema(arg) for arg in get_args(tp)]}
        if origin in (list, typing.List):
            (item,) = get_args(tp) or (Any,)
            return {"type": "array", "items": self.type_schema(item)}
        if origin in (dict, typing.Dict):
            _key, value = get_args(tp) or (str, Any)
            return {"type": "object", "additionalProperties": self.type_schema(value)}
        if origin is tuple:
            return {"type": "array", "prefixItems": [self.type_schema(a) for a in get_args(tp)]}
        if attrs.has(tp):
            return self.ref(tp)
        supertype = getattr(tp, "__supertype__", None)
        if supertype is not None:
            return self.type_schema(supertype)
        custom = getattr(tp, "__json_schema__", None)
        if custom is not None:
            return custom()
        raise TypeError(f"no JSON Schema for {tp!r}")

    def ref(self, cls: type) -> dict:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder against recursion
            self.defs[name] = self.class_schema(cls)
        return {"$ref": f"#/$defs/{name}"}

    def class_schema(self, cls: type) -> dict:
        hints = typing.get_type_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        docs = field_docs(cls)
        for field in attrs.fields(cls):
            key = field.alias or field.name
            properties[key] = {**self.type_schema(hints[field.name]), **field.metadata.get("json_schema", {})}
            if field.name in docs:
                properties[key]["description"] = docs[field.name]
            if field.default is attrs.NOTHING:
                required.append(key)
            elif field.default is not ABSENT and not isinstance(field.default, attrs.Factory):
                properties[key]["default"] = field.default
        out: dict[str, Any] = {"title": cls.__name__, "type": "object", "properties": properties,
                               "additionalProperties": False}
        if required:
            out["required"] = required
        if cls.__doc__:
            out["description"] = " ".join(cls.__doc__.split())
        return out


def schema_of_class(cls: type, title: str, kind: str | None = None) -> dict:
    builder = _Builder()
    root = builder.class_schema(cls)
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if kind:
        head["$id"] = schema_id(kind)
    return {**head, **root, "title": title, "$defs": builder.defs}


def schema_for(kind: str) -> dict:
    """The schema of ``record`` (worker or scheduler), ``profile`` or ``geometry``."""
    builder = _Builder()
    if kind == "record":
        from .record import SchedulerRecord, WorkerRecord

        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": schema_id("record"),
            "title": "kvproof runtime observation record (worker or scheduler)",
            "oneOf": [builder.ref(WorkerRecord), builder.ref(SchedulerRecord)],
            "$defs": builder.defs,
        }
    if kind == "profile":
        from .profile import Profile

        return schema_of_class(Profile, "kvproof FPM profile", "profile")
    if kind == "geometry":
        from .geometry import Geometry

        return schema_of_class(Geometry, "kvproof geometry (input of simulate, synth, explore)", "geometry")
    raise ValueError(f"unknown document kind {kind!r}")
