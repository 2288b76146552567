"""Shapes: the bounded document sets the solver searches.

A shape is one or more JSON *templates* (a worker record, a scheduler record, a profile, or a
bundle of them) whose structure is fixed (list lengths, mapping keys, which optional nested objects
exist) and whose values are the starting point of the search (the solver keeps a value unless a
rule needs it changed, so a witness reads as "the template with these fields changed").

Templates come from the example documents (``examples/*/``), which pass every rule: each record is
shrunk to one or two cache groups of at most ``layers`` layers each, with its tensors, views,
storages, attention groups and kernel block sizes filtered to match (:func:`shrink_record`).
:func:`mutations` derives structural one-edit variants (an element dropped or duplicated, a mapping
key dropped or added, an optional object removed, an identifier renamed) for rules whose failure
is a matter of structure (a layer without a tensor, group counts that disagree).
"""

from __future__ import annotations

import copy
import json
import os
import re
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import attrs

from ..diagnostics import InputError
from ..models.codec import ABSENT, parse_json
from ..models.documents import detect_kind, read_document
from ..models.profile import Profile
from ..models.record import SchedulerRecord, WorkerRecord
from ..rules.core import child
from ..rules.profile_records import derived_name
from ..rules.record_sets import RAW_FIELDS
from .symbolic import Policy, _hints, _leaf_kind, _unwrap_optional, schema_path

__all__ = ["Shape", "Bound", "examples_dir", "no_shapes_reason", "base_shapes", "mutations", "shrink_record", "shrink_profile",
           "DOCUMENT_CLASSES", "tree_size"]

KINDS = ("profile", "worker", "scheduler")


def document_class(kind: str) -> type:
    return {"profile": Profile, "worker": WorkerRecord, "scheduler": SchedulerRecord}[kind]


DOCUMENT_CLASSES = KINDS


@attrs.frozen
class Bound:
    """The shape bound (``--max-shape groups=2,layers=2,workers=2,mutations=60``)."""

    groups: int = 2
    layers: int = 2
    #: Worker records of a bundle; from 2, the one-layer record sets of two workers (distinct
    #: ranks, one rank twice) and of two schedulers, for the rules that compare two records.
    workers: int = 2
    #: One-edit structural mutations tried per seed shape, most relevant to the rule first (0: none).
    mutations: int = 60

    @classmethod
    def parse(cls, text: str | None) -> "Bound":
        if not text:
            return cls()
        values = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in attrs.fields_dict(cls):
                raise ValueError(f"bad --max-shape item {part!r} (expected groups=N,layers=N,workers=N,mutations=N)")
            least = 0 if key == "mutations" else 1
            try:
                values[key] = int(value.strip())
            except ValueError:
                raise ValueError(f"bad --max-shape value for {key}: {value.strip()!r} is not an integer") from None
            if values[key] < least:
                raise ValueError(f"bad --max-shape value for {key}: {values[key]} (expected an integer >= {least})")
        return cls(**values)

    def label(self) -> str:
        return f"groups={self.groups},layers={self.layers},workers={self.workers},mutations={self.mutations}"


@attrs.frozen
class Shape:
    """One bounded document set: (kind, file name, template tree) per document."""

    name: str
    documents: tuple[tuple[str, str, Any], ...] = attrs.field(eq=False)
    size: int = 0
    #: The base shape a mutation came from (None for a base shape).
    parent: str | None = None
    #: Base shapes with the same seed key are variants of one another (more layers); mutations are
    #: derived from the largest of each key (None: not a mutation seed).
    seed_key: tuple | None = None
    #: The JSON path a mutation edits (None for a base shape).
    edit: str | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(kind for kind, _, _ in self.documents)

    def key(self) -> str:
        return self.name


def tree_size(tree: Any) -> int:
    """Number of JSON scalars of a tree (the shape's size for ordering)."""
    if isinstance(tree, dict):
        return sum(tree_size(v) for v in tree.values())
    if isinstance(tree, list):
        return sum(tree_size(v) for v in tree)
    return 1


def examples_dir() -> Path:
    """The example documents (``KVPROOF_EXAMPLES`` overrides): package data of ``kvproof``
    (``kvproof/examples``; the checkout's ``examples/`` is a symlink to it), so an installed
    wheel finds the same templates as the checkout, from any working directory."""
    env = os.environ.get("KVPROOF_EXAMPLES")
    if env:
        return Path(env)

    # kvproof is installed as plain files (never zipped): the traversable is a real path
    return Path(str(resources.files("kvproof").joinpath("examples")))


def no_shapes_reason(kinds: Iterable[str], root: Path | None = None) -> str:
    """Why there are no shapes of ``kinds`` under ``root`` (for an ``unknown`` verdict)."""
    root = root or examples_dir()
    where = f"{root}" + ("" if root.is_dir() else " (no such directory)")
    return f"no shapes: no example documents of kind {'/'.join(kinds)} under {where}"


def _load_examples(root: Path) -> list[tuple[str, dict[str, tuple[str, Any]]]]:
    """(example name, {file: (kind, tree)}) for every example directory of records/profiles."""
    out = []
    if not root.is_dir():
        return out

    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        files = {}
        for path in sorted(directory.glob("*.json")):
            try:  # bounded and strict, as every document kvproof reads
                tree = parse_json(read_document(path), str(path))
            except InputError:
                continue
            kind = detect_kind(tree)
            if kind in KINDS:
                files[path.name] = (kind, tree)
        if files:
            out.append((directory.name, files))
    return out


# --------------------------------------------------------------------------------------------
# Shrinking


def shrink_record(tree: dict, keep_groups: list[int], max_layers: int) -> dict:
    """A record with the given cache groups (in order) and at most ``max_layers`` layers each;
    everything that names layers or groups is filtered to match."""
    tree = copy.deepcopy(tree)
    cache = tree["cache"]
    groups = cache["groups"]
    old_count = len(groups)
    kept = []
    kept_layers: list[str] = []
    for index in keep_groups:
        group = groups[index]
        group["layer_names"] = group["layer_names"][:max_layers]
        kept_layers += group["layer_names"]
        specs = group.get("layer_specs")
        if isinstance(specs, dict):
            group["layer_specs"] = {k: v for k, v in specs.items() if k in group["layer_names"]}
        kept.append(group)
    cache["groups"] = kept
    names = set(kept_layers)
    if "tensor_allocations" in cache:
        tensors = []
        for tensor in cache["tensor_allocations"]:
            tensor["layers"] = [n for n in tensor["layers"] if n in names]
            if tensor["layers"]:
                tensors.append(tensor)
        cache["tensor_allocations"] = tensors
    if isinstance(cache.get("layer_tensors"), dict):
        cache["layer_tensors"] = {k: v for k, v in cache["layer_tensors"].items() if k in names}
    if isinstance(cache.get("attention_groups"), list):
        remap = {old: new for new, old in enumerate(keep_groups)}
        out = []
        for group in cache["attention_groups"]:
            if group.get("kv_cache_group_id") not in remap:
                continue
            group["layer_names"] = [n for n in group["layer_names"] if n in names]
            if group["layer_names"]:
                group["kv_cache_group_id"] = remap[group["kv_cache_group_id"]]
                out.append(group)
        cache["attention_groups"] = out
    runner = cache.get("model_runner")
    if isinstance(runner, dict) and isinstance(runner.get("kernel_block_sizes"), list) \
            and len(runner["kernel_block_sizes"]) == old_count:
        runner["kernel_block_sizes"] = [runner["kernel_block_sizes"][i] for i in keep_groups]
    if isinstance(cache.get("storages"), list) and "tensor_allocations" in cache:
        used = {t["storage_id"] for t in cache["tensor_allocations"]}
        for views in (cache.get("layer_tensors") or {}).values():
            used |= {v["storage_id"] for v in views}
        storages = [s for s in cache["storages"] if s["storage_id"] in used]
        cache["storages"] = storages or cache["storages"][:1]
    return tree


def shrink_profile(tree: dict, keep_groups: list[int], rename: bool = False) -> dict:
    """A profile with the given cache groups (in order). ``rename``: the importer's names follow
    the group index (``runtime_group_i``, PA002), so a kept group takes its new index's name (the
    profile of a shrunk record set: names are identifiers, pinned, so the solver cannot)."""
    tree = copy.deepcopy(tree)
    groups = tree.get("resources", {}).get("cache_groups")
    if isinstance(groups, list):
        kept = [groups[i] for i in keep_groups if i < len(groups)]
        if rename:
            for new, (old, group) in enumerate(zip(keep_groups, kept)):
                if isinstance(group, dict) and group.get("name") == derived_name(old):
                    group["name"] = derived_name(new)
        tree["resources"]["cache_groups"] = kept
    return tree


def _as_ranks(tree: dict, tp: int, tp_rank: int | None) -> dict:
    """A record of a TP-``tp`` engine (one pipeline stage), a worker at TP rank ``tp_rank``.
    Ranks and sizes select which records a binding pairs (hard pins), so a record set's shape
    states a complete set: the RS rules then judge it as vLLM writes one."""
    config = tree.get("resolved_config")
    if isinstance(config, dict):
        config["tensor_parallel_size"] = tp
        config["pipeline_parallel_size"] = 1
    if tp_rank is not None:
        tree["tp_rank"], tree["pp_rank"] = tp_rank, 0
    return tree


def _record_set(schedulers: list, workers: list, selection: list[int], layers: int,
                ranks: list[int] | None = None) -> list[tuple[str, str, Any]]:
    """The scheduler(s) and workers shrunk to ``selection``, as one complete record set of a
    TP-``len(workers)`` engine (``ranks``: the workers' TP ranks, default 0..n-1)."""
    ranks = list(range(len(workers))) if ranks is None else ranks
    tp = max(ranks) + 1
    docs = [("scheduler", file, _as_ranks(shrink_record(tree, selection, layers), tp, None)) for file, tree in schedulers]
    docs += [("worker", file, _as_ranks(shrink_record(tree, selection, layers), tp, rank))
             for (file, tree), rank in zip(workers, ranks)]
    return docs


def _two_record_sets(scheduler: tuple, workers: list, selection: list[int]) -> list[tuple[str, list]]:
    """Record sets of two workers or two schedulers (one layer): the rules that compare two
    records of a set (RS002, RS004, RS006, RS010) have no instance with one of each. The second
    worker is the example's next rank, else a copy of the first."""
    file, tree = workers[0]
    second = workers[1] if len(workers) > 1 else (file.replace("tp0", "tp1") if "tp0" in file else f"tp1-{file}", tree)
    copy_name = scheduler[0].replace(".json", "-copy.json")
    return [
        ("workers=2", _record_set([scheduler], [workers[0], second], selection, 1)),
        ("workers=2 one rank", _record_set([scheduler], [workers[0], second], selection, 1, ranks=[0, 0])),
        ("schedulers=2", _record_set([scheduler, (copy_name, scheduler[1])], workers[:1], selection, 1)),
    ]


def _profile_variants(tree: dict) -> list[tuple[str, dict]]:
    """The profile of a record set with one structural difference that no value can make (PA001:
    a group the records do not give; PA002: a group name that is not its index's, names being
    pinned identifiers; PA019: no runtime memory)."""
    out = []
    resources = tree.get("resources") or {}
    groups = resources.get("cache_groups")
    if isinstance(groups, list) and groups:
        renamed = copy.deepcopy(tree)
        renamed["resources"]["cache_groups"][-1]["name"] = f"{groups[-1].get('name')}.x"
        out.append(("a group renamed", renamed))
        more = copy.deepcopy(tree)
        extra = copy.deepcopy(groups[-1])
        extra["name"] = derived_name(len(groups))
        more["resources"]["cache_groups"].append(extra)
        out.append(("one group more", more))
    if "runtime_memory" in resources:
        less = copy.deepcopy(tree)
        del less["resources"]["runtime_memory"]
        out.append(("without runtime_memory", less))
    return out


def _with_raw_cache_config(docs: list, profile: tuple) -> list:
    """The record set with the scheduler's ``raw_cache_config`` stated (the examples carry none):
    its resolved twins (RS013) and the profile's gpu_memory_utilization, which PA016 compares."""
    out = []
    for kind, file, tree in docs:
        if kind == "scheduler":
            tree = copy.deepcopy(tree)
            config = tree.get("resolved_config") or {}
            raw = {field: config[field] for field in RAW_FIELDS if field in config}
            memory = (profile[2].get("resources") or {}).get("runtime_memory") or {}
            if "gpu_memory_utilization" in memory:
                raw["gpu_memory_utilization"] = memory["gpu_memory_utilization"]
            tree["raw_cache_config"] = raw
        out.append((kind, file, tree))
    return out


def _signature(tree: dict, index: int) -> tuple:
    group = tree["cache"]["groups"][index]
    specs = group.get("layer_specs") or {}
    spec = group.get("spec") or {}
    return (group.get("spec_type"), group.get("kind"), tuple(sorted({s.get("spec_type") for s in specs.values()})),
            spec.get("spec_type"), "state" in group)


def _selections(tree: dict, bound: Bound) -> list[list[int]]:
    """Group selections of a record: each distinct group alone, then distinct pairs."""
    count = len(tree["cache"]["groups"])
    seen: dict[tuple, int] = {}
    singles = []
    for index in range(count):
        signature = _signature(tree, index)
        if signature not in seen:
            seen[signature] = index
            singles.append([index])
    out = list(singles)
    if bound.groups >= 2:
        pairs = set()
        for i in range(count):
            for j in range(i + 1, count):
                key = (_signature(tree, i), _signature(tree, j))
                if key not in pairs:
                    pairs.add(key)
                    out.append([i, j])
    return out


def base_shapes(kind: str, bound: Bound, root: Path | None = None) -> list[Shape]:
    """The base shapes of a document kind (``profile``, ``worker``, ``scheduler``, ``bundle``),
    smallest first."""
    examples = _load_examples(root or examples_dir())
    shapes: list[Shape] = []
    seen: set[str] = set()
    whole: list[tuple[str, str, Any]] = []  # group-less profiles (shaped last)

    def add(name: str, documents: list[tuple[str, str, Any]], seed_key: tuple | None = None) -> None:
        text = json.dumps([d[2] for d in documents], sort_keys=True)
        if text in seen:
            return
        seen.add(text)
        shapes.append(Shape(name, tuple(documents), sum(tree_size(d[2]) for d in documents), seed_key=seed_key))

    for example, files in examples:
        workers = [(f, t) for f, (k, t) in files.items() if k == "worker"]
        schedulers = [(f, t) for f, (k, t) in files.items() if k == "scheduler"]
        profiles = [(f, t) for f, (k, t) in files.items() if k == "profile"]
        record = workers[0][1] if workers else (schedulers[0][1] if schedulers else None)
        selections = _selections(record, bound) if record is not None else []
        # the record sets of two records, and the raw cache config, over the smallest single group
        smallest = min((sel for sel in selections if len(sel) == 1), default=None,
                       key=lambda sel: tree_size(shrink_record(record, sel, 1)))
        for layers in range(1, bound.layers + 1):
            for selection in selections:
                if len(selection) > bound.groups:
                    continue
                label = f"{example} groups{selection} layers<={layers}"
                seed = (kind, example, tuple(selection)) if len(selection) == 1 else None
                if kind == "worker" and workers:
                    add(f"worker {label}", [("worker", workers[0][0], shrink_record(workers[0][1], selection, layers))], seed)
                if kind == "scheduler" and schedulers:
                    add(f"scheduler {label}", [("scheduler", schedulers[0][0], shrink_record(schedulers[0][1], selection, layers))], seed)
                if kind == "bundle" and workers and schedulers:
                    docs = _record_set(schedulers[:1], workers[:1], selection, layers)
                    add(f"bundle {label} workers=1", docs, seed)
                    if profiles:
                        profile = ("profile", profiles[0][0], shrink_profile(profiles[0][1], selection, rename=True))
                        add(f"bundle+profile {label}", docs + [profile])
                        if layers == 1 and selection == smallest:
                            add(f"bundle+profile {label} raw_cache_config", _with_raw_cache_config(docs, profile) + [profile])
                            for name, variant in _profile_variants(profile[2]):
                                add(f"bundle+profile {label} {name}", docs + [("profile", profile[1], variant)])
                    if layers == 1:
                        # a phase record with the accepted probe's record of the same ranks (check --probe)
                        for doc_kind, file, tree in docs[:2]:
                            add(f"probe {doc_kind} {label}", [(doc_kind, file, tree), (doc_kind, f"probe/{file}", tree)], None)
                    if layers == 1 and bound.workers >= 2 and selection == smallest:
                        for name, docs2 in _two_record_sets(schedulers[0], workers, selection):
                            add(f"bundle {label} {name}", docs2)
                            if profiles and name == "workers=2":
                                add(f"bundle+profile {label} {name}", docs2 + [profile])
        if kind == "bundle":
            # each profile whole in the replay role, as ``kvproof plan`` checks it (ST028)
            for file, tree in profiles:
                add(f"replay profile {example}", [("profile", f"replay/{file}", copy.deepcopy(tree))])
        if kind == "profile":
            for file, tree in profiles:
                groups = tree.get("resources", {}).get("cache_groups") or []
                if not groups:  # the unmodeled layout: the whole profile, after the grouped shapes
                    whole.append((example, file, tree))
                for count in range(1, min(bound.groups, len(groups)) + 1):
                    for start in range(0, len(groups) - count + 1):
                        add(f"profile {example} groups[{start}:{start + count}]",
                            [("profile", file, shrink_profile(tree, list(range(start, start + count))))],
                            ("profile", example, start) if count == 1 else None)
    shapes.sort(key=lambda s: s.size)
    grouped = len(shapes)
    for example, file, tree in whole:
        add(f"profile {example}", [("profile", file, copy.deepcopy(tree))], ("profile", example, 0))
    shapes[grouped:] = sorted(shapes[grouped:], key=lambda s: s.size)
    return shapes


# --------------------------------------------------------------------------------------------
# Structural mutations


def mutations(shape: Shape, pins: Iterable[str] = (), alternatives: dict | None = None, limit: int = 2000) -> list[Shape]:
    """One-edit structural variants of a shape: list elements dropped or duplicated, mapping keys
    dropped or added, optional objects removed or added, identifiers renamed, and every *pinned*
    leaf (a value bindings branch on) set to each other value the examples hold at that place."""
    out: list[Shape] = []
    pins = frozenset(pins)
    alternatives = alternatives or {}
    for doc_index, (kind, file, tree) in enumerate(shape.documents):
        cls = document_class(kind)
        for description, mutated in _mutate(cls, tree, "$", "", pins, alternatives):
            documents = list(shape.documents)
            documents[doc_index] = (kind, file, mutated)
            name = f"{shape.name} | {file}: {description}"
            out.append(Shape(name, tuple(documents), sum(tree_size(d[2]) for d in documents), parent=shape.name,
                             edit=description.split(" ")[0]))
            if len(out) >= limit:
                return out
    # bundle: drop a whole document (e.g. the profile) is a shape of its own kind, not a mutation
    return out


def _mutate(cls: type, tree: Any, path: str, spath: str, pins: frozenset, alternatives: dict) -> Iterable[tuple[str, Any]]:
    """(description, mutated tree) for single structural edits inside an attrs object's tree."""
    if not isinstance(tree, dict):
        return
    hints = _hints(cls)
    policy = Policy(pinned=pins)
    for field in attrs.fields(cls):
        key = field.alias or field.name
        type_, nullable = _unwrap_optional(hints[field.name])
        absentable = field.default is ABSENT
        value = tree.get(key, ABSENT)
        where = child(path, key)
        here = schema_path(spath, key)
        leaf = _leaf_kind(type_)
        if leaf is not None:
            kind, literal = leaf
            if literal is not None and len(literal) == 1 and not nullable and not absentable:
                continue
            if not policy.is_pinned(here, kind) or key == "schema_version":
                continue
            options: list = []
            if kind == "str" and isinstance(value, str):
                options.append(value + ".x")
            for option in alternatives.get(here, ()):
                if option not in options:
                    options.append(option)
            if kind in ("int", "signed", "scalar") and type(value) is int:
                options += [value + 1, 0] + ([-1] if kind != "int" else [])
            if nullable or kind == "scalar":
                options.append(None)
            if absentable:
                options.append(ABSENT)
            for option in options:
                if option is value or (type(option) is type(value) and option == value):
                    continue
                if option is ABSENT:
                    yield f"{where} removed", _drop(tree, key)
                else:
                    yield f"{where} = {json.dumps(option)}", _set(tree, key, option)
            continue
        if value is ABSENT:
            default = _default_tree(type_)
            if default is not None:
                yield f"{where} added", _set(tree, key, default)
            continue
        if value is None:
            default = _default_tree(type_)
            if default is not None:
                yield f"{where} added", _set(tree, key, default)
            continue
        if absentable:
            yield f"{where} removed", _drop(tree, key)
        if nullable:
            yield f"{where} null", _set(tree, key, None)
        origin = typing.get_origin(type_)
        if origin is list:
            (item_type,) = typing.get_args(type_)
            item_type, _ = _unwrap_optional(item_type)
            if value:
                indices = sorted({0, len(value) - 1})
                for i in indices:
                    yield f"{child(where, i)} dropped", _set(tree, key, value[:i] + value[i + 1:])
                yield f"{child(where, len(value) - 1)} duplicated", _set(tree, key, value + [copy.deepcopy(value[-1])])
                if all(isinstance(v, str) for v in value):
                    yield f"{child(where, len(value) - 1)} renamed", _set(tree, key, value[:-1] + [value[-1] + ".x"])
                if attrs.has(item_type):
                    for i in indices:
                        for description, item in _mutate(item_type, value[i], child(where, i), here, pins, alternatives):
                            yield description, _set(tree, key, value[:i] + [item] + value[i + 1:])
                elif typing.get_origin(item_type) is list:
                    for i in indices:
                        inner = value[i]
                        if isinstance(inner, list) and inner:
                            yield f"{child(child(where, i), len(inner) - 1)} dropped", \
                                _set(tree, key, value[:i] + [inner[:-1]] + value[i + 1:])
                            yield f"{child(child(where, i), len(inner) - 1)} duplicated", \
                                _set(tree, key, value[:i] + [inner + [inner[-1]]] + value[i + 1:])
        elif origin is dict:
            _key_type, item_type = typing.get_args(type_)
            item_type, _ = _unwrap_optional(item_type)
            keys = list(value)
            for name in sorted({keys[0], keys[-1]}) if keys else []:
                yield f"{child(where, name)} dropped", _set(tree, key, {k: v for k, v in value.items() if k != name})
            if keys:
                yield f"{child(where, keys[-1] + '.x')} added", _set(tree, key, {**value, keys[-1] + ".x": copy.deepcopy(value[keys[-1]])})
                for name in sorted({keys[0], keys[-1]}):
                    item = value[name]
                    if attrs.has(item_type):
                        for description, mutated in _mutate(item_type, item, child(where, name), schema_path(here, "*"), pins, alternatives):
                            yield description, _set(tree, key, {**value, name: mutated})
                    elif typing.get_origin(item_type) is list and isinstance(item, list):
                        (inner_type,) = typing.get_args(item_type)
                        if item:
                            yield f"{child(child(where, name), len(item) - 1)} dropped", _set(tree, key, {**value, name: item[:-1]})
                            yield f"{child(child(where, name), len(item) - 1)} duplicated", \
                                _set(tree, key, {**value, name: item + [copy.deepcopy(item[-1])]})
                            if attrs.has(inner_type):
                                for description, mutated in _mutate(inner_type, item[0], child(child(where, name), 0),
                                                                    schema_path(here, "*"), pins, alternatives):
                                    yield description, _set(tree, key, {**value, name: [mutated] + item[1:]})
        elif attrs.has(type_):
            for description, mutated in _mutate(type_, value, where, here, pins, alternatives):
                yield description, _set(tree, key, mutated)


def alternatives(root: Path | None = None) -> dict[str, list]:
    """Every scalar value the examples hold, by schema path (the values a pinned leaf may take)."""
    out: dict[str, list] = {}
    for _example, files in _load_examples(root or examples_dir()):
        for kind, tree in files.values():
            _collect(tree, "", out)
    return out


def _collect(tree: Any, spath: str, out: dict) -> None:
    if isinstance(tree, dict):
        keyed = spath.endswith(("layer_specs", "layer_tensors"))
        for key, value in tree.items():
            _collect(value, schema_path(spath, "*" if keyed else key), out)
    elif isinstance(tree, list):
        for value in tree:
            _collect(value, spath, out)
    else:
        values = out.setdefault(spath, [])
        if not any(type(v) is type(tree) and v == tree for v in values) and len(values) < 12:
            values.append(tree)


def _set(tree: dict, key: str, value: Any) -> dict:
    out = dict(tree)
    out[key] = value
    return out


def _drop(tree: dict, key: str) -> dict:
    return {k: v for k, v in tree.items() if k != key}


def _default_tree(type_: Any) -> Any:
    """A small well-typed instance of a nested object type (required fields only)."""
    origin = typing.get_origin(type_)
    if origin is list:
        return []
    if origin is dict:
        return {}
    if not attrs.has(type_):
        return None
    hints = _hints(type_)
    out = {}
    for field in attrs.fields(type_):
        if field.default is not attrs.NOTHING and field.default is ABSENT:
            continue
        inner, _ = _unwrap_optional(hints[field.name])
        leaf = _leaf_kind(inner)
        if leaf is not None:
            kind, literal = leaf
            out[field.alias or field.name] = (literal[0] if literal else {"str": "x", "bool": False, "float": 1.0}.get(kind, 1))
        else:
            value = _default_tree(inner)
            if value is None:
                return None
            out[field.alias or field.name] = value
    return out


def path_segments(path: str) -> list[str]:
    """``$.a.b[0]["x.y"]`` -> ``["$", ".a", ".b", "[0]", '["x.y"]']``."""
    return re.findall(r'\$|\.[A-Za-z_][A-Za-z0-9_]*|\[[^\]]*\]', path)


def relevance(edit: str | None, paths: Iterable[str]) -> int:
    """How many leading path segments an edit shares with the closest of ``paths``."""
    if edit is None:
        return 0
    mine = path_segments(edit)
    best = 0
    for path in paths:
        theirs = path_segments(path)
        common = 0
        for a, b in zip(mine, theirs):
            if a != b:
                break
            common += 1
        best = max(best, common)
    return best
