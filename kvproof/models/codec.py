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
import itertools
import math
import re
import sys
import threading
import types
import typing
from typing import Any, Literal, NewType, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn

from ..diagnostics import LOAD_SCHEMA, LOAD_SYNTAX, Diagnostic, InputError, KvproofError

__all__ = [
    "ABSENT", "Absent", "present", "SignedInt", "Scalar", "MAX_SAFE_INT", "MAX_DOCUMENT_BYTES",
    "parse_json", "structure", "unstructure", "dumps", "load_document", "converter", "DocumentRefusal",
]

MAX_SAFE_INT = 2**53
#: Documents larger than this are refused before parsing (bounded time and memory for a CI gate).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: At most this many loader diagnostics per document (then one saying that more were left out),
#: and at most :data:`MAX_PROBLEMS_PER_CONTAINER` per array or object: a ten-million-element array
#: of wrong values costs bounded time and memory, not one exception per element.
MAX_PROBLEMS = 200
MAX_PROBLEMS_PER_CONTAINER = 20

T = TypeVar("T")


@attrs.frozen(eq=False)
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


_NON_FINITE = {literal: _NonFinite(literal) for literal in ("NaN", "Infinity", "-Infinity")}


class _HugeInt:
    """An integer literal longer than Python converts (``sys.get_int_max_str_digits()``), kept
    by the parser's second pass so the scan can name its path."""

    def __init__(self, digits: int):
        self.digits = digits


class _DuplicateKeys(dict):
    """A JSON object that repeated a key; the schema pass reports it with its path."""

    duplicates: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict = {}
    duplicates: dict = {}  # each repeated key once (in order), however often it repeats
    for key, value in pairs:
        if key in seen:
            duplicates[key] = None
        seen[key] = value
    if duplicates:
        out = _DuplicateKeys(seen)
        out.duplicates = list(duplicates)
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
    if not text or text.isspace():  # (isspace stops at the first other character; strip() copies)
        raise InputError([_syntax("document is empty", file)])
    # Fast path: the parser's hooks raise a flag when they meet a duplicate key, a NaN/Infinity
    # literal or a float that overflows; only a flagged tree is walked (with paths) by _scan.
    flagged: list[bool] = []

    def object_pairs(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            flagged.append(True)
            return _object_pairs(pairs)
        return obj

    def constant(literal: str) -> float:
        flagged.append(True)
        return _NON_FINITE[literal]  # one shared object per literal: an array of NaNs stays small

    def number(literal: str) -> float:
        value = float(literal)
        if value in _INFINITIES:
            flagged.append(True)
        return value

    try:
        tree = json.loads(text, object_pairs_hook=object_pairs, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError as exc:
        message = exc.msg[:-3] if exc.msg.endswith(" at") else exc.msg  # "starting at" + " at line"
        raise InputError([_syntax(f"invalid JSON: {message} at line {exc.lineno} column {exc.colno}", file)]) from None
    except RecursionError:
        raise InputError([_syntax("JSON nesting is too deep", file)]) from None
    except ValueError:
        # An integer literal past Python's digit limit (CPython refuses int() of more than
        # 4,300 digits, in linear time); parse again and keep such literals as markers.
        try:
            tree = json.loads(text, object_pairs_hook=object_pairs, parse_constant=constant, parse_float=number,
                              parse_int=_huge_int)
        except ValueError as exc:
            raise InputError([_syntax(f"invalid JSON: {exc}", file)]) from None
        flagged.append(True)
    if flagged:
        problems = list(itertools.islice(_scan(tree, file), MAX_PROBLEMS + 1))
        if len(problems) > MAX_PROBLEMS:
            problems[MAX_PROBLEMS:] = [_more_problems(file)]
        if problems:
            raise InputError(problems)
    return tree


def _huge_int(literal: str) -> int | _HugeInt:
    digits = len(literal.lstrip("-"))
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if limit and digits > limit:
        return _HugeInt(digits)
    return int(literal)


_INFINITIES = (math.inf, -math.inf)


def _more_problems(file: str | None) -> Diagnostic:
    return Diagnostic(LOAD_SCHEMA, "$", f"more problems not reported after the first {MAX_PROBLEMS}", file)


def _syntax(message: str, file: str | None) -> Diagnostic:
    return Diagnostic(LOAD_SYNTAX, "$", message, file)


def _scan(tree: Any, file: str | None):
    """Report duplicate keys, non-finite numbers and oversized integer literals in document
    order, iteratively (no recursion limit) and lazily (a stack of iterators, not of every
    child: a flat array of ten million values costs no extra memory)."""
    yield from _scan_node("$", tree, file)
    stack: list[tuple[str, Any]] = []
    if isinstance(tree, (dict, list)):
        stack.append((("$", _children(tree))))
    while stack:
        path, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        step, node = child
        child_path = f"{path}[{step}]" if type(step) is int else _join(path, step)
        yield from _scan_node(child_path, node, file)
        if isinstance(node, (dict, list)) and node:
            stack.append((child_path, _children(node)))


def _children(node: Any):
    return iter(node.items()) if isinstance(node, dict) else enumerate(node)


def _scan_node(path: str, node: Any, file: str | None):
    if isinstance(node, _DuplicateKeys):
        for key in node.duplicates:
            yield Diagnostic(LOAD_SCHEMA, _join(path, key), f"duplicate key {key!r}", file)
    elif isinstance(node, float) and not math.isfinite(node):
        if isinstance(node, _NonFinite):
            yield Diagnostic(LOAD_SCHEMA, path, f"non-finite number {node.literal} is not allowed", file)
        else:
            yield Diagnostic(LOAD_SCHEMA, path, "number overflows to infinity", file)
    elif isinstance(node, _HugeInt):
        yield Diagnostic(LOAD_SCHEMA, path, f"integer of {node.digits} digits exceeds 2**53", file)


def _join(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


# --------------------------------------------------------------------------------------------
# The converter


class DocumentRefusal(KvproofError, ValueError):
    """Raised by a structure hook to refuse a value; its text becomes the ``LD002`` message at
    the value's JSON path. Hooks registered on :data:`converter` by other modules (for example
    :mod:`kvproof.models.geometry`) raise it too. (A ``ValueError`` too, as cattrs' hooks raise;
    not the simulator's refusal, which is vLLM refusing to start.)"""


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
        raise DocumentRefusal(f"expected a non-negative integer, got {_describe(value)}")
    if value < 0:
        raise DocumentRefusal(f"expected a non-negative integer, got {value}")
    if value > MAX_SAFE_INT:
        raise DocumentRefusal(f"integer {value} exceeds 2**53")
    return value


def _signed_int(value: Any, _type: Any) -> int:
    if type(value) is not int:
        raise DocumentRefusal(f"expected an integer, got {_describe(value)}")
    if abs(value) > MAX_SAFE_INT:
        raise DocumentRefusal(f"integer {value} exceeds 2**53 in magnitude")
    return value


def _float(value: Any, _type: Any) -> float | int:
    if type(value) not in (int, float):
        raise DocumentRefusal(f"expected a number, got {_describe(value)}")
    if type(value) is int and abs(value) > MAX_SAFE_INT:
        raise DocumentRefusal(f"number {value} exceeds 2**53 in magnitude")
    return value


def _bool(value: Any, _type: Any) -> bool:
    if type(value) is not bool:
        raise DocumentRefusal(f"expected a bool, got {_describe(value)}")
    return value


def _str(value: Any, _type: Any) -> str:
    if type(value) is not str:
        raise DocumentRefusal(f"expected a string, got {_describe(value)}")
    return value


def _scalar(value: Any, _type: Any) -> Any:
    if isinstance(value, (dict, list, str)):
        raise DocumentRefusal(f"expected a number, a bool or null, got {_describe(value)}")
    if type(value) is int and abs(value) > MAX_SAFE_INT:
        raise DocumentRefusal(f"integer {value} exceeds 2**53 in magnitude")
    return value


# Every container hook has a fast path and a detailed path.  The fast path structures without
# collecting errors (no per-value try/except, no index bookkeeping); when it raises, the same value
# is structured again by the detailed path, which collects every problem with its JSON path.
# Hooks are pure, so both paths accept exactly the same values and return equal objects; the
# detailed path alone decides the diagnostics (tests/robustness compares the two converters).


# A fast path that fails records the id() of its value in its converter's ``failed`` set as the
# exception passes up.  When the detailed path of a parent then meets that value, it goes straight
# to the detailed path instead of trying the fast path again: a failure deep in a big document
# costs two walks of the failing branch, not one per level.  The set is only a hint (a stale id
# costs speed, never changes a result: both paths give the same verdict), cleared by every
# structure() call.


def _fast_then_detailed(fast, detailed, failed: set):
    def hook(value: Any, t: Any) -> Any:
        if id(value) not in failed:
            try:
                return fast(value, t)
            except Exception:  # noqa: BLE001 - re-run with detailed validation for the diagnostics
                pass
        return detailed(value, t)

    hook.fast = fast  # a fast parent calls the fast child directly; the outermost hook catches
    return hook


def _fast_hook(conv: cattrs.Converter, tp: Any):
    """The hook of ``tp`` for use inside a fast path: its fast half when it has one."""
    hook = conv.get_structure_hook(tp)
    return getattr(hook, "fast", hook)


def _literal_hook_factory(type_: Any, _conv: cattrs.Converter | None = None):
    allowed = get_args(type_)

    def hook(value: Any, _t: Any) -> Any:
        for option in allowed:
            if type(value) is type(option) and value == option:
                return value
        shown = ", ".join(json.dumps(option) for option in allowed)
        raise DocumentRefusal(f"expected one of {shown}, got {json.dumps(value) if _jsonable(value) else _describe(value)}")

    return hook


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _is_optional(type_: Any) -> bool:
    if get_origin(type_) not in (typing.Union, types.UnionType):
        return False
    args = get_args(type_)
    return len(args) == 2 and type(None) in args


def _optional_hook_factory(type_: Any, conv: cattrs.Converter):
    (inner,) = (arg for arg in get_args(type_) if arg is not type(None))
    inner_hook = conv.get_structure_hook(inner)

    def hook(value: Any, _t: Any) -> Any:
        if value is None:
            return None
        return inner_hook(value, inner)

    inner_fast = getattr(inner_hook, "fast", None)
    if inner_fast is not None:
        def fast(value: Any, _t: Any) -> Any:
            if value is None:
                return None
            return inner_fast(value, inner)

        hook.fast = fast
    return hook


class _Budget(threading.local):
    """Problems recorded by the detailed paths of a converter during one :func:`structure` call."""

    problems = 0


def _record(errors: list, exc: Exception, note: Any, budget: _Budget) -> bool:
    """Add ``exc`` with its note; False once this container or the document has enough problems."""
    exc.__notes__ = [*getattr(exc, "__notes__", []), note]
    errors.append(exc)
    budget.problems += 1
    return len(errors) < MAX_PROBLEMS_PER_CONTAINER and budget.problems < MAX_PROBLEMS


def _truncated(errors: list, unchecked: int, what: str) -> None:
    if unchecked:
        errors.append(DocumentRefusal(f"{unchecked} more {what} not checked after {len(errors)} problems"))


def _list_hook_factory(type_: Any, conv: cattrs.Converter):
    args = get_args(type_)
    elem_type = args[0] if args else Any
    if elem_type is Any:
        def detailed(value: Any, _t: Any) -> list:
            if type(value) is not list:
                raise DocumentRefusal(f"expected an array, got {_describe(value)}")
            return list(value)

        return detailed
    handler = conv.get_structure_hook(elem_type)
    budget, failed = conv.budget, conv.failed

    def detailed(value: Any, _t: Any) -> list:
        if type(value) is not list:
            raise DocumentRefusal(f"expected an array, got {_describe(value)}")
        out = []
        errors: list = []
        for index, item in enumerate(value):
            try:
                out.append(handler(item, elem_type))
            except Exception as exc:  # noqa: BLE001 - regrouped below with the index as a note
                note = cattrs.errors.IterableValidationNote(f"Structuring {type_} @ index {index}", index, elem_type)
                if not _record(errors, exc, note, budget):
                    _truncated(errors, len(value) - index - 1, "element(s)")
                    break
        if errors:
            raise cattrs.errors.IterableValidationError(f"While structuring {type_!r}", errors, type_)
        return out

    if not _fast(conv):
        return detailed
    if elem_type is int and handler is _int:
        def fast(value: Any, _t: Any) -> list:
            if type(value) is not list:
                raise DocumentRefusal(f"expected an array, got {_describe(value)}")
            for item in value:  # _int inline (a set/min/max test costs more on these short lists)
                if type(item) is not int or item < 0 or item > MAX_SAFE_INT:
                    failed.add(id(value))
                    raise DocumentRefusal("an element is refused")
            return list(value)

        fast.inline = _INT_LIST  # an attrs fast path runs this loop itself (see _fast_structure_fn)
    elif elem_type is str and handler is _str:
        def fast(value: Any, _t: Any) -> list:
            if type(value) is not list:
                raise DocumentRefusal(f"expected an array, got {_describe(value)}")
            for item in value:  # _str inline
                if type(item) is not str:
                    failed.add(id(value))
                    raise DocumentRefusal("an element is refused")
            return list(value)

        fast.inline = _STR_LIST
    else:
        fast_handler = _fast_hook(conv, elem_type)

        def fast(value: Any, _t: Any) -> list:
            if type(value) is not list:
                raise DocumentRefusal(f"expected an array, got {_describe(value)}")
            try:
                return [fast_handler(item, elem_type) for item in value]
            except Exception:
                failed.add(id(value))
                raise

    return _fast_then_detailed(fast, detailed, failed)


def _dict_hook_factory(type_: Any, conv: cattrs.Converter):
    key_type, value_type = get_args(type_) or (str, Any)
    budget, failed = conv.budget, conv.failed
    value_hook = conv.get_structure_hook(value_type)
    fast_value_hook = _fast_hook(conv, value_type)

    def fast(value: Any, _t: Any) -> dict:
        if not isinstance(value, dict):
            raise DocumentRefusal(f"expected an object, got {_describe(value)}")
        try:
            return {key: fast_value_hook(item, value_type) for key, item in value.items()}
        except Exception:
            failed.add(id(value))
            raise

    def detailed(value: Any, _t: Any) -> dict:
        if not isinstance(value, dict):
            raise DocumentRefusal(f"expected an object, got {_describe(value)}")
        out = {}
        errors: list = []
        for position, (key, item) in enumerate(value.items()):
            try:
                out[key] = value_hook(item, value_type)
            except Exception as exc:  # noqa: BLE001 - regrouped below with the key as a note
                note = cattrs.errors.IterableValidationNote(f"Structuring mapping value @ key {key!r}", key, value_type)
                if not _record(errors, exc, note, budget):
                    _truncated(errors, len(value) - position - 1, "value(s)")
                    break
        if errors:
            raise cattrs.errors.IterableValidationError("While structuring a mapping", errors, dict)
        return out

    return _fast_then_detailed(fast, detailed, failed) if _fast(conv) else detailed


def _attrs_hook_factory(cls: type, conv: cattrs.Converter):
    detailed_fn = None
    failed = conv.failed

    def detailed(value: Any, t: Any) -> Any:
        nonlocal detailed_fn
        if not isinstance(value, dict):
            raise DocumentRefusal(f"expected an object, got {_describe(value)}")
        if detailed_fn is None:  # generated on first need: bad input is the rare case
            detailed_fn = make_dict_structure_fn(
                cls, conv, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=True)
        return detailed_fn(value, t)

    if not _fast(conv):
        return detailed
    fast = _fast_structure_fn(cls, conv)
    if fast is None:
        fast_fn = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, _cattrs_detailed_validation=False)

        def fast(value: Any, t: Any) -> Any:
            if not isinstance(value, dict):
                raise DocumentRefusal(f"expected an object, got {_describe(value)}")
            try:
                return fast_fn(value, t)
            except Exception:
                failed.add(id(value))
                raise

    return _fast_then_detailed(fast, detailed, failed)


#: Markers of the list hooks whose element test an attrs fast path runs inline, and of a field
#: it structures by calling the field's fast hook (never the type of a JSON value).
_INT_LIST, _STR_LIST, _HOOK = "list[int]", "list[str]", "hook"

#: Primitive hooks the fast path tests inline: hook -> (the hook, the JSON type it accepts,
#: the lowest and highest integer or None). Each line is exactly its hook's acceptance.
_INLINE = {
    int: (_int, int, 0, MAX_SAFE_INT),
    SignedInt: (_signed_int, int, -MAX_SAFE_INT, MAX_SAFE_INT),
    str: (_str, str, None, None),
    bool: (_bool, bool, None, None),
}


def _fast_structure_fn(cls: type, conv: cattrs.Converter):
    """The fast path of an attrs class: a closure over a field table, no error collection and no
    code generation (so no compile cost at start-up).  None when the class uses an attrs feature
    the table does not model; cattrs' own non-detailed function serves it then."""
    failed = conv.failed
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: let cattrs handle the class
        return None
    fields = attrs.fields(cls)
    if any(f.kw_only or not f.init or f.converter is not None or f.validator is not None
           or isinstance(f.default, attrs.Factory) or (f.alias is not None and f.alias != f.name)
           for f in fields):
        return None
    required = frozenset(f.name for f in fields if f.default is attrs.NOTHING)
    defaults = [None if f.default is attrs.NOTHING else f.default for f in fields]
    # key -> (position, kind, lowest, highest, hook, type). ``kind`` is the exact JSON type of a
    # field whose hook is tested inline (an integer also in [lowest, highest]; null too when the
    # field is in ``nullable``), a list marker (the list hook's own loop, run inline), or _HOOK.
    table: dict[str, tuple] = {}
    optional_keys: set[str] = set()
    for index, field in enumerate(fields):
        tp = hints[field.name]
        optional = _is_optional(tp)
        inner = next(a for a in get_args(tp) if a is not type(None)) if optional else tp
        inline = _INLINE.get(inner)
        if inline is None or conv.get_structure_hook(inner) is not inline[0]:
            hook = _fast_hook(conv, tp)
            table[field.name] = (index, getattr(hook, "inline", _HOOK), None, None, hook, tp)
        else:  # the hook's acceptance, inline: the JSON type, and the range of an integer
            _hook, json_type, low, high = inline
            table[field.name] = (index, json_type, low, high, None, tp)
            if optional:
                optional_keys.add(field.name)
    nullable = frozenset(optional_keys)

    def fast(o: Any, _t: Any) -> Any:
        if not isinstance(o, dict):
            raise DocumentRefusal(f"expected an object, got {_describe(o)}")
        if not required.issubset(o):
            raise DocumentRefusal("missing key")
        # Only the keys the document holds (a LayerSpec has 30 fields and uses about 8), written
        # over the defaults, then one positional call (counted under cachegrind: fewer
        # instructions than cattrs' generated function or a walk over every field). An unknown
        # key is a KeyError of the table.
        args = defaults.copy()
        try:
            for key, v in o.items():
                index, kind, low, high, hook, tp = table[key]
                if type(v) is kind:
                    if low is not None and not low <= v <= high:
                        raise DocumentRefusal(key)
                elif kind is _HOOK:
                    v = hook(v, tp)
                elif kind is _INT_LIST:  # the list[int] hook's fast path, without the call
                    if type(v) is not list:
                        raise DocumentRefusal(key)
                    for item in v:
                        if type(item) is not int or item < 0 or item > MAX_SAFE_INT:
                            failed.add(id(v))
                            raise DocumentRefusal(key)
                    v = list(v)
                elif kind is _STR_LIST:  # the list[str] hook's fast path, without the call
                    if type(v) is not list:
                        raise DocumentRefusal(key)
                    for item in v:
                        if type(item) is not str:
                            failed.add(id(v))
                            raise DocumentRefusal(key)
                    v = list(v)
                elif v is not None or key not in nullable:
                    raise DocumentRefusal(key)
                args[index] = v
        except Exception:
            failed.add(id(o))
            raise
        return cls(*args)

    return fast


class _Converter(cattrs.Converter):
    #: Structure through the fast paths first (False: detailed validation only; tests compare both).
    fast_path: bool = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        #: The state of the running structure() call, owned here so that its hooks (closures made
        #: by the factories below) share it: the problems recorded, and the ids of values whose
        #: fast path failed (see _fast_then_detailed).
        self.budget = _Budget()
        self.failed: set[int] = set()


def _fast(conv: cattrs.Converter) -> bool:
    return getattr(conv, "fast_path", False)


def _make_converter(fast_path: bool = True) -> cattrs.Converter:
    conv = _Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.fast_path = fast_path
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(SignedInt, _signed_int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(Scalar, _scalar)
    conv.register_structure_hook_factory(lambda t: get_origin(t) is Literal, _literal_hook_factory)
    conv.register_structure_hook_factory(_is_optional, _optional_hook_factory)
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


def _format(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "required key is missing"
    if isinstance(exc, DocumentRefusal):
        return str(exc)
    if isinstance(exc, (ValueError, TypeError)):
        return f"invalid value: {exc}"
    return f"invalid value ({type(exc).__name__})"


def structure(tree: Any, cls: type[T], file: str | None = None, *, _converter: Any = None) -> T:
    """Build ``cls`` from a parsed JSON tree or raise :class:`InputError` with JSON paths.

    (``_converter``: another converter of :func:`_make_converter`, for tests that compare the
    fast path with detailed validation alone.)"""
    conv = _converter or converter
    conv.budget.problems = 0
    conv.failed.clear()
    try:
        return conv.structure(tree, cls)
    except Exception as exc:  # noqa: BLE001 - every structuring failure becomes diagnostics
        diagnostics = []
        for path, problem in _problems(exc, "$"):
            if isinstance(problem, ForbiddenExtraKeysError):
                for key in sorted(problem.extra_fields):
                    diagnostics.append(Diagnostic(LOAD_SCHEMA, _join(path, key), f"unknown key {key!r}", file))
            else:
                diagnostics.append(Diagnostic(LOAD_SCHEMA, path, _format(problem), file))
        diagnostics = sorted(set(diagnostics), key=lambda d: (_path_order(d.path), d.message))
        if len(diagnostics) > MAX_PROBLEMS:
            diagnostics[MAX_PROBLEMS:] = [_more_problems(file)]
        raise InputError(diagnostics) from None


def _path_order(path: str) -> str:
    """Sort key of a JSON path: array indices compare as numbers ([2] before [10])."""
    return _INDEX.sub(lambda m: f"[{int(m.group(1)):020d}]", path)


_INDEX = re.compile(r"\[(\d+)\]")


def _problems(exc: BaseException, path: str):
    """(JSON path, leaf exception) of every problem in a cattrs error tree, walked the way
    ``cattrs.transform_error`` walks it, with kvproof's path syntax (``.key`` / ``["key"]``)."""
    if isinstance(exc, (cattrs.errors.IterableValidationError, cattrs.errors.ClassValidationError)):
        with_notes, without = exc.group_exceptions()
        for child, note in with_notes:
            if isinstance(note, cattrs.errors.IterableValidationNote):
                step = note.index
                child_path = f"{path}[{step}]" if type(step) is int else _join(path, str(step))
            else:
                child_path = _join(path, note.name)
            yield from _problems(child, child_path)
        for child in without:
            yield path, child
    else:
        yield path, exc


def unstructure(obj: Any) -> Any:
    """The JSON tree of a model object; :data:`ABSENT` fields are left out."""
    return converter.unstructure(obj)


def dumps(tree: Any) -> str:
    """Canonical text of a JSON tree: 2-space indent, keys in model order, newline at the end."""
    return json.dumps(tree, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def load_document(data: bytes | str, cls: type[T], file: str | None = None) -> T:
    """Parse and structure in one step."""
    return structure(parse_json(data, file), cls, file)

