"""``kvproof explore GEOMETRY``'s answers, checked against vLLM 0.33.0's own planner (the oracle).

The acceptance of issue 18: ``explore`` of the GLM-5.3-Flash TP 4 geometry finds the least
``available_memory_bytes`` that admits one 1,048,576-token request, and at that memory vLLM starts
(and admits it) while at one byte less it refuses with its memory check. The other questions of
the issue are asked the same way: each answer and its neighbour across the boundary go to vLLM.
Nothing here is a stored number: the answers come from ``explore``, the verdicts from vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_conformance import compare

from kvproof.cli import main

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
GLM = ROOT / "examples" / "geometries" / "glm53flash-tp4.json"
MINIMAX = ROOT / "examples" / "geometries" / "minimax-m27-tp4.json"
#: vLLM's start-up memory check (v1/core/kv_cache_planning.py:66-87), as its refusal begins.
MEMORY_REFUSAL = "To serve at least one request with the model's max seq len"


def _explore(capsys, path: Path, *args: str) -> dict:
    code = main(["explore", str(path), *args, "--format", "json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert code == 0 and report["status"] == "optimal", out[-3000:]
    return report


def _at(path: Path, **fields) -> dict:
    geometry = json.loads(path.read_text())
    geometry.update(fields)
    return geometry


def _agrees(oracle, simulate, report, geometry: dict) -> dict:
    """vLLM's plan of ``geometry``, which kvproof's simulate must equal key by key."""
    vllm = oracle(geometry)
    differences = compare(vllm, simulate(json.loads(json.dumps(geometry))))
    report.record("explore:geometry answers", geometry, differences, vllm)
    assert not differences, differences
    return vllm


def test_least_memory_admitting_one_max_len_request_of_glm53flash_tp4(capsys, oracle, simulate, report) -> None:
    answer = _explore(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", "$.available_memory_bytes")
    assert answer["route"] == "symbolic"
    least = answer["value"]
    assert answer["document"]["available_memory_bytes"] == least
    assert answer["document"]["max_model_len"] == 1_048_576
    at_least = _agrees(oracle, simulate, report, _at(GLM, available_memory_bytes=least))
    assert at_least["status"] == "ok", at_least
    assert at_least["max_model_len"] == 1_048_576  # no auto-fit: the request is the full context
    assert at_least["max_concurrency"] >= 1  # vLLM admits one request at max_model_len
    one_less = _agrees(oracle, simulate, report, _at(GLM, available_memory_bytes=least - 1))
    assert one_less["status"] == "refused", one_less
    assert one_less["error"]["message"].startswith(MEMORY_REFUSAL)
    assert "max seq len (1048576)" in one_less["error"]["message"]


def test_largest_max_model_len_the_bundled_memory_serves(capsys, oracle, simulate, report) -> None:
    answer = _explore(capsys, GLM, "--maximize", "doc.max_model_len", "--open", "$.max_model_len")
    assert answer["route"] == "bisection" and all(r["holds"] for r in answer["relied_on"])
    largest = answer["value"]
    assert _agrees(oracle, simulate, report, _at(GLM, max_model_len=largest))["status"] == "ok"
    beyond = _agrees(oracle, simulate, report, _at(GLM, max_model_len=largest + 1))
    assert beyond["status"] == "refused" and beyond["error"]["message"].startswith(MEMORY_REFUSAL)
    # vLLM's own estimate in its refusal (the binary search of kv_cache_planning.py:1288-1334)
    assert f"the estimated maximum model length is {largest}." in beyond["error"]["message"]


def test_first_prefix_match_unit_vllm_refuses(capsys, oracle, simulate, report) -> None:
    answer = _explore(capsys, GLM, "--minimize", "doc.prefix_match_unit", "--open", "$.prefix_match_unit=16..2176:16",
                      "--require", "plan.status == 'refused'")
    first = answer["value"]
    assert _agrees(oracle, simulate, report, _at(GLM, prefix_match_unit=first))["status"] == "refused"
    for below in range(16, first, 16):
        assert _agrees(oracle, simulate, report, _at(GLM, prefix_match_unit=below))["status"] == "ok", below


def test_least_memory_for_a_concurrency_of_minimax(capsys, oracle, simulate, report) -> None:
    answer = _explore(capsys, MINIMAX, "--minimize", "doc.available_memory_bytes", "--open", "$.available_memory_bytes",
                      "--require", "plan.status == 'ok' and plan.max_concurrency >= 512")
    least = answer["value"]
    assert _agrees(oracle, simulate, report, _at(MINIMAX, available_memory_bytes=least))["max_concurrency"] >= 512
    assert _agrees(oracle, simulate, report, _at(MINIMAX, available_memory_bytes=least - 1))["max_concurrency"] < 512
