"""Helpers of the simulator tests (a module of its own: ``from conftest import ...`` would pick up
another directory's conftest when several test directories run in one session)."""

from __future__ import annotations

import json
from pathlib import Path

GEOMETRIES = Path(__file__).resolve().parents[2] / "examples" / "geometries"


def load_example(name: str) -> dict:
    return json.loads((GEOMETRIES / name).read_text())


def full_attention(name: str = "model.layers.{i}.self_attn.attn", count: int = 32, **fields) -> dict:
    entry = {"name": name, "range": [0, count], "spec": "FullAttentionSpec", "num_kv_heads": 8, "head_size": 128,
             "dtype": "bfloat16"}
    entry.update(fields)
    return entry


def geometry(*layers: dict, **settings) -> dict:
    doc = {"layers": list(layers), "block_size": 16, "max_model_len": 8192, "available_memory_bytes": 20 * 2**30}
    doc.update(settings)
    return doc
