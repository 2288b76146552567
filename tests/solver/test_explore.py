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
    # PF018: positive kv_cache_bytes; PF022: whole pool blocks (the first group's page), so one block
    block = tree["resources"]["cache_groups"][0]["page_size_bytes"]
    assert report["value"] == block
    assert report["document"]["resources"]["runtime_memory"]["kv_cache_bytes"] == block


def test_geometry_templates_are_refused_with_a_note(capsys, examples) -> None:
    geometry = next((examples / "geometries").glob("*.json"))
    assert main(["explore", str(geometry), "--minimize", "1"]) == 2
    assert "kvproof.sim.plan runs on concrete values only" in capsys.readouterr().err


def test_explore_usage(capsys, tmp_path) -> None:
    assert main(["explore", str(tmp_path / "nope.json"), "--minimize", "1"]) == 2
    capsys.readouterr()
