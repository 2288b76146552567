"""Strict JSON loading and dumping of kvproof's attrs models through cattrs.

Strict means every one of these is a diagnostic with the JSON path of the offending value,
never a traceback and never a silent coercion:

* unreadable JSON (syntax, encoding, nesting deeper than the parser allows, oversized input);
* duplicate keys, ``NaN``/``Infinity`` literals and numbers that overflow to infinity;
* an unknown key, a missing required key;
* a bool or a float where an integer belongs, a string where a number belongs (and back);
* a negative integer where none is allowed, an integer past 2**53;
* a value outside its enumeration.

Optional fields default to :data:`ABSENT`, which is distinct from JSON ``null``: an absent key
stays absent on dump and a ``null`` stays ``null``, so load-then-dump gives back the same bytes
for a document written in the canonical layout of :func:`dumps`.
"""

from __future__ import annotations

import json
import math
import typing
from typing import Any, Literal, NewType, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from ..diagnostics import LOAD_SCHEMA, LOAD_SYNTAX, Diagnostic, InputError

__all__ = [
    "ABSENT", "Absent", "present", "SignedInt", "Scalar", "MAX_SAFE_INT", "MAX_DOCUMENT_BYTES",
    "parse_json", "structure", "unstructure", "dumps", "load_document", "converter",
]

MAX_SAFE_INT = 2**53
#: Documents larger than this are refused before parsing (bounded time and memory for a CI gate).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

T = TypeVar("T")


@attrs.frozen
class Absent:
    """The type of :data:`ABSENT`: a key that the document does not hold."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = Absent()


def present(value: Any) -> bool:
    """True for a value that is neither absent nor ``null``."""
    return value is not ABSENT and value is not None


#: An integer that may be negative (|v| <= 2**53); rules decide whether a negative value is valid.
SignedInt = NewType("SignedInt", int)
#: Any JSON scalar (int, float, bool or null), kept as written so that a rule, not the loader,
#: judges it (for example a bool checkpoint count or a zero concurrency).
Scalar = NewType("Scalar", object)


class _NonFinite(float):
    """A NaN/Infinity literal, kept by the parser so the schema pass can name its path."""

    literal: str

    def __new__(cls, literal: str):
        obj = super().__new__(cls, float(literal.replace("Infinity", "inf")))
        obj.literal = literal
        return obj


class _DuplicateKeys(dict):
    """A JSON object that repeated a key; the schema pass reports it with its path."""

    duplicates: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict = {}
    duplicates = []
    for key, value in pairs:
        if key in seen:
            duplicates.append(key)
        seen[key] = value
    if duplicates:
        out = _DuplicateKeys(seen)
        out.duplicates = duplicates
        return out
    return seen


def parse_json(data: bytes | str, file: str | None = None) -> Any:
    """Parse JSON strictly; raise :class:`InputError` with a path for every problem."""
    if isinstance(data, bytes):
        if len(data) > MAX_DOCUMENT_BYTES:
            raise InputError([_syntax(f"document is larger than {MAX_DOCUMENT_BYTES} bytes", file)])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError([_syntax(f"document is not UTF-8 text (byte {exc.start})", file)]) from None
    else:
        text = data
        if len(text) > MAX_DOCUMENT_BYTES:
            raise InputError([_syntax(f"document is larger than {MAX_DOCUMENT_BYTES} bytes", file)])
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise InputError([_syntax("document is empty", file)])
    try:
        tree = json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_NonFinite)
    except json.JSONDecodeError as exc:
        raise InputError([_syntax(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", file)]) from None
    except RecursionError:
        raise InputError([_syntax("JSON nesting is too deep", file)]) from None
    problems = list(_scan(tree, file))
    if problems:
        raise InputError(problems)
    return tree


def _syntax(message: str, file: str | None) -> Diagnostic:
    return Diagnostic(LOAD_SYNTAX, "$", message, file)


def _scan(tree: Any, file: str | None):
    """Report duplicate keys and non-finite numbers, iteratively (no recursion limit)."""
    stack: list[tuple[str, Any]] = [("$", tree)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node, _DuplicateKeys):
                for key in node.duplicates:
                    yield Diagnostic(LOAD_SCHEMA, _join(path, key), f"duplicate key {key!r}", file)
            for key in reversed(list(node)):
                stack.append((_join(path, key), node[key]))
        elif isinstance(node, list):
            for index in range(len(node) - 1, -1, -1):
                stack.append((f"{path}[{index}]", node[index]))
        elif isinstance(node, float) and not math.isfinite(node):
            if isinstance(node, _NonFinite):
                yield Diagnostic(LOAD_SCHEMA, path, f"non-finite number {node.literal} is not allowed", file)
            else:
                yield Diagnostic(LOAD_SCHEMA, path, "number overflows to infinity", file)


def _join(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


# --------------------------------------------------------------------------------------------
# The converter


class _Refusal(ValueError):
    pass


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _int(value: Any, _type: Any) -> int:
    if type(value) is not int:
        raise _Refusal(f"expected a non-negative integer, got {_describe(value)}")
    if value < 0:
        raise _Refusal(f"expected a non-negative integer, got {value}")
    if value > MAX_SAFE_INT:
        raise _Refusal(f"integer {value} exceeds 2**53")
    return value


def _signed_int(value: Any, _type: Any) -> int:
    if type(value) is not int:
        raise _Refusal(f"expected an integer, got {_describe(value)}")
    if abs(value) > MAX_SAFE_INT:
        raise _Refusal(f"integer {value} exceeds 2**53 in magnitude")
    return value


def _float(value: Any, _type: Any) -> float | int:
    if type(value) not in (int, float):
        raise _Refusal(f"expected a number, got {_describe(value)}")
    if type(value) is int and abs(value) > MAX_SAFE_INT:
        raise _Refusal(f"number {value} exceeds 2**53 in magnitude")
    return value


def _bool(value: Any, _type: Any) -> bool:
    if type(value) is not bool:
        raise _Refusal(f"expected a bool, got {_describe(value)}")
    return value


def _str(value: Any, _type: Any) -> str:
    if type(value) is not str:
        raise _Refusal(f"expected a string, got {_describe(value)}")
    return value


def _scalar(value: Any, _type: Any) -> Any:
    if isinstance(value, (dict, list, str)):
        raise _Refusal(f"expected a number, a bool or null, got {_describe(value)}")
    if type(value) is int and abs(value) > MAX_SAFE_INT:
        raise _Refusal(f"integer {value} exceeds 2**53 in magnitude")
    return value


def _literal_hook(type_: Any):
    allowed = get_args(type_)

    def hook(value: Any, _t: Any) -> Any:
        for option in allowed:
            if type(value) is type(option) and value == option:
                return value
        shown = ", ".join(json.dumps(option) for option in allowed)
        raise _Refusal(f"expected one of {shown}, got {json.dumps(value) if _jsonable(value) else _describe(value)}")

    return hook


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _list_hook_factory(type_: Any, conv: cattrs.Converter):
    base = cattrs.cols.list_structure_factory(type_, conv)

    def hook(value: Any, t: Any) -> list:
        if type(value) is not list:
            raise _Refusal(f"expected an array, got {_describe(value)}")
        return base(value, t)

    return hook


def _dict_hook_factory(type_: Any, conv: cattrs.Converter):
    key_type, value_type = get_args(type_) or (str, Any)
    value_hook = conv.get_structure_hook(value_type)

    def hook(value: Any, _t: Any) -> dict:
        if not isinstance(value, dict):
            raise _Refusal(f"expected an object, got {_describe(value)}")
        out = {}
        errors = []
        for key, item in value.items():
            try:
                out[key] = value_hook(item, value_type)
            except Exception as exc:  # noqa: BLE001 - regrouped below with the key as a note
                exc.__notes__ = [*getattr(exc, "__notes__", []), cattrs.errors.IterableValidationNote(
                    f"Structuring mapping value @ key {key!r}", key, value_type)]
                errors.append(exc)
        if errors:
            raise cattrs.errors.IterableValidationError("While structuring a mapping", errors, dict)
        return out

    return hook


def _attrs_hook_factory(cls: type, conv: cattrs.Converter):
    base = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True)

    def hook(value: Any, t: Any) -> Any:
        if not isinstance(value, dict):
            raise _Refusal(f"expected an object, got {_describe(value)}")
        return base(value, t)

    return hook



def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(SignedInt, _signed_int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(Scalar, _scalar)
    conv.register_structure_hook_func(lambda t: get_origin(t) is Literal, lambda v, t: _literal_hook(t)(v, t))
    conv.register_structure_hook_factory(cattrs.cols.is_sequence, _list_hook_factory)
    conv.register_structure_hook_factory(cattrs.cols.is_mapping, _dict_hook_factory)
    conv.register_structure_hook_factory(attrs.has, _attrs_hook_factory)
    conv.register_unstructure_hook_factory(attrs.has, _attrs_unstructure_factory)
    return conv


def _attrs_unstructure_factory(cls: type, conv: cattrs.Converter | None = None):
    fields = attrs.fields(cls)

    def hook(obj: Any) -> dict:
        out = {}
        for field in fields:
            value = getattr(obj, field.name)
            if value is ABSENT:
                continue
            out[field.alias if field.alias else field.name] = converter.unstructure(value)
        return out

    return hook


converter = _make_converter()


def _format(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        return "\x00extra\x00" + "\x00".join(sorted(exc.extra_fields))
    if isinstance(exc, KeyError):
        return "required key is missing"
    if isinstance(exc, _Refusal):
        return str(exc)
    if isinstance(exc, (ValueError, TypeError)):
        return f"invalid value: {exc}"
    return f"invalid value ({type(exc).__name__})"


def structure(tree: Any, cls: type[T], file: str | None = None) -> T:
    """Build ``cls`` from a parsed JSON tree or raise :class:`InputError` with JSON paths."""
    try:
        return converter.structure(tree, cls)
    except Exception as exc:  # noqa: BLE001 - every structuring failure becomes diagnostics
        diagnostics = []
        for line in cattrs.transform_error(exc, path="$", format_exception=_format):
            message, _, path = line.rpartition(" @ ")
            path = _normalise_path(path)
            if message.startswith("\x00extra\x00"):
                for key in message.split("\x00")[2:]:
                    diagnostics.append(Diagnostic(LOAD_SCHEMA, _join(path, key), f"unknown key {key!r}", file))
            else:
                diagnostics.append(Diagnostic(LOAD_SCHEMA, path, message, file))
        raise InputError(sorted(set(diagnostics), key=lambda d: (d.path, d.message))) from None


def _normalise_path(path: str) -> str:
    # cattrs writes mapping keys as ['key']; kvproof writes identifiers as .key and others as ["key"].
    out = []
    i = 0
    while i < len(path):
        end = path.find("']", i) if path.startswith("['", i) else -1
        if end != -1:
            out.append(_join("", path[i + 2:end]))
            i = end + 2
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def unstructure(obj: Any) -> Any:
    """The JSON tree of a model object; :data:`ABSENT` fields are left out."""
    return converter.unstructure(obj)


def dumps(tree: Any) -> str:
    """Canonical text of a JSON tree: 2-space indent, keys in model order, newline at the end."""
    return json.dumps(tree, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def load_document(data: bytes | str, cls: type[T], file: str | None = None) -> T:
    """Parse and structure in one step."""
    return structure(parse_json(data, file), cls, file)


def optional_args(type_: Any) -> tuple:
    """The non-None members of an optional annotation (helper for schema export)."""
    if get_origin(type_) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return tuple(a for a in get_args(type_) if a is not type(None))
    return (type_,)
