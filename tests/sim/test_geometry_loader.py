"""The geometry loader: strict, with JSON paths; values kept as written."""

from __future__ import annotations

import json

import pytest

from kvproof.diagnostics import InputError
from kvproof.models.codec import dumps, unstructure
from kvproof.models.geometry import MultipleOf, expand_layers, load_geometry
from kvproof.sim import simulate_document

from sim_helpers import GEOMETRIES, full_attention, geometry


def diagnostics(doc) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as info:
        load_geometry(doc)
    return [(d.path, d.message) for d in info.value.diagnostics]


@pytest.mark.parametrize("path", sorted(GEOMETRIES.glob("*.json")), ids=lambda p: p.name)
def test_examples_load_and_round_trip(path) -> None:
    text = path.read_text()
    loaded = load_geometry(text, str(path))
    assert json.loads(dumps(unstructure(loaded))) == json.loads(text)


def test_unknown_key_is_refused_with_its_path() -> None:
    doc = geometry(full_attention(slidng_window=4))
    assert diagnostics(doc) == [("$.layers[0].slidng_window", "unknown key 'slidng_window'")]
    assert diagnostics({**geometry(full_attention()), "blok_size": 16}) == [("$.blok_size", "unknown key 'blok_size'")]


def test_field_of_another_spec_class_is_refused() -> None:
    doc = geometry(full_attention(sliding_window=128, spec="ChunkedLocalAttentionSpec", attention_chunk_size=8192,
                                  shapes=[[1, 2]]))
    assert diagnostics(doc) == [
        ("$.layers[0].shapes", "'shapes' is not a field of ChunkedLocalAttentionSpec"),
        ("$.layers[0].sliding_window", "'sliding_window' is not a field of ChunkedLocalAttentionSpec"),
    ]


def test_missing_required_field() -> None:
    doc = geometry({"name": "l.{i}", "range": [0, 2], "spec": "SlidingWindowSpec", "num_kv_heads": 1,
                    "head_size": 64, "dtype": "float16"})
    assert diagnostics(doc) == [
        ("$.layers[0].sliding_window", "required key is missing (SlidingWindowSpec has no default for 'sliding_window')"),
    ]


def test_union_values() -> None:
    doc = geometry(
        full_attention(tokens_per_state="1/4", block_stride_alignment={"MultipleOf": 64}),
        views={"backends": [{"match": "attn", "kernel_block_sizes": [128, {"MultipleOf": 16}]}]},
    )
    loaded = load_geometry(doc)
    entry = loaded.layers[0]
    assert entry.tokens_per_state == "1/4"
    assert entry.block_stride_alignment == MultipleOf(64)
    assert loaded.views.backends[0].kernel_block_sizes == [128, MultipleOf(16)]
    assert diagnostics(geometry(full_attention(tokens_per_state="1/0")))[0][0] == "$.layers[0].tokens_per_state"
    assert diagnostics(geometry(full_attention(block_stride_alignment={"MultipleOf": 0})))[0][0] == \
        "$.layers[0].block_stride_alignment"
    assert diagnostics(geometry(full_attention(block_stride_alignment=1.5)))[0][0] == "$.layers[0].block_stride_alignment"


def test_fractional_tokens_per_state_gives_more_states_per_block() -> None:
    # Whisper block pooling: Fraction(1, 4) stores 4 states per token.
    plain = simulate_document(geometry(full_attention(count=2)))
    pooled = simulate_document(geometry(full_attention(count=2, tokens_per_state="1/4")))
    assert pooled["groups"][0]["page_size_bytes"] == 4 * plain["groups"][0]["page_size_bytes"]


def test_dtype_names_and_aliases() -> None:
    same_a = simulate_document(geometry(full_attention(dtype="bf16")))
    same_b = simulate_document(geometry(full_attention(dtype="bfloat16")))
    assert same_a["groups"] == same_b["groups"]
    fp8 = simulate_document(geometry(full_attention(dtype="fp8")))
    assert fp8["groups"][0]["page_size_bytes"] == same_a["groups"][0]["page_size_bytes"] // 2
    assert diagnostics(geometry(full_attention(dtype="bfloat17")))[0][0] == "$.layers[0].dtype"


def test_bad_numbers_and_types() -> None:
    doc = geometry(full_attention(num_kv_heads=0, head_size=True), max_model_len=1.5)
    assert diagnostics(doc) == [
        ("$.layers[0].head_size", "expected a non-negative integer, got a bool"),
        ("$.layers[0].num_kv_heads", "expected a positive integer, got 0"),
        ("$.max_model_len", "expected a positive integer, got a float"),
    ]


def test_layer_expansion_and_order() -> None:
    doc = geometry(
        {"name": "model.layers.{i}.attn", "indices": [1, 3], "spec": "FullAttentionSpec", "num_kv_heads": 1,
         "head_size": 8, "dtype": "bf16"},
        {"name": "model.layers.{i}.mixer", "indices": [0, 2], "spec": "MambaSpec", "shapes": [[4]],
         "dtypes": ["float32"]},
        {"name": "model.mtp.attn", "spec": "FullAttentionSpec", "num_kv_heads": 1, "head_size": 8, "dtype": "bf16"},
    )
    names = [layer.name for layer in expand_layers(load_geometry(doc))]
    assert names == ["model.layers.0.mixer", "model.layers.1.attn", "model.layers.2.mixer", "model.layers.3.attn",
                     "model.mtp.attn"]
    listed = [layer.name for layer in expand_layers(load_geometry({**doc, "layer_order": "as_listed"}))]
    assert listed == ["model.layers.1.attn", "model.layers.3.attn", "model.layers.0.mixer", "model.layers.2.mixer",
                      "model.mtp.attn"]


def test_duplicate_layer_names_and_workers() -> None:
    doc = geometry(full_attention(count=2), full_attention(count=1))
    assert diagnostics(doc) == [("$.layers[1].name", "duplicate layer name 'model.layers.0.self_attn.attn'")]
    doc = geometry(full_attention(count=2), workers=[["model.layers.0.self_attn.attn", "nope"]],
                   available_memory_bytes=[1 << 30])
    assert diagnostics(doc) == [
        ("$.workers", "layers assigned to no worker: ['model.layers.1.self_attn.attn']"),
        ("$.workers[0][1]", "unknown layer 'nope'"),
    ]


def test_bad_input_document_never_raises() -> None:
    out = simulate_document({"layers": "x"})
    assert out["status"] == "bad_input"
    assert {"rule": "LD002", "path": "$.layers", "message": "expected an array, got a string"} in out["diagnostics"]
    assert simulate_document("{not json")["status"] == "bad_input"
