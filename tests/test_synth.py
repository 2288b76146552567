"""``kvproof synth``: the records vLLM 0.33.0 would write, which every rule must accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.models.codec import dumps, unstructure
from kvproof.models.documents import load_bytes
from kvproof.models.geometry import load_geometry
from kvproof.rules.check import check
from kvproof.sim import Refusal
from kvproof.sim.synth import synthesize

GEOMETRIES = sorted((Path(__file__).resolve().parents[1] / "examples" / "geometries").glob("*.json"))


def _records(geometry_path: Path):
    synthesized = synthesize(load_geometry(geometry_path.read_bytes(), str(geometry_path)))
    return synthesized, [load_bytes(dumps(unstructure(rec)), f"synth/{name}") for name, rec in synthesized.files()]


@pytest.mark.parametrize("path", [p for p in GEOMETRIES if "refusal" not in p.name], ids=lambda p: p.stem)
def test_synthesized_records_are_accepted(path: Path) -> None:
    synthesized, documents = _records(path)
    assert check(documents) == []
    scheduler = synthesized.scheduler
    assert scheduler.cache.num_blocks == synthesized.plan.num_blocks
    assert scheduler.cache.kv_cache_max_concurrency == synthesized.plan.max_concurrency


def test_plain_model_records_carry_vllm_numbers() -> None:
    synthesized, _ = _records(next(p for p in GEOMETRIES if "plain-32" in p.name))
    assert synthesized.scheduler.cache.num_blocks == 10_240
    assert synthesized.scheduler.cache.kv_cache_max_concurrency == 20.0
    assert synthesized.scheduler.cache.kv_cache_size_tokens == 163_840


def test_glm_like_records_have_the_packed_groups() -> None:
    synthesized, _ = _records(next(p for p in GEOMETRIES if "glm-like" in p.name))
    worker = synthesized.workers[0]
    assert [len(g.layer_names) for g in worker.cache.groups][:4] == [9, 9, 8, 8]
    assert worker.cache.tensor_allocations[0].block_stride == 7_468_032


def test_refused_geometry_exits_1_with_vllm_text(tmp_path, capsys) -> None:
    path = next(p for p in GEOMETRIES if "refusal" in p.name)
    with pytest.raises(Refusal):
        synthesize(load_geometry(path.read_bytes()))
    assert main(["synth", str(path), "-o", str(tmp_path / "out")]) == 1
    assert "(1.0 GiB KV cache is needed" in capsys.readouterr().out


def test_synth_cli_writes_records_that_check_accepts(tmp_path, capsys) -> None:
    path = next(p for p in GEOMETRIES if "bamba-like-align" in p.name)
    assert main(["synth", str(path), "-o", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == ["scheduler-dp0.json", "worker-dp0-tp0-pp0.json"]
    assert json.loads((tmp_path / "scheduler-dp0.json").read_text())["kind"] == "scheduler"
    assert main(["check", str(tmp_path)]) == 0


def test_synth_bad_geometry_exits_2(tmp_path, capsys) -> None:
    bad = tmp_path / "g.json"
    bad.write_text('{"layers": [], "unknown": 1}')
    assert main(["synth", str(bad), "-o", str(tmp_path / "out")]) == 2


def test_every_synthesized_record_of_a_generated_geometry_is_accepted() -> None:
    """Property: whatever vLLM-valid geometry the strategies generate, the records vLLM would
    write for it pass every rule (vLLM refusals are skipped: vLLM writes no records then)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kvproof.fuzz.explained import known_synth_refusal
    from kvproof.fuzz.strategies import geometries

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.data())
    def run(data) -> None:
        document = data.draw(geometries())
        try:
            synthesized = synthesize(load_geometry(json.dumps(document)))
        except Refusal:
            return
        records = [load_bytes(dumps(unstructure(rec)), f"synth/{name}") for name, rec in synthesized.files()]
        diagnostics = check(records)
        if diagnostics and known_synth_refusal({d.rule for d in diagnostics}, synthesized.plan):
            return  # a documented finding (kvproof.fuzz.explained.KNOWN_SYNTH_REFUSALS)
        assert diagnostics == [], (json.dumps(document), [d.render() for d in diagnostics[:5]])

    run()
