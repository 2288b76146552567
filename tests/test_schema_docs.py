"""The JSON Schemas editors are given (``kvproof schema KIND``): an ``$id`` per kind, a title on
every object, and each field's ``#:`` model comment as its description."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvproof.models.record import ResolvedConfig
from kvproof.models.schema import field_docs, schema_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", ["record", "profile", "geometry"])
def test_every_schema_has_an_id_and_titles(kind) -> None:
    schema = schema_for(kind)
    assert schema["$id"] == f"urn:kvproof:schema:{kind}:v1" and schema["title"].startswith("kvproof ")
    jsonschema.Draft202012Validator.check_schema(schema)
    for name, definition in schema["$defs"].items():
        if definition.get("type") == "object":
            assert definition["title"] == name


def test_field_comments_become_descriptions() -> None:
    docs = field_docs(ResolvedConfig)
    assert docs["block_size"] == "``cache_config.block_size`` after the engine wrote it back (v1/engine/core.py:334-352)."
    resolved = schema_for("record")["$defs"]["ResolvedConfig"]["properties"]
    documented = [key for key, value in resolved.items() if "description" in value]
    assert sorted(documented) == sorted(docs) and all(resolved[key]["description"] == docs[key] for key in documented)
    described = sum("description" in p for d in schema_for("record")["$defs"].values() for p in d.get("properties", {}).values())
    assert described >= 15


@pytest.mark.parametrize("kind, files", [("record", "examples/*/[ws]*.json"), ("profile", "examples/*/profile.json"),
                                         ("geometry", "examples/geometries/*.json")])
def test_the_examples_fit_their_schema(kind, files) -> None:
    validator = jsonschema.Draft202012Validator(schema_for(kind))
    paths = sorted(ROOT.glob(files))
    assert paths
    for path in paths:
        validator.validate(json.loads(path.read_text()))
