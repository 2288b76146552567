"""JSON Schema (draft 2020-12) export of the attrs models, from their type annotations.

The schema states what the loader accepts; the rules state what the values must satisfy.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

import attrs

from .codec import ABSENT, MAX_SAFE_INT, Scalar, SignedInt

__all__ = ["schema_for", "schema_of_class"]


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
        for field in attrs.fields(cls):
            key = field.alias or field.name
            properties[key] = {**self.type_schema(hints[field.name]), **field.metadata.get("json_schema", {})}
            if field.default is attrs.NOTHING:
                required.append(key)
            elif field.default is not ABSENT and not isinstance(field.default, attrs.Factory):
                properties[key]["default"] = field.default
        out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            out["required"] = required
        if cls.__doc__:
            out["description"] = " ".join(cls.__doc__.split())
        return out


def schema_of_class(cls: type, title: str) -> dict:
    builder = _Builder()
    root = builder.class_schema(cls)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **root, "$defs": builder.defs}


def schema_for(kind: str) -> dict:
    """The schema of ``record`` (worker or scheduler), ``profile`` or ``geometry``."""
    builder = _Builder()
    if kind == "record":
        from .record import SchedulerRecord, WorkerRecord

        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "kvproof runtime observation record (worker or scheduler)",
            "oneOf": [builder.ref(WorkerRecord), builder.ref(SchedulerRecord)],
            "$defs": builder.defs,
        }
    if kind == "profile":
        from .profile import Profile

        return schema_of_class(Profile, "kvproof FPM profile")
    if kind == "geometry":
        from .geometry import Geometry

        return schema_of_class(Geometry, "kvproof geometry (input of simulate, synth, explore)")
    raise ValueError(f"unknown document kind {kind!r}")
