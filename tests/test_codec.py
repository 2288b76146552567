"""Strict loading: every kind of bad input is a diagnostic with its JSON path."""

from __future__ import annotations

import json

import pytest

from kvproof.diagnostics import InputError
from kvproof.models.codec import MAX_SAFE_INT, dumps, unstructure
from kvproof.models.documents import load_bytes, load_path

PROFILE = "examples/glm53flash-tp4/profile.json"


def _profile() -> dict:
    return json.loads(open(PROFILE).read())


def _errors(data) -> list[tuple[str, str, str]]:
    text = data if isinstance(data, (bytes, str)) else json.dumps(data)
    with pytest.raises(InputError) as info:
        load_bytes(text)
    return [(d.rule, d.path, d.message) for d in info.value.diagnostics]


def test_unknown_key_is_named_with_its_path() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][2]["per_layer_spec_size"] = 1
    assert _errors(doc) == [("LD002", "$.resources.cache_groups[2].per_layer_spec_size", "unknown key 'per_layer_spec_size'")]


@pytest.mark.parametrize("value, shown", [(True, "a bool"), (1.0, "a float"), ("16", "a string"), (None, "null")])
def test_non_integer_where_an_integer_belongs(value, shown) -> None:
    doc = _profile()
    doc["resources"]["max_batch_size"] = value
    assert _errors(doc) == [("LD002", "$.resources.max_batch_size", f"expected a non-negative integer, got {shown}")]


def test_bool_for_an_unsigned_integer_in_a_record() -> None:
    doc = json.loads(open("examples/minimax-m27-tp4/scheduler-dp0.json").read())
    doc["cache"]["num_blocks"] = False
    assert _errors(doc) == [("LD002", "$.cache.num_blocks", "expected a non-negative integer, got a bool")]


def test_negative_value_where_none_is_allowed() -> None:
    doc = json.loads(open("examples/minimax-m27-tp4/worker-dp0-tp0-pp0.json").read())
    doc["cache"]["storages"][0]["size_bytes"] = -1
    assert _errors(doc) == [("LD002", "$.cache.storages[0].size_bytes", "expected a non-negative integer, got -1")]


def test_negative_value_that_a_rule_judges_reaches_the_rule() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][0]["blocks_per_request"] = -1
    assert load_bytes(json.dumps(doc)).obj.resources.cache_groups[0].blocks_per_request == -1


def test_string_where_a_number_belongs() -> None:
    doc = _profile()
    doc["resources"]["runtime_memory"]["gpu_memory_utilization"] = "0.9"
    assert _errors(doc) == [("LD002", "$.resources.runtime_memory.gpu_memory_utilization", "expected a number, got a string")]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_literals(literal) -> None:
    text = open(PROFILE).read().replace('"gpu_memory_utilization": 0.9', f'"gpu_memory_utilization": {literal}')
    assert _errors(text) == [("LD002", "$.resources.runtime_memory.gpu_memory_utilization", f"non-finite number {literal} is not allowed")]


def test_number_overflowing_to_infinity() -> None:
    text = open(PROFILE).read().replace('"gpu_memory_utilization": 0.9', '"gpu_memory_utilization": 1e400')
    assert _errors(text) == [("LD002", "$.resources.runtime_memory.gpu_memory_utilization", "number overflows to infinity")]


def test_integer_past_2_53() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][0]["page_size_bytes"] = MAX_SAFE_INT + 1
    assert _errors(doc) == [("LD002", "$.resources.cache_groups[0].page_size_bytes", f"integer {MAX_SAFE_INT + 1} exceeds 2**53 in magnitude")]


def test_integer_at_2_53_loads() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][0]["page_size_bytes"] = MAX_SAFE_INT
    assert load_bytes(json.dumps(doc)).obj.resources.cache_groups[0].page_size_bytes == MAX_SAFE_INT


def test_missing_required_key() -> None:
    doc = _profile()
    del doc["resources"]["cache_groups"][1]["page_size_bytes"]
    assert _errors(doc) == [("LD002", "$.resources.cache_groups[1].page_size_bytes", "required key is missing")]


def test_enumeration_value() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][1]["kind"] = "mamba"
    assert _errors(doc) == [("LD002", "$.resources.cache_groups[1].kind", 'expected one of "attention", "state", "convolution", got "mamba"')]


def test_duplicate_key() -> None:
    text = open(PROFILE).read().replace('"model": "zai-org/GLM-5.3-Flash",', '"model": "a", "model": "b",')
    assert _errors(text) == [("LD002", "$.model", "duplicate key 'model'")]


def test_several_problems_are_all_reported() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][0]["num_layers"] = 9.0
    doc["resources"]["extra"] = {}
    assert len(_errors(doc)) == 2


@pytest.mark.parametrize("data, message", [
    (b"", "document is empty"),
    (b"   \n", "document is empty"),
    (b'{"schema_version": ', "invalid JSON: Expecting value at line 1 column 20"),
    (b"\xff\xfe\x00", "document is not UTF-8 text (byte 0)"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nesting is too deep"),
])
def test_unreadable_documents(data, message) -> None:
    assert _errors(data) == [("LD001", "$", message)]


@pytest.mark.parametrize("tree", [[], 3, {"x": 1}, {"schema_version": "other"}, {"schema_version": "kvproof/record/v1", "kind": "planner"}])
def test_unrecognised_documents(tree) -> None:
    errors = _errors(tree)
    assert [e[0] for e in errors] == ["LD003"]


def test_absent_and_null_round_trip_byte_for_byte(examples) -> None:
    paths = sorted(examples.glob("*/*.json"))
    assert len(paths) >= 12
    for path in paths:
        document = load_path(path)
        if document.kind != "geometry":
            assert dumps(unstructure(document.obj)) == path.read_text()


def test_explicit_null_stays_null_and_absent_stays_absent() -> None:
    doc = _profile()
    doc["resources"]["cache_groups"][4]["sliding_window"] = None
    text = json.dumps(doc, indent=2) + "\n"
    assert dumps(unstructure(load_bytes(text).obj)) == text
    del doc["resources"]["cache_groups"][4]["sliding_window"]
    text = json.dumps(doc, indent=2) + "\n"
    assert dumps(unstructure(load_bytes(text).obj)) == text


def test_document_refusal_is_public_and_becomes_an_ld002_at_its_path() -> None:
    """``DocumentRefusal`` is the codec's public way for a structure hook to refuse a value (a
    ``KvproofError`` with a name no other class has); the geometry hooks raise it, and its text is
    the diagnostic at the value's path."""
    from kvproof.diagnostics import KvproofError
    from kvproof.models import codec
    from kvproof.models.geometry import load_geometry

    assert "DocumentRefusal" in codec.__all__
    assert issubclass(codec.DocumentRefusal, ValueError) and issubclass(codec.DocumentRefusal, KvproofError)
    assert not hasattr(codec, "Refusal") and not hasattr(codec, "_Refusal")
    with pytest.raises(InputError) as error:
        load_geometry({"layers": [], "max_model_len": 16, "available_memory_bytes": 1, "block_size": "16"}, "g.json")
    assert [d.render() for d in error.value.diagnostics] == [
        "g.json: LD002 $.block_size: expected a positive integer, got a string"]


def test_read_document_reads_a_file_whole_and_bounds_the_rest(tmp_path) -> None:
    """A regular file is read in one call sized by the file (not a 64 MiB buffer); a file that
    grows past its stat size is still read to its end, and never past the bound."""
    from kvproof.models import documents
    from kvproof.models.codec import MAX_DOCUMENT_BYTES

    path = tmp_path / "doc.json"
    path.write_bytes(b"[1]")
    assert documents.read_document(path) == b"[1]"

    class Growing:
        def __init__(self, data: bytes):
            self.data, self.calls = data, []

        def read(self, n: int) -> bytes:
            self.calls.append(n)
            out, self.data = self.data[:n], self.data[n:]
            return out

    grown = Growing(b"x" * 10)
    assert documents._read_bounded(grown, 4, 100) == b"x" * 10
    endless = Growing(b"y" * (3 << 20))
    assert len(documents._read_bounded(endless, documents._CHUNK, (2 << 20) + 1)) == (2 << 20) + 1
    assert max(endless.calls) <= documents._CHUNK
    assert MAX_DOCUMENT_BYTES + 1 > documents._CHUNK


# --- TP-rank twins structured once (kvproof.models.documents.RankTwins) ------------------------------

def _glm_worker_text(tp: int, edit=None) -> str:
    import json as _json
    from pathlib import Path as _Path

    tree = _json.loads((_Path(__file__).parent.parent / "examples" / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json").read_text())
    tree["tp_rank"] = tp
    for storage in tree["cache"]["storages"]:
        storage["device"] = f"cuda:{tp}"
    if edit:
        edit(tree)
    return _json.dumps(tree)


def test_a_rank_twin_is_structured_from_the_earlier_record_with_its_own_ranks() -> None:
    from kvproof.models.documents import RankTwins, load_bytes

    ranks = RankTwins()
    first = load_bytes(_glm_worker_text(0), "tp0.json", ranks=ranks)
    twin = load_bytes(_glm_worker_text(3), "tp3.json", ranks=ranks)
    alone = load_bytes(_glm_worker_text(3), "tp3.json")
    assert twin.obj == alone.obj and twin.obj.tp_rank == 3 and twin.obj.cache.storages[0].device == "cuda:3"
    assert twin.obj.cache.groups is first.obj.cache.groups  # shared, not structured again
    assert twin.tree is not None and twin.file == "tp3.json"


def test_a_bool_or_float_for_an_int_or_a_bad_rank_is_structured_in_full() -> None:
    import pytest as _pytest

    from kvproof.diagnostics import InputError
    from kvproof.models.documents import RankTwins, load_bytes

    def state(value):
        def edit(tree):
            tree["cache"]["groups"][0]["state"]["num_prefill_checkpoint_blocks"] = value
        return edit

    ranks = RankTwins()
    load_bytes(_glm_worker_text(0, state(1)), "tp0.json", ranks=ranks)
    for value in (True, 1.0):
        loaded = load_bytes(_glm_worker_text(1, state(value)), "tp1.json", ranks=ranks)
        assert type(loaded.obj.cache.groups[0].state.num_prefill_checkpoint_blocks) is type(value)

    def negative(tree):
        tree["tp_rank"] = -1

    with _pytest.raises(InputError) as error:
        load_bytes(_glm_worker_text(0, lambda t: (state(1)(t), negative(t))), "bad.json", ranks=ranks)
    assert any(d.path == "$.tp_rank" for d in error.value.diagnostics)
