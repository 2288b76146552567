"""``simulate``'s typed result (kvproof/sim/result.py): the JSON and the text report are written
from the same objects, and every key of the JSON is a typed field."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from kvproof.commands.simulate import render_text
from kvproof.models.geometry import load_geometry
from kvproof.sim import simulate_document
from kvproof.sim.document import simulate_result
from kvproof.sim.result import Planned, Raised, Refused, Requests, Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "kvproof" / "examples" / "geometries"
GEOMETRIES = sorted(EXAMPLES.glob("*.json"))


def _result(path: Path):
    return simulate_result(load_geometry(path.read_bytes(), str(path)))


@pytest.mark.parametrize("path", GEOMETRIES, ids=lambda path: path.stem)
def test_the_json_is_the_typed_result_s(path: Path) -> None:
    result = _result(path)
    assert result.to_json() == simulate_document(path.read_bytes(), str(path))
    if isinstance(result, Planned):
        fields = {f.name for f in attrs.fields(Planned)} | {"status"}
        requests = {f"simulation_{f.name}" for f in attrs.fields(Requests)} | {"simulation", "prefix_hit_probe",
                                                                               "workload"}
        assert set(result.to_json()) <= fields | requests


def test_the_examples_cover_plans_refusals_and_workloads() -> None:
    results = [_result(path) for path in GEOMETRIES]
    assert any(isinstance(r, Refused) for r in results)
    assert any(isinstance(r, Planned) and r.requests is not None and isinstance(r.requests.workload, Workload)
               for r in results)


def test_text_and_json_read_the_same_object() -> None:
    result = _result(EXAMPLES / "plain-32-requests.json")
    assert isinstance(result, Planned) and isinstance(result.requests.workload, Workload)
    changed = attrs.evolve(result, num_blocks=123_457, requests=attrs.evolve(
        result.requests, workload=Raised("AssertionError", "made up", "kvproof/sim/requests/scheduler.py:1")))
    assert json.loads(json.dumps(changed.to_json()))["num_blocks"] == 123_457
    assert changed.to_json()["workload"] == {"raised": {"type": "AssertionError", "message": "made up",
                                                        "at": "kvproof/sim/requests/scheduler.py:1"}}
    text = render_text(changed)
    assert "num_blocks               123,457 (" in text
    assert "Workload: vLLM 0.33.0 raises AssertionError while serving it: made up" in text
    assert "123,457" not in render_text(result)
