"""Hypothesis over the loaders and the checker.

For arbitrary JSON values, arbitrary bytes and arbitrary mutations of the example documents
(key deletion and insertion, type swaps, list edits, text-level damage), the only outcomes of
``kvproof.models.documents.load_bytes`` are a loaded document or an ``InputError`` carrying LD
diagnostics, and ``check()`` on a loaded document (with the rest of its record set) returns
diagnostics without raising. The fast structuring path and detailed validation alone agree on
every mutated document: the same object or the same diagnostics.

Example counts follow the Hypothesis profile of tests/conftest.py (``ci`` by default,
``HYPOTHESIS_PROFILE=campaign`` for long runs).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import attrs
from hypothesis import event, given, note, strategies as st

from kvproof.diagnostics import Diagnostic, InputError
from kvproof.models import codec
from kvproof.models.codec import MAX_PROBLEMS
from kvproof.models.documents import Document, load_bytes, load_path
from kvproof.models.profile import Profile
from kvproof.models.record import SchedulerRecord, WorkerRecord
from kvproof.rules.check import check

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SETS = [ROOT / "examples" / "glm53flash-tp4", ROOT / "examples" / "minimax-m27-tp4"]
BASES: dict[str, Any] = {}
SIBLINGS: dict[str, list[Document]] = {}
for folder in EXAMPLE_SETS:
    loaded = {str(p): load_path(p) for p in sorted(folder.glob("*.json"))}
    for name in loaded:
        BASES[name] = json.loads(Path(name).read_text(encoding="utf-8"))
        SIBLINGS[name] = [d for other, d in loaded.items() if other != name]
CLASSES = {"worker": WorkerRecord, "scheduler": SchedulerRecord, "profile": Profile}
DETAILED_ONLY = codec._make_converter(fast_path=False)


def _field_names() -> list[str]:
    names: set[str] = set()
    pending = [WorkerRecord, SchedulerRecord, Profile]
    import typing

    while pending:
        cls = pending.pop()
        for field in attrs.fields(cls):
            names.add(field.name)
        for tp in typing.get_type_hints(cls).values():
            for arg in [tp, *typing.get_args(tp), *(a for t in typing.get_args(tp) for a in typing.get_args(t))]:
                if attrs.has(arg) and arg not in pending:
                    pending.append(arg)
    return sorted(names)


FIELD_NAMES = _field_names()

scalars = (
    st.none() | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, 1, -1, 2**53, 2**53 + 1, -(2**53) - 1, 2**32, 2**64])
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 1.0, 1.5, 1e308, 5e-324])
    | st.text(max_size=12) | st.sampled_from(["", "vllm", "0.33.0", "worker", "attention", "state", "MambaSpec", "\ud800", "\x00"])
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8) | st.sampled_from(FIELD_NAMES), children, max_size=6),
    max_leaves=25,
)
document_like = st.fixed_dictionaries(
    {"schema_version": st.sampled_from(["kvproof/record/v1", "kvproof/profile/v1"]),
     "kind": st.sampled_from(["worker", "scheduler", "profile", 3])},
    optional={name: json_values for name in ["dp_rank", "tp_rank", "pp_rank", "runtime", "resolved_config", "cache",
                                            "model", "resources", "phase", "prefix_caching", "layers"]},
)


def outcome(data: bytes | str, siblings: list[Document] = (), file: str = "fuzz.json") -> Document | InputError:
    """Load; on success check with the siblings. Anything but a document or an InputError fails."""
    try:
        document = load_bytes(data, file)
    except InputError as error:
        assert error.diagnostics, "an InputError without diagnostics"
        assert all(isinstance(d, Diagnostic) and d.rule in ("LD001", "LD002", "LD003") for d in error.diagnostics)
        assert all(d.path.startswith("$") for d in error.diagnostics)
        assert len(error.diagnostics) <= MAX_PROBLEMS + 1
        return error
    assert isinstance(document, Document)
    if document.kind != "geometry":
        found = check([document, *siblings])
        assert all(isinstance(d, Diagnostic) for d in found)
        assert all(isinstance(d.message, str) and d.path.startswith("$") for d in found)
    return document


@given(json_values)
def test_arbitrary_json_values(value) -> None:
    outcome(json.dumps(value))


@given(document_like)
def test_document_shaped_values(value) -> None:
    outcome(json.dumps(value))


@given(st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes(data) -> None:
    outcome(data)


TYPE_SWAPS = [None, True, False, 0, -1, 1, 2**53, 2**53 + 1, 2**64, 0.5, 1.0, -0.0, "", "x", [], {}, [1], {"a": 1}]


@st.composite
def path_into(draw, tree) -> list:
    """A path from the root: step into one child of each container, stopping at a leaf or, one
    time in eight, earlier (edits near the root mostly make an unrecognised document)."""
    path, node = [], tree
    while isinstance(node, (dict, list)) and node and (not path or draw(st.integers(0, 7)) > 0):
        keys = list(node) if isinstance(node, dict) else None
        if not path and keys and draw(st.integers(0, 7)) > 0:  # mostly leave the kind markers alone
            keys = [k for k in keys if k not in ("schema_version", "kind")] or keys
        key = draw(st.sampled_from(keys)) if keys is not None else draw(st.integers(0, len(node) - 1))
        path.append(key)
        node = node[key]
    return path


def _at(tree, path):
    for key in path:
        tree = tree[key]
    return tree


STRINGS = sorted({"attention", "state", "convolution", "worker", "scheduler", "MambaSpec", "FullAttentionSpec",
                  "SlidingWindowSpec", "MLAAttentionSpec", "CircularBufferSpec", "UniformTypeKVCacheSpecs", "align",
                  "none", "all", "0.32.0", "0.33.0", "storage-0", "storage-1", "model.layers.0.linear_attn",
                  "model.layers.0.self_attn.attn", "bfloat16", "BLHNC", "LBHNC", "kv", "conv", "ssm", ""})


def tweaked(value):
    """Another value of the same JSON type (a bool stays a bool, an int an int, ...)."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, int):
        near = [value + 1, value - 1, value * 2, value // 2, 0, 1, 2, 3, 16, 2**53, 2**32, -value]
        return st.sampled_from(near) | st.integers(min_value=-1, max_value=2**20)
    if isinstance(value, float):
        return st.sampled_from([0.0, 0.5, 1.0, 1.5, value * 2, value / 2, -value]) | st.floats(0, 1e6)
    if isinstance(value, str):
        return st.sampled_from(STRINGS) | st.text(max_size=6)
    return st.none() | st.booleans() | st.integers(-1, 64)


@st.composite
def mutate_tree(draw, tree) -> Any:
    """One structural edit of ``tree`` (in place; returns the possibly new root)."""
    path = draw(path_into(tree))
    node = _at(tree, path)
    kind = draw(st.sampled_from(["tweak", "tweak", "tweak", "swap", "delete", "insert", "list", "move"]))
    note(f"{kind} at {path}")
    if kind == "tweak" and not isinstance(node, (dict, list)) and path:
        # Same type, another value: loads, so the edit reaches the rules.
        _at(tree, path[:-1])[path[-1]] = draw(tweaked(node))
    elif kind in ("swap", "tweak") or not isinstance(node, (dict, list)):
        value = copy.deepcopy(draw(st.sampled_from(TYPE_SWAPS) | json_values))  # later edits must not reach TYPE_SWAPS
        if not path:
            return value
        _at(tree, path[:-1])[path[-1]] = value
    elif kind == "delete" and node:
        key = draw(st.sampled_from(list(node))) if isinstance(node, dict) else draw(st.integers(0, len(node) - 1))
        del node[key]
    elif kind == "insert":
        value = copy.deepcopy(draw(st.sampled_from(TYPE_SWAPS) | json_values))
        if isinstance(node, dict):
            node[draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=6))] = value
        else:
            node.insert(draw(st.integers(0, len(node))), value)
    elif kind == "list" and isinstance(node, list) and node:
        action = draw(st.sampled_from(["duplicate", "empty", "reverse"]))
        if action == "duplicate":
            node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        elif action == "empty":
            node.clear()
        else:
            node.reverse()
    elif kind == "move" and isinstance(node, dict) and len(node) >= 2:
        a, b = draw(st.lists(st.sampled_from(list(node)), min_size=2, max_size=2, unique=True))
        node[a], node[b] = node[b], node[a]
    return tree


@st.composite
def damage_text(draw, text: str) -> str | bytes:
    """Text-level damage: truncation, a stray byte, a duplicated key, a non-finite literal."""
    action = draw(st.sampled_from(["none"] * 15 + ["truncate", "byte", "duplicate", "nan", "bom"]))
    if action == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if action == "byte":
        at = draw(st.integers(0, len(text)))
        return text.encode("utf-8")[:at] + draw(st.binary(min_size=1, max_size=3)) + text.encode("utf-8")[at:]
    if action == "duplicate" and text.startswith("{"):
        first = text.find("\n", 2)
        return text[: first + 1] + text[2:first + 1] + text[first + 1:]
    if action == "nan":
        return text.replace(": 0,", ": NaN,", 1).replace(": 1,", ": -Infinity,", 1)
    if action == "bom":
        return "\ufeff" + text
    return text


@st.composite
def mutated_documents(draw):
    name = draw(st.sampled_from(sorted(BASES)))
    tree = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 3))):
        tree = draw(mutate_tree(tree))
    text = json.dumps(tree, indent=1)
    return name, tree, draw(damage_text(text))


@given(mutated_documents())
def test_mutated_examples_load_or_refuse_and_check_without_raising(case) -> None:
    name, _tree, data = case
    result = outcome(data, SIBLINGS[name], file=name)
    event("loaded" if isinstance(result, Document) else f"refused {result.diagnostics[0].rule}")


@given(mutated_documents())
def test_fast_path_agrees_with_detailed_validation(case) -> None:
    name, tree, _data = case
    try:
        tree = codec.parse_json(json.dumps(tree))
    except InputError:
        return
    if not isinstance(tree, dict):
        return
    kind = tree.get("kind") if tree.get("schema_version") == "kvproof/record/v1" else "profile"
    cls = CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return
    results = []
    for conv in (None, DETAILED_ONLY):
        try:
            results.append(codec.structure(tree, cls, name, _converter=conv))
        except InputError as error:
            results.append(error.diagnostics)
    assert results[0] == results[1]


def test_the_examples_are_accepted_by_the_fuzz_oracle() -> None:
    for name, tree in BASES.items():
        document = outcome(json.dumps(tree), SIBLINGS[name], file=name)
        assert isinstance(document, Document)
        assert not [d for d in check([document, *SIBLINGS[name]]) if d.file == name]


def test_non_finite_and_huge_numbers_never_reach_a_model() -> None:
    for literal in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000):
        result = outcome('{"schema_version": "kvproof/profile/v1", "model": ' + literal + "}")
        assert isinstance(result, InputError)
        assert not any(isinstance(v, float) and not math.isfinite(v) for v in [])


# ------------------------------------------------------------------------------ every loader, geometries

from kvproof.models.codec import load_document, structure  # noqa: E402
from kvproof.models.documents import KINDS, load_tree  # noqa: E402
from kvproof.models.geometry import Geometry, LayerEntry, SPEC_CLASSES, load_geometry  # noqa: E402

GEOMETRY_BASES = {str(p): json.loads(p.read_text(encoding="utf-8"))
                  for p in sorted((ROOT / "examples" / "geometries").glob("*.json"))}
GEOMETRY_KEYS = sorted({f.name for cls in (Geometry, LayerEntry) for f in attrs.fields(cls)})


def _refusal_only(call) -> Any:
    """``call()`` returns a model object or raises InputError with LD diagnostics; nothing else."""
    try:
        return call()
    except InputError as error:
        assert error.diagnostics and all(d.rule in ("LD001", "LD002", "LD003") for d in error.diagnostics)
        assert all(d.path.startswith("$") for d in error.diagnostics)
        assert len(error.diagnostics) <= MAX_PROBLEMS + 1
        return error


def _simulates(geometry: Geometry) -> None:
    """A loaded geometry plans to a result (ok, refused by vLLM's own text) without raising."""
    from kvproof.sim.document import simulate_geometry

    result = simulate_geometry(geometry)
    assert result["status"] in ("ok", "refused", "bad_input"), result
    json.dumps(result)


@given(json_values, st.sampled_from(KINDS))
def test_every_loader_takes_arbitrary_json(value, kind) -> None:
    """load_tree with each forced kind, load_geometry of the tree and of its text, and structure()
    into each model class: a model object or LD diagnostics, never another exception."""
    _refusal_only(lambda: load_tree(value, "fuzz.json", kind))
    text = json.dumps(value)
    for result in (_refusal_only(lambda: load_geometry(value, "fuzz.json")),
                   _refusal_only(lambda: load_geometry(text, "fuzz.json"))):
        assert isinstance(result, (Geometry, InputError))
    for cls in (WorkerRecord, SchedulerRecord, Profile, Geometry):
        _refusal_only(lambda: structure(value, cls, "fuzz.json"))
        _refusal_only(lambda: load_document(text, cls, "fuzz.json"))


layer_like = st.fixed_dictionaries(
    {"name": st.sampled_from(["model.layers.{i}.attn", "layer", "{i}", ""]) | st.text(max_size=6),
     "spec": st.sampled_from(SPEC_CLASSES) | st.text(max_size=4)},
    optional={key: json_values | st.lists(st.integers(-2, 2**12), max_size=3) for key in
              ["range", "indices", "index", "num_kv_heads", "head_size", "dtype", "block_size", "sliding_window",
               "shapes", "dtypes", "page_size_padded", "tokens_per_state", "attention_chunk_size"]},
)
geometry_like = st.fixed_dictionaries(
    {"layers": st.lists(layer_like, max_size=4) | json_values},
    optional={key: json_values for key in GEOMETRY_KEYS if key != "layers"},
)


@given(geometry_like)
def test_geometry_shaped_values_load_or_refuse_and_simulate(value) -> None:
    result = _refusal_only(lambda: load_geometry(json.dumps(value), "fuzz.json"))
    event("loaded" if isinstance(result, Geometry) else "refused")
    if isinstance(result, Geometry):
        _simulates(result)


@given(st.sampled_from(sorted(GEOMETRY_BASES)).flatmap(
    lambda name: st.tuples(st.just(name), mutate_tree(copy.deepcopy(GEOMETRY_BASES[name])))))
def test_mutated_example_geometries_load_or_refuse_and_simulate(case) -> None:
    """One structural edit of each example geometry: loaded and planned, or refused with LD
    diagnostics (the same edits as the record mutations above)."""
    _name, tree = case
    result = _refusal_only(lambda: load_geometry(json.dumps(tree), "fuzz.json"))
    event("loaded" if isinstance(result, Geometry) else f"refused {result.diagnostics[0].rule}")
    if isinstance(result, Geometry):
        _simulates(result)
