"""The documents a user needs are in the repository: no doc links outside it, the licence file
matches pyproject, and the geometry format's TP worked example (docs/formats.md) is what
``kvproof simulate`` computes."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from kvproof.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(ROOT.glob("docs/**/*.md")) + [ROOT / "README.md"]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def test_no_doc_points_outside_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "shared/reference" not in text and "../shared" not in text, doc
        for target, _anchor in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            resolved = (doc.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (doc, target)


def test_the_licence_matches_pyproject() -> None:
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}


def _mamba2_shapes(tp: int, intermediate: int = 8192, n_groups: int = 1, heads: int = 128, head_dim: int = 64,
                   state: int = 128, kernel: int = 4) -> list[list[int]]:
    """vLLM's ``mamba2_state_shape`` (mamba_utils.py:186-211) as docs/formats.md states it."""
    if n_groups % tp:
        n_groups += tp - n_groups
    conv_dim = intermediate + 2 * n_groups * state
    assert conv_dim % tp == 0 and heads % tp == 0
    return [[kernel - 1, conv_dim // tp], [heads // tp, head_dim, state]]


def test_the_tp_worked_example(tmp_path, capsys) -> None:
    base = json.loads((ROOT / "examples" / "geometries" / "bamba-like-align.json").read_text())
    assert base["layers"][0]["shapes"] == _mamba2_shapes(1)
    tp4 = json.loads(json.dumps(base))
    tp4["tp"] = 4
    tp4["layers"][0]["shapes"] = _mamba2_shapes(4)
    assert tp4["layers"][0]["shapes"] == [[3, 2304], [32, 64, 128]]
    for layer in tp4["layers"][1:]:
        layer["num_kv_heads"] //= 4
    tp4["platform_alignment"]["num_kv_heads"] = 2
    doc = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    for geometry, page, blocks, concurrency in ((base, 2162688, 3309, "35.58"), (tp4, 540672, 13239, "142.35")):
        path = tmp_path / f"tp{geometry.get('tp', 1)}.json"
        path.write_text(json.dumps(geometry))
        assert main(["simulate", "--format", "json", str(path)]) == 0
        result = json.loads(capsys.readouterr().out)
        assert {g["page_size_bytes"] for g in result["groups"]} == {page}
        assert result["platform_alignment"]["mamba_page_size_padded"] == page
        assert result["num_blocks"] == blocks and f"{result['max_concurrency']:.2f}" == concurrency
        assert f"{page:,} B" in doc and f"{blocks:,}" in doc and concurrency in doc
