"""Single-field edits of a valid document (record or profile).

A *site* is one place of a document's JSON tree that belongs to a model field: the field's value
itself, or an element of a list or mapping field (``shape[2]``, ``layer_specs["l0"]``). Sites are
found by walking the tree along the attrs model's type hints, so each site knows the ``(class,
field)`` it belongs to, its type (non-negative int, signed int, float, bool, string, scalar
evidence, list, mapping, object) and whether its key may be absent or null.

Edits per site type (the systematic set; :func:`random_edit` draws arbitrary ones):

* number (int, signed int, scalar, float): ``+1``, ``-1``, ``0``, negative, ``2**53 + 1``, a bool,
  a float (``1.0`` for ``1``) and a fraction, ``null``; for a float also the int it rounds to and
  the next float up;
* bool: the other bool, ``null``, the int;
* string: every other known value of the field (spec classes, kinds, Mamba modes, versions,
  dtypes, layouts, roles: :data:`VOCABULARY`, the field's ``Literal`` options and the values the
  campaign's documents use) and one unknown value, ``null``;
* list: each (representative) element dropped and duplicated; mapping: each (representative)
  entry dropped, duplicated under a new key and renamed;
* every optional key that is present: removed; every nullable object or list: ``null``.

Lists and mappings can be long (a GLM worker has 45 layers, each with views): by default the
elements of a container are grouped by their *signature* (the element with every number blanked
out) and the first and last element of each group, plus the container's first and last, are
edited. ``exhaustive=True`` edits every element; the random campaign reaches the others.
"""

from __future__ import annotations

import functools
import json
import math
import types
import typing
from typing import Any, Iterable, Iterator, Literal, get_args, get_origin

import attrs
from hypothesis import strategies as st

from ..formulas.dtypes import ELEMENT_BYTES as DTYPE_BYTES
from ..models.codec import ABSENT, MAX_SAFE_INT, Scalar, SignedInt
from ..models.profile import Profile
from ..models.record import SchedulerRecord, WorkerRecord
from ..rules.core import child
from ..rules.spec_classes import ATTENTION_SPECS, STATE_SPECS, UNIFORM_GROUP
from ..sim.startup.layout import KVCacheLayout
from .reads import MODEL_CLASSES

__all__ = [
    "Site", "Edit", "VOCABULARY", "UNKNOWN", "sites", "edits", "site_edits", "apply", "json_path",
    "vocabulary_from", "random_edit", "document_class",
]

#: The unknown value every string field is also set to.
UNKNOWN = "kvproof-unknown"


def _static_vocabulary() -> dict[str, tuple[str, ...]]:
    dtypes = tuple(sorted(DTYPE_BYTES)) + ("torch.bfloat16",)
    return {
        "spec_type": tuple(ATTENTION_SPECS) + tuple(STATE_SPECS) + (
            UNIFORM_GROUP, "RSWASpec", "CrossAttentionSpec", "EncoderOnlyAttentionSpec", "KpoolTailSpec"),
        "kind": ("attention", "state", "convolution"),
        "mamba_cache_mode": ("none", "align", "all"),
        "version": ("0.33.0", "0.31.0", "0.32.0", "0.33", "0.33.0.post1", "0.33.1", "0.34.0"),
        "dtype": dtypes,
        "dtypes": dtypes,
        "cache_dtype_str": ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"),
        "kv_cache_layout": tuple(m.name for m in KVCacheLayout) + ("NHD", "HND"),
        "role": ("kv", "conv", "ssm", "state"),
        "phase": ("prefill", "decode"),
        "mamba_type": ("GDN_ATTN", "MAMBA2"),
        "cache_role": ("indexer", "sparse"),
        "backend": ("FlashAttentionBackend", "FlashInferBackend", "FlashMLABackend", "TritonAttentionBackend"),
        "placement": ("hisparse_host",),
        "framework": ("vllm", "sglang"),
        "schema_version": ("kvproof/record/v1", "kvproof/profile/v1", "kvproof/record/v2"),
        "cache_layout": ("grouped", "linear"),
    }


#: Known values of the enumeration-like string fields, by field name.
VOCABULARY: dict[str, tuple[str, ...]] = _static_vocabulary()


def document_class(kind: str) -> type:
    return {"profile": Profile, "worker": WorkerRecord, "scheduler": SchedulerRecord}[kind]


# --------------------------------------------------------------------------------------------
# Sites


@attrs.frozen
class Site:
    """One editable place of a document."""

    #: Keys from the document root to the site (strings and list indices).
    path: tuple
    #: The attrs class and field the site belongs to.
    owner: str
    field: str
    #: int | signed | float | bool | str | scalar | list | dict | object
    type: str
    absentable: bool = False
    nullable: bool = False
    literal: tuple | None = None
    #: The site is an element inside the field's value (a list item, a mapping entry).
    element: bool = False
    #: The element type of a list/dict site (a leaf type name or "object"/"list").
    item: str | None = None

    @property
    def json_path(self) -> str:
        return json_path(self.path)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.owner, self.field)


def json_path(path: Iterable) -> str:
    out = "$"
    for key in path:
        out = child(out, key)
    return out


def _unwrap(type_: Any) -> tuple[Any, bool]:
    if get_origin(type_) in (typing.Union, types.UnionType):
        args = [a for a in get_args(type_) if a is not type(None)]
        nullable = len(args) != len(get_args(type_))
        if len(args) == 1:
            return args[0], nullable
    return type_, False


def _leaf_type(type_: Any) -> tuple[str, tuple | None] | None:
    if type_ is Scalar:
        return "scalar", None
    if type_ is SignedInt:
        return "signed", None
    if type_ is bool:
        return "bool", None
    if type_ is int:
        return "int", None
    if type_ is float:
        return "float", None
    if type_ is str:
        return "str", None
    if get_origin(type_) is Literal:
        return "str", tuple(get_args(type_))
    return None


@functools.cache  # a pure function of a model class (a few dozen), asked for at every site
def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


_ENUM_VALUES = frozenset(value for values in VOCABULARY.values() for value in values)


@functools.cache  # pure: the field names of the document models, asked for per element
def _field_names() -> frozenset[str]:
    return frozenset(field.name for cls in MODEL_CLASSES for field in attrs.fields(cls))


def _signature(value: Any) -> str:
    """The element with numbers, names and mapping keys blanked: elements of one signature are
    alike for the rules (the KDA groups of a GLM worker, the layer specs of one group)."""
    field_names = _field_names()

    def blank(v: Any) -> Any:
        if isinstance(v, dict):
            return sorted(((k if k in field_names else "#key"), blank(x)) for k, x in v.items())
        if isinstance(v, list):
            return [blank(x) for x in v]
        if isinstance(v, str):
            return v if v in _ENUM_VALUES else "#str"
        if isinstance(v, bool) or v is None:
            return v
        return "#num"

    return json.dumps(blank(value))


def _representatives(keys: list, values: list, exhaustive: bool) -> list:
    """The container keys (indices or mapping keys) whose elements are edited."""
    if exhaustive or len(keys) <= 3:
        return list(keys)
    chosen = {0, len(keys) - 1}
    first_last: dict[str, list[int]] = {}
    for position, value in enumerate(values):
        first_last.setdefault(_signature(value), []).append(position)
    for positions in first_last.values():
        chosen.add(positions[0])
        chosen.add(positions[-1])
    return [keys[i] for i in sorted(chosen)]


def sites(cls: type, tree: Any, exhaustive: bool = False) -> list[Site]:
    """Every editable site of a document tree of model class ``cls`` (representative elements of
    long containers unless ``exhaustive``), in document order."""
    out: list[Site] = []
    _walk_object(cls, tree, (), out, exhaustive)
    return out


def _walk_object(cls: type, tree: Any, path: tuple, out: list, exhaustive: bool) -> None:
    if not isinstance(tree, dict):
        return
    hints = _hints(cls)
    for field in attrs.fields(cls):
        key = field.alias or field.name
        if key not in tree:
            continue
        type_, nullable = _unwrap(hints[field.name])
        absentable = field.default is ABSENT
        _walk_value(cls.__name__, field.name, type_, nullable, absentable, tree[key], path + (key,), False, out,
                    exhaustive)


def _walk_value(owner: str, field: str, type_: Any, nullable: bool, absentable: bool, value: Any, path: tuple,
                element: bool, out: list, exhaustive: bool) -> None:
    leaf = _leaf_type(type_)
    if leaf is not None:
        out.append(Site(path, owner, field, leaf[0], absentable, nullable, leaf[1], element))
        return
    origin = get_origin(type_)
    if origin is list:
        (item_type,) = get_args(type_)
        item_type, item_nullable = _unwrap(item_type)
        out.append(Site(path, owner, field, "list", absentable, nullable, None, element, _item_name(item_type)))
        if isinstance(value, list):
            for index in _representatives(list(range(len(value))), value, exhaustive):
                _walk_value(owner, field, item_type, item_nullable, False, value[index], path + (index,), True, out,
                            exhaustive)
        return
    if origin is dict:
        _key, item_type = get_args(type_)
        item_type, item_nullable = _unwrap(item_type)
        out.append(Site(path, owner, field, "dict", absentable, nullable, None, element, _item_name(item_type)))
        if isinstance(value, dict):
            keys = list(value)
            for key in _representatives(keys, [value[k] for k in keys], exhaustive):
                _walk_value(owner, field, item_type, item_nullable, False, value[key], path + (key,), True, out,
                            exhaustive)
        return
    if attrs.has(type_):
        out.append(Site(path, owner, field, "object", absentable, nullable, None, element))
        if isinstance(value, dict):
            _walk_object(type_, value, path, out, exhaustive)
        return
    raise TypeError(f"unsupported model type {type_} at {json_path(path)}")


def _item_name(type_: Any) -> str:
    leaf = _leaf_type(type_)
    if leaf is not None:
        return leaf[0]
    if get_origin(type_) is list:
        return "list"
    return "object"


# --------------------------------------------------------------------------------------------
# Edits


@attrs.frozen
class Edit:
    """One single-field edit: ``op`` at ``site`` (``value``: the new value, or the container key
    that is dropped, duplicated or renamed)."""

    file: str
    site: Site
    op: str
    value: Any = None

    @property
    def pair(self) -> tuple[str, str]:
        return self.site.pair

    def describe(self, tree: Any = None) -> str:
        where = self.site.json_path
        if self.op in ("drop", "duplicate", "rename-key"):
            return f"{child(where, self.value)} {self.op}"
        if self.op == "remove":
            return f"{where} removed"
        shown = json.dumps(self.value)
        if tree is not None:
            old = _get(tree, self.site.path)
            return f"{where}: {json.dumps(old)} -> {shown} ({self.op})"
        return f"{where} = {shown} ({self.op})"

    def to_json(self) -> dict:
        return {"file": self.file, "path": self.site.json_path, "class": self.site.owner, "field": self.site.field,
                "op": self.op, "value": self.value if self.op not in ("drop", "duplicate", "rename-key") else None,
                "key": self.value if self.op in ("drop", "duplicate", "rename-key") else None}


def _get(tree: Any, path: tuple) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _replace(node: Any, path: tuple, fn) -> Any:
    """A copy of ``node`` with the value at ``path`` replaced by ``fn(old)`` (copies along the path only)."""
    if not path:
        return fn(node)
    key, rest = path[0], path[1:]
    if isinstance(node, list):
        out = list(node)
        out[key] = _replace(node[key], rest, fn)
        return out
    out = dict(node)
    out[key] = _replace(node[key], rest, fn)
    return out


def apply(tree: Any, edit: Edit) -> Any:
    """The tree with the edit applied (the input tree is not modified)."""
    path, op, value = edit.site.path, edit.op, edit.value
    if op == "remove":
        return _replace(tree, path[:-1], lambda parent: {k: v for k, v in parent.items() if k != path[-1]})
    if op == "drop":
        def drop(container):
            if isinstance(container, list):
                return container[:value] + container[value + 1:]
            return {k: v for k, v in container.items() if k != value}
        return _replace(tree, path, drop)
    if op == "duplicate":
        def duplicate(container):
            if isinstance(container, list):
                return container[: value + 1] + [json.loads(json.dumps(container[value]))] + container[value + 1:]
            out = {}
            for k, v in container.items():
                out[k] = v
                if k == value:
                    out[f"{k}#copy"] = json.loads(json.dumps(v))
            return out
        return _replace(tree, path, duplicate)
    if op == "rename-key":
        return _replace(tree, path, lambda container: {(f"{k}#renamed" if k == value else k): v
                                                       for k, v in container.items()})
    return _replace(tree, path, lambda _old: value)


def vocabulary_from(trees: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """:data:`VOCABULARY` extended by the values the given trees use for the same fields."""
    seen: dict[str, set[str]] = {name: set(values) for name, values in VOCABULARY.items()}

    def walk(node: Any, key: str | None) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in seen:
            seen[key].add(node)

    for tree in trees:
        walk(tree, None)
    return {name: tuple(sorted(values)) for name, values in sorted(seen.items())}


def _number_edits(value: Any, kind: str) -> list[tuple[str, Any]]:
    if kind == "float" or isinstance(value, float):
        out = [("+1", value + 1), ("-1", value - 1), ("zero", 0.0), ("negative", -value if value else -1.0),
               ("2**53+1", 2**53 + 1), ("bool", True), ("int", round(value) if math.isfinite(value) else 0),
               ("next-float", math.nextafter(value, math.inf))]
    else:
        out = [("+1", value + 1), ("-1", value - 1), ("zero", 0), ("negative", -value if value else -1),
               ("2**53+1", MAX_SAFE_INT + 1), ("bool", value == 1 if value in (0, 1) else True),
               ("float", float(value)), ("fraction", value + 0.5)]
    return out


def site_edits(file: str, site: Site, tree: Any, vocabulary: dict[str, tuple[str, ...]] | None = None,
               exhaustive: bool = False) -> list[Edit]:
    """The systematic edits of one site (no edit that leaves the tree unchanged); a container's
    elements are dropped and duplicated at its representatives unless ``exhaustive``."""
    vocabulary = VOCABULARY if vocabulary is None else vocabulary
    value = _get(tree, site.path)
    candidates: list[tuple[str, Any]] = []
    kind = site.type
    if kind in ("int", "signed", "float", "scalar") and type(value) in (int, float):
        candidates += _number_edits(value, kind)
    elif kind in ("bool", "scalar") and type(value) is bool:
        candidates += [("not", not value), ("int", int(value))]
        if kind == "scalar":
            candidates += [("float", float(value))]
    elif kind == "scalar" and value is None:
        candidates += [("zero", 0), ("one", 1), ("bool", True), ("float", 1.0)]
    elif kind == "str" and isinstance(value, str):
        known = set(site.literal or ()) | set(vocabulary.get(site.field, ()))
        candidates += [("value", other) for other in sorted(known) if other != value]
        candidates.append(("unknown", UNKNOWN))
    elif kind in ("int", "signed", "float") and value is None:
        candidates += [("zero", 0), ("one", 1)]
    elif kind == "list" and isinstance(value, list):
        for index in _representatives(list(range(len(value))), value, exhaustive):
            candidates += [("drop", index), ("duplicate", index)]
    elif kind == "dict" and isinstance(value, dict):
        keys = list(value)
        for key in _representatives(keys, [value[k] for k in keys], exhaustive):
            candidates += [("drop", key), ("duplicate", key), ("rename-key", key)]
    if value is not None:
        candidates.append(("null", None))
    if site.absentable and not site.element:
        candidates.append(("remove", None))
    out: list[Edit] = []
    seen: set[str] = set()
    for op, new in candidates:
        if op not in ("drop", "duplicate", "rename-key", "remove"):
            if type(new) is type(value) and new == value:
                continue
            key = json.dumps([type(new).__name__, new])
        else:
            key = json.dumps([op, new])
        if key in seen:
            continue
        seen.add(key)
        out.append(Edit(file, site, op, new))
    return out


def edits(file: str, cls: type, tree: Any, vocabulary: dict[str, tuple[str, ...]] | None = None,
          exhaustive: bool = False) -> Iterator[Edit]:
    """Every systematic single-field edit of a document tree, in document order."""
    for site in sites(cls, tree, exhaustive):
        yield from site_edits(file, site, tree, vocabulary, exhaustive)


# --------------------------------------------------------------------------------------------
# Random edits (Hypothesis)


def random_edit(file: str, all_sites: list[Site], tree: Any, vocabulary: dict[str, tuple[str, ...]] | None = None):
    """A Hypothesis strategy of single-field edits of ``tree`` at any of ``all_sites`` (usually
    the exhaustive site list), with arbitrary values as well as the systematic ones."""
    vocabulary = VOCABULARY if vocabulary is None else vocabulary
    near = st.integers(-4, 4)

    @st.composite
    def draw_edit(draw) -> Edit:
        site = draw(st.sampled_from(all_sites))
        value = _get(tree, site.path)
        systematic = site_edits(file, site, tree, vocabulary)
        options = ["systematic"] if systematic else []
        if site.type in ("int", "signed", "scalar", "float"):
            options.append("number")
        if site.type == "str":
            options.append("text")
        if not options:
            options = ["number"]
        choice = draw(st.sampled_from(options))
        if choice == "systematic":
            return draw(st.sampled_from(systematic))
        if choice == "text":
            text = draw(st.one_of(st.sampled_from(sorted(vocabulary.get(site.field, ())) or [UNKNOWN]),
                                  st.text(max_size=12)))
            known = set(site.literal or ()) | set(vocabulary.get(site.field, ()))
            return Edit(file, site, "value" if text in known else "unknown", text)
        base = value if type(value) in (int, float) else 0
        number = draw(st.one_of(
            near.map(lambda d: base + d if type(base) is int else base + d),
            st.integers(-(2**53) - 2, 2**53 + 2),
            st.integers(0, 1 << 20),
            st.floats(allow_nan=False, allow_infinity=False, width=64),
            st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, -(2**53), 0.5, 1.0, True, False, None]),
        ))
        op = "null" if number is None else "bool" if isinstance(number, bool) else "number"
        return Edit(file, site, op, number)

    return draw_edit()
