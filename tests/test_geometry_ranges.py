"""Issue #13 item 8: a layer ``range`` is ``[start, stop]`` or ``[start, stop, step]`` (Python's
``range``), and each wrong shape is told exactly, with its JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.diagnostics import InputError
from kvproof.models.geometry import expand_layers, load_geometry
from kvproof.models.schema import schema_for

GEOMETRY = json.loads((Path(__file__).resolve().parents[1] / "examples" / "geometries"
                       / "plain-32-full-attention.json").read_text())


def _with_range(value) -> str:
    document = json.loads(json.dumps(GEOMETRY))
    document["layers"][0]["range"] = value
    return json.dumps(document)


@pytest.mark.parametrize("value, indices", [
    ([0, 24, 2], list(range(0, 24, 2))),
    ([1, 24, 2], list(range(1, 24, 2))),
    ([0, 4], [0, 1, 2, 3]),
    ([0, 4, 1], [0, 1, 2, 3]),
    ([0, 10, 4], [0, 4, 8]),
    ([3, 3], []),
])
def test_a_range_is_pythons_range(value, indices) -> None:
    layers = expand_layers(load_geometry(_with_range(value)))
    assert [layer.index for layer in layers] == indices
    assert [layer.name for layer in layers] == [f"model.layers.{i}.self_attn.attn" for i in indices]


@pytest.mark.parametrize("value, rendered", [
    ([], "LD002 $.layers[0].range: expected [start, stop] or [start, stop, step], got an empty array"),
    ([4], "LD002 $.layers[0].range: expected [start, stop] or [start, stop, step], got 1 number"),
    ([0, 4, 1, 1], "LD002 $.layers[0].range: expected [start, stop] or [start, stop, step], got 4 numbers"),
    ([5, 3], "LD002 $.layers[0].range[1]: stop 3 is less than start 5 (a range counts up: [start, stop])"),
    ([5, 3, 1], "LD002 $.layers[0].range[1]: stop 3 is less than start 5 (a range counts up: [start, stop])"),
    ([0, 24, 0], "LD002 $.layers[0].range[2]: step must be at least 1, got 0"),
    ([0, 24, -2], "LD002 $.layers[0].range[2]: expected a non-negative integer, got -2"),
    ([0, 2.5], "LD002 $.layers[0].range[1]: expected a non-negative integer, got a float"),
    ("0-24", "LD002 $.layers[0].range: expected an array, got a string"),
    ([0, 40000, 2], "LD002 $.layers[0].range: expands to 20000 layer(s); a geometry holds at most 10000 layers"),
])
def test_each_wrong_range_says_what_is_wrong(value, rendered) -> None:
    with pytest.raises(InputError) as caught:
        load_geometry(_with_range(value))
    assert [d.render() for d in caught.value.diagnostics] == [rendered]


def test_the_schema_states_both_forms() -> None:
    schema = schema_for("geometry")["$defs"]["LayerEntry"]["properties"]["range"]
    assert (schema["minItems"], schema["maxItems"]) == (2, 3)
    assert "[start, stop, step]" in schema["description"]


def test_formats_md_documents_the_step() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    assert "## Geometry layer ranges" in text and "`[0, 24, 2]`" in text
