"""``kvproof.commands.simulate.run``: exit codes, text and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys

from kvproof.commands.simulate import run

from sim_helpers import GEOMETRIES


def test_json_output_is_simulate_document(capsys) -> None:
    code = run(str(GEOMETRIES / "plain-32-full-attention.json"), "json")
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["status"] == "ok"
    assert out["num_blocks"] == 10_240


def test_text_output(capsys) -> None:
    code = run(str(GEOMETRIES / "bamba-like-align.json"))
    out = capsys.readouterr().out
    assert code == 0
    assert "KV cache groups (11), layout LBNHC" in out
    assert "num_blocks               3,309" in out
    assert "max_concurrency          35.58x" in out
    assert "scheduler / hash         528 / 528" in out


def test_refusal_exits_1_with_vllm_text(capsys) -> None:
    code = run(str(GEOMETRIES / "refusal-not-enough-memory.json"))
    out = capsys.readouterr().out
    assert code == 1
    assert "(8192), (1.0 GiB KV cache is needed" in out


def test_bad_input_exits_2(tmp_path, capsys) -> None:
    path = tmp_path / "g.json"
    path.write_text('{"layers": [], "max_model_len": 8, "available_memory_bytes": 1, "extra": 1}')
    assert run(str(path)) == 2
    out = capsys.readouterr().out  # the diagnostic on stdout, as every command's (docs/cli.md)
    assert "$.extra: unknown key 'extra'" in out
    assert run(str(tmp_path / "missing.json"), "json") == 2
    assert json.loads(capsys.readouterr().out)["status"] == "bad_input"


def test_simulate_imports_neither_z3_nor_torch_nor_vllm() -> None:
    code = (
        "import sys, json\n"
        "from kvproof.sim import simulate_document\n"
        f"doc = json.load(open({str(GEOMETRIES / 'glm-like-packed.json')!r}))\n"
        "assert simulate_document(doc)['status'] == 'ok'\n"
        "bad = [m for m in ('z3', 'torch', 'vllm', 'hypothesis') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_text_output_with_views(capsys) -> None:
    assert run(str(GEOMETRIES / "glm-like-packed.json")) == 0
    out = capsys.readouterr().out
    assert "Worker views (7 attention groups on a small pool):" in out
    assert "kernel block 128, kernel_block_stride 1768" in out
    assert "UniformTypeKVCacheSpecs" in out


def test_text_output_of_every_example_geometry(capsys) -> None:
    """Regression: the text report of a geometry without platform alignment crashed."""
    from pathlib import Path

    from kvproof.cli import main

    for path in sorted((Path(__file__).resolve().parents[2] / "examples" / "geometries").glob("*.json")):
        code = main(["simulate", str(path)])
        out = capsys.readouterr().out
        assert code in (0, 1), path
        assert "internal error" not in out
