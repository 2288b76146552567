"""``kvproof import`` and ``kvproof plan``: the bundled record sets reproduce their profiles, the
synthesized record sets import and check, and the user findings of issue 15 are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.commands.check import evaluate, exit_code
from kvproof.models.codec import dumps, unstructure

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GEOMETRIES = ROOT / "tests" / "conformance" / "geometries"


def _run(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("example", ["glm53flash-tp4", "minimax-m27-tp4"])
def test_import_reproduces_the_bundled_profile_byte_for_byte(example, tmp_path, capsys) -> None:
    out = tmp_path / "profile.json"
    code, _ = _run(["import", str(EXAMPLES / example), "-o", str(out)], capsys)
    assert code == 0
    assert out.read_bytes() == (EXAMPLES / example / "profile.json").read_bytes()


def test_glm_profile_has_five_state_groups_one_attention_group_and_the_seed_pool(tmp_path, capsys) -> None:
    out = tmp_path / "glm.json"
    assert _run(["import", str(EXAMPLES / "glm53flash-tp4"), "-o", str(out)], capsys)[0] == 0
    profile = json.loads(out.read_text())
    kinds = [g["kind"] for g in profile["resources"]["cache_groups"]]
    assert kinds.count("state") == 5 and kinds.count("attention") == 1
    assert profile["resources"]["runtime_memory"]["kv_cache_bytes"] == 13696 * 13516800 == 185126092800
    records = profile["provenance"]["phases"][0]["records"]
    assert [r["path"] for r in records] == ["scheduler-dp0.json"] + [f"worker-dp0-tp{t}-pp0.json" for t in range(4)]
    import hashlib

    assert records[0]["sha256"] == hashlib.sha256((EXAMPLES / "glm53flash-tp4" / "scheduler-dp0.json").read_bytes()).hexdigest()
    assert profile["provenance"]["vllm_version"] == "0.33.0"


def test_output_is_the_same_from_another_place(tmp_path, capsys) -> None:
    """Byte-identical across runs and machines: no absolute path, time or host in the profile."""
    moved = tmp_path / "elsewhere" / "phase"
    shutil.copytree(EXAMPLES / "minimax-m27-tp4", moved)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert _run(["import", str(EXAMPLES / "minimax-m27-tp4"), "-o", str(a)], capsys)[0] == 0
    assert _run(["import", str(moved), "-o", str(b)], capsys)[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_a_missing_rank_is_refused_with_rs005_and_nothing_is_written(tmp_path, capsys) -> None:
    phase = tmp_path / "prefill"
    shutil.copytree(EXAMPLES / "minimax-m27-tp4", phase)
    (phase / "worker-dp0-tp2-pp0.json").unlink()
    out = tmp_path / "profile.json"
    code, text = _run(["import", str(phase), "-o", str(out)], capsys)
    assert code == 1 and not out.exists()
    assert "RS005 $.resolved_config.tensor_parallel_size: prefill scheduler dp0 has 3 worker records, but " \
           "tensor_parallel_size x pipeline_parallel_size is 4" in text
    assert "nothing written" in text


def test_check_refuses_a_profile_that_contradicts_its_records(tmp_path) -> None:
    """3 blocks per request next to records that give 1: PA008 (check of the folder)."""
    phase = tmp_path / "set"
    shutil.copytree(EXAMPLES / "glm53flash-tp4", phase)
    profile = json.loads((phase / "profile.json").read_text())
    profile["resources"]["cache_groups"][0]["blocks_per_request"] = 3
    (phase / "profile.json").write_text(json.dumps(profile))
    results = evaluate([str(phase)])
    assert exit_code(results) == 1
    found = [(d.rule, d.path) for r in results for d in r.diagnostics]
    assert found == [("PA008", "$.resources.cache_groups[0].blocks_per_request")]


@pytest.mark.parametrize("edit, rule", [
    (lambda p: p["resources"]["runtime_memory"].update(kv_cache_bytes=1015808), "CA001"),  # one page, 512 needed
    (lambda p: p["resources"].update(max_num_tokens=0), "CA002"),
])
def test_a_profile_alone_is_refused_by_its_capacity_rule(edit, rule, tmp_path) -> None:
    profile = json.loads((EXAMPLES / "minimax-m27-tp4" / "profile.json").read_text())
    edit(profile)
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    results = evaluate([str(path)])
    assert [d.rule for r in results for d in r.diagnostics] == [rule]


def test_verify_accepts_the_bundled_profile_and_refuses_an_edit(tmp_path, capsys) -> None:
    phase = EXAMPLES / "glm53flash-tp4"
    assert _run(["import", str(phase), "--verify", str(phase / "profile.json")], capsys)[0] == 0
    profile = json.loads((phase / "profile.json").read_text())
    profile["resources"]["runtime_memory"]["hash_block_size_tokens"] = 16
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(profile))
    code, text = _run(["import", str(phase), "--verify", str(edited)], capsys)
    assert code == 1 and "PA015 $.resources.runtime_memory.hash_block_size_tokens" in text


def test_plan_gives_the_seed_numbers(capsys) -> None:
    code, text = _run(["plan", str(EXAMPLES / "glm53flash-tp4" / "profile.json"), "--format", "json"], capsys)
    assert code == 0
    result = json.loads(text)
    assert result["request_blocks"] == 487 and result["request_peak_cache_bytes"] == 487 * 13516800 == 6582681600
    assert result["pool_blocks"] == 13696 and result["pool_bytes"] == 185126092800
    assert result["startup_demand_blocks"] == 495  # 482 + 4 x 3 + 1 (vLLM align mode: 2 + k + c per KDA group)
    assert result["startup_concurrency"] == 13697 / 495
    code, text = _run(["plan", str(EXAMPLES / "glm53flash-tp4" / "profile.json"), "--tokens", "2176", "--format", "json"], capsys)
    assert json.loads(text)["request_blocks"] == 6


def _synthesized(path: Path):
    from kvproof.models.geometry import load_geometry
    from kvproof.sim import PlanRefusal
    from kvproof.sim.synth import synthesize

    from kvproof.commands.synth import split_ring

    geometry = load_geometry(path.read_text(), str(path))
    try:
        records = synthesize(geometry)
    except PlanRefusal:
        return None
    return None if split_ring(geometry, records) else records  # kvproof synth writes no records for it


CONFORMANCE = sorted(p for p in GEOMETRIES.glob("*.json") if not p.name.endswith(".expected.json"))


@pytest.mark.parametrize("geometry", CONFORMANCE, ids=lambda p: p.stem)
def test_synthesized_record_sets_import_and_then_check(geometry, tmp_path, capsys) -> None:
    records = _synthesized(geometry)
    if records is None:
        return  # vLLM refuses to start: no records
    phase = tmp_path / "phase"
    phase.mkdir()
    for name, record in records.files():
        (phase / name).write_text(dumps(unstructure(record)))
    out = tmp_path / "phase" / "profile.json"
    code, text = _run(["import", str(phase), "-o", str(out)] + ([] if records.scheduler.model else ["--model", "m"]), capsys)
    from kvproof.fuzz.explained import known_synth_refusal

    if code == 1:
        rules = {line.split()[1] for line in text.splitlines() if line.count(" ") > 2 and line.split()[1][:2].isalpha()}
        assert known_synth_refusal(rules, records.plan), text
        return
    assert code == 0, text
    results = evaluate([str(phase)])
    assert exit_code(results) == 0, [d.render() for r in results for d in r.diagnostics]
