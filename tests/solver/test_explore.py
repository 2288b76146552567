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


def test_geometry_templates_are_refused_with_a_note(capsys, examples) -> None:
    geometry = next((examples / "geometries").glob("*.json"))
    assert main(["explore", str(geometry), "--minimize", "1"]) == 2
    assert "kvproof.sim.plan runs on concrete values only" in capsys.readouterr().err


def test_explore_usage(capsys, tmp_path) -> None:
    assert main(["explore", str(tmp_path / "nope.json"), "--minimize", "1"]) == 2
    capsys.readouterr()
