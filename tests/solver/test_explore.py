"""explore: z3 Optimize over the open fields of a document template."""

from __future__ import annotations

import json

from kvproof.cli import main
from kvproof.solver.shapes import Bound, base_shapes


def test_minimize_an_open_field_subject_to_every_rule(capsys, tmp_path) -> None:
    tree = base_shapes("profile", Bound())[0].documents[0][2]
    template = tmp_path / "profile.json"
    template.write_text(json.dumps(tree))
    code = main(["explore", str(template), "--minimize", "doc.resources.runtime_memory.kv_cache_bytes",
                 "--open", "$.resources.runtime_memory.kv_cache_bytes", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["status"] == "optimal"
    # PF022: whole pool blocks; CA001: as many as one request at max_model_len needs at start-up
    # (MiniMax-M2.7: cdiv(8192, 16) = 512 blocks of one group)
    from kvproof.models.documents import load_tree
    from kvproof.rules.profile_capacity import startup_request_bytes

    profile = load_tree(tree).obj
    need = startup_request_bytes(profile.resources.cache_groups, profile.resources.runtime_memory,
                                 profile.resources.max_num_tokens)
    assert need == 512 * tree["resources"]["cache_groups"][0]["page_size_bytes"]
    assert report["value"] == need
    assert report["document"]["resources"]["runtime_memory"]["kv_cache_bytes"] == need


def test_a_geometry_template_needs_an_open_field(capsys, examples) -> None:
    # geometries are explored over the planner (tests/solver/test_explore_geometry.py); with
    # nothing open there is nothing to search
    geometry = next((examples / "geometries").glob("*.json"))
    assert main(["explore", str(geometry), "--minimize", "1"]) == 2
    assert "a geometry template needs at least one --open PATH[=DOMAIN]" in capsys.readouterr().err


def test_explore_usage(capsys, tmp_path) -> None:
    assert main(["explore", str(tmp_path / "nope.json"), "--minimize", "1"]) == 2
    capsys.readouterr()


SCHEDULER = "examples/minimax-m27-tp4/scheduler-dp0.json"


def _explore(capsys, *args: str) -> tuple[int, dict | None, str]:
    code = main(["explore", SCHEDULER, *args, "--format", "json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_a_constant_zero_divisor_is_refused_with_its_position(capsys, monkeypatch, examples) -> None:
    # reported "optimal" and "unbounded" at once, exit 0: z3's x % 0 is unconstrained
    monkeypatch.chdir(examples.parent)
    code, report, err = _explore(capsys, "--minimize", "doc.cache.num_blocks % -0", "--open", "$.cache")
    assert code == 2 and report is None
    assert "--minimize 1:24: division by zero" in err


def test_a_symbolic_zero_divisor_has_the_helpers_guarded_meaning(capsys, monkeypatch, examples) -> None:
    # x % 0 == x (kvproof.logic.mod) in the solver and in the replay: dp_rank is 0 in the template
    monkeypatch.chdir(examples.parent)
    code, report, _err = _explore(capsys, "--minimize", "doc.cache.num_blocks % doc.dp_rank", "--open", "$.cache")
    assert code == 0 and report["status"] == "optimal" and report["value"] == 513


def test_helpers_work_inside_a_generator(capsys, monkeypatch, examples) -> None:
    # exited 4 (NameError: If) before the expression language
    monkeypatch.chdir(examples.parent)
    objective = "Sum(If(g.block_size_tokens > 8, 1, 0) for g in doc.cache.groups) + doc.cache.num_blocks"
    code, report, _err = _explore(capsys, "--minimize", objective, "--open", "$.cache")
    assert code == 0 and report["status"] == "optimal" and report["value"] == 514


def test_an_open_path_must_name_a_field(capsys, monkeypatch, examples) -> None:
    monkeypatch.chdir(examples.parent)
    code, _report, err = _explore(capsys, "--minimize", "doc.cache.num_blocks", "--open", "$.cachee")
    assert code == 2 and "--open $.cachee: no field of the template" in err


def test_the_optimum_is_written_safely(capsys, monkeypatch, examples, tmp_path) -> None:
    monkeypatch.chdir(examples.parent)
    outside = tmp_path / "outside.json"
    outside.write_text("keep\n")
    link = tmp_path / "link.json"
    link.symlink_to(outside)
    assert main(["explore", SCHEDULER, "--minimize", "doc.cache.num_blocks", "--open", "$.cache", "-o", str(link)]) == 2
    assert outside.read_text() == "keep\n" and "symbolic link" in capsys.readouterr().err
    target = tmp_path / "optimum.json"
    assert main(["explore", SCHEDULER, "--minimize", "doc.cache.num_blocks", "--open", "$.cache", "-o", str(target)]) == 0
    assert json.loads(target.read_text())["cache"]["num_blocks"] == 513
    capsys.readouterr()
