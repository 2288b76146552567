"""``kvproof explore GEOMETRY`` (kvproof/solver/explore_geometry.py): exact answers over the
planner, by the symbolic, exhaustive and bisection routes, each checked against plain loops over
``kvproof.sim.simulate_document``; what the search relied on, and its failures (exit 3); bad input
(exit 2, never a traceback); the bundled geometries of the seed's two models; determinism.
vLLM's own verdicts on the answers are in tests/conformance/test_explore_answers.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.sim import simulate_document

ROOT = Path(__file__).resolve().parents[2]
GEOMETRIES = ROOT / "examples" / "geometries"
GLM = GEOMETRIES / "glm53flash-tp4.json"
MINIMAX = GEOMETRIES / "minimax-m27-tp4.json"
MEMORY = "$.available_memory_bytes"


def _run(capsys, path, *args: str) -> tuple[int, dict | None, str]:
    code = main(["explore", str(path), *args, "--format", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, (json.loads(out) if out.strip() else None), err


def _simulate(path: Path, **fields) -> dict:
    geometry = json.loads(path.read_text())
    geometry.update(fields)
    return simulate_document(geometry)


# -- the bundled geometries of the seed's two models ------------------------------------------------


def test_the_glm_geometry_reproduces_the_seed_and_the_bundled_records() -> None:
    plan = _simulate(GLM)
    scheduler = json.loads((ROOT / "examples" / "glm53flash-tp4" / "scheduler-dp0.json").read_text())
    worker = json.loads((ROOT / "examples" / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json").read_text())
    # seed 001: "The pool has 13,697 blocks", "Every group page is 13,516,800 bytes",
    # "The startup concurrency is 27.67070707070707 = 13,697 / 495"
    assert (plan["num_blocks"], plan["bytes_per_block"]) == (13_697, 13_516_800)
    assert plan["max_concurrency"] == 27.67070707070707 == 13_697 / 495
    assert plan["num_blocks"] == scheduler["cache"]["num_blocks"]
    assert plan["max_concurrency"] == scheduler["cache"]["kv_cache_max_concurrency"]
    assert plan["kv_cache_size_tokens"] == scheduler["cache"]["kv_cache_size_tokens"]
    assert plan["kv_cache_layout"] == worker["cache"]["kv_cache_layout"] == "BLHNC"
    assert [g["layers"] for g in plan["groups"]] == [g["layer_names"] for g in worker["cache"]["groups"]]
    assert [g["page_size_bytes"] for g in plan["groups"]] == [g["page_size_bytes"] for g in worker["cache"]["groups"]]
    assert [g["block_size"] for g in plan["groups"]] == [g["block_size_tokens"] for g in worker["cache"]["groups"]]
    assert {t["block_stride"] for t in plan["kv_cache_tensors"]} == {
        t["block_stride"] for t in worker["cache"]["tensor_allocations"]}
    assert plan["per_group_blocks_per_request"] == [3, 3, 3, 3, 482, 1]  # 495 = 482 + 1 + 4 x 3


def test_the_minimax_geometry_reproduces_the_seed_and_the_bundled_records() -> None:
    plan = _simulate(MINIMAX)
    scheduler = json.loads((ROOT / "examples" / "minimax-m27-tp4" / "scheduler-dp0.json").read_text())
    # seed 001: "one FullAttentionSpec group of 62 layers with a 16-token block, layout LBHNC,
    # 203,368 blocks and a concurrency of 397.203125 (= 203,368 / 512)"
    assert plan["num_blocks"] == 203_368 == scheduler["cache"]["num_blocks"]
    assert plan["max_concurrency"] == 397.203125 == scheduler["cache"]["kv_cache_max_concurrency"]
    assert plan["kv_cache_layout"] == "LBHNC"
    assert [(g["spec"], len(g["layers"]), g["block_size"]) for g in plan["groups"]] == [("FullAttentionSpec", 62, 16)]


# -- the symbolic route ------------------------------------------------------------------------------


def test_least_memory_of_glm_is_one_max_len_request_plus_the_null_block(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY)
    assert code == 0 and report["status"] == "optimal" and report["route"] == "symbolic"
    template = _simulate(GLM)
    # the start-up check reserves the null block: memory - bytes_per_block >= the need of one request
    expected = template["memory_needed_for_one_max_len_request_bytes"] + template["bytes_per_block"]
    assert report["value"] == expected == 496 * 13_516_800
    assert report["changed"] == {MEMORY: expected}
    assert _simulate(GLM, available_memory_bytes=expected)["status"] == "ok"
    below = _simulate(GLM, available_memory_bytes=expected - 1)
    assert below["status"] == "refused" and "max seq len (1048576)" in below["error"]["message"]
    replay = {r["at"][MEMORY]: r for r in report["replay"]}
    assert replay[expected]["meets_requirements"] and not replay[expected - 1]["meets_requirements"]
    assert [r["holds"] for r in report["relied_on"]] == [True]


def test_the_symbolic_and_the_bisection_routes_agree(capsys) -> None:
    # reading plan.kv_cache_tensors (not modelled symbolically) sends the same question to bisection
    _, symbolic, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY)
    _, searched, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY,
                          "--require", "plan.status == 'ok' and len(plan.kv_cache_tensors) > 0")
    assert searched["route"] == "bisection" and "symbolic route not taken" in searched["notes"][0]
    assert searched["value"] == symbolic["value"]
    assert all(r["holds"] for r in searched["relied_on"]) and len(searched["relied_on"]) == 2


def test_a_non_monotone_requirement_is_exact_symbolically(capsys) -> None:
    # an odd pool: the least memory is one block above the least memory that starts (496 blocks)
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY,
                           "--require", "plan.status == 'ok' and plan.num_blocks % 2 == 1")
    assert code == 0 and report["route"] == "symbolic"
    bytes_per_block = _simulate(GLM)["bytes_per_block"]
    plan = _simulate(GLM, available_memory_bytes=report["value"])
    assert plan["num_blocks"] == 497 and report["value"] == 497 * bytes_per_block
    assert _simulate(GLM, available_memory_bytes=report["value"] - 1)["num_blocks"] == 496


def test_least_memory_for_a_concurrency_of_minimax(capsys) -> None:
    code, report, _ = _run(capsys, MINIMAX, "--minimize", "doc.available_memory_bytes", "--open", MEMORY,
                           "--require", "plan.status == 'ok' and plan.max_concurrency >= 512")
    assert code == 0 and report["route"] == "symbolic"
    assert _simulate(MINIMAX, available_memory_bytes=report["value"])["max_concurrency"] >= 512
    assert _simulate(MINIMAX, available_memory_bytes=report["value"] - 1)["max_concurrency"] < 512


def test_a_domain_vllm_refuses_everywhere_is_infeasible(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", f"{MEMORY}=0..1000000000")
    assert code == 1 and report["status"] == "infeasible" and report["route"] == "symbolic"
    assert report["document"] is None and report["relied_on"][0]["holds"]
    code, report, _ = _run(capsys, GLM, "--maximize", "doc.available_memory_bytes", "--open", f"{MEMORY}=0..1000000000",
                           "--require", "plan.status == 'refused'")
    assert code == 0 and report["value"] == 1_000_000_000


# -- the exhaustive route ----------------------------------------------------------------------------


def test_first_prefix_match_unit_vllm_refuses(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.prefix_match_unit", "--open", "$.prefix_match_unit=16..2176:16",
                           "--require", "plan.status == 'refused'")
    assert code == 0 and report["route"] == "exhaustive" and report["relied_on"] == []
    refused = [u for u in range(16, 2177, 16) if _simulate(GLM, prefix_match_unit=u)["status"] == "refused"]
    assert report["value"] == refused[0]
    assert "Invalid prefix_match_unit" in report["replay"][0]["message"]


def test_the_geometry_that_wastes_the_most_padding(capsys) -> None:
    waste = "plan.bytes_per_block - max(g.page_size_bytes for g in plan.groups)"
    code, report, _ = _run(capsys, GLM, "--maximize", waste, "--open", "$.block_size=16..1024:16")
    assert code == 0 and report["route"] == "exhaustive"
    by_loop = {}
    for block in range(16, 1025, 16):
        plan = _simulate(GLM, block_size=block)
        if plan["status"] == "ok":
            by_loop[block] = plan["bytes_per_block"] - max(g["page_size_bytes"] for g in plan["groups"])
    best = max(by_loop.values())
    assert report["value"] == best and report["document"]["block_size"] == min(b for b, w in by_loop.items() if w == best)


def test_the_first_block_size_vllm_refuses_at_the_least_memory(capsys) -> None:
    _, least, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY)
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.block_size", "--open", f"{MEMORY}={least['value']}",
                           "--open", "$.block_size=16..1024:16", "--require", "plan.status == 'refused'")
    assert code == 0
    first = report["value"]
    assert _simulate(GLM, available_memory_bytes=least["value"], block_size=first)["status"] == "refused"
    assert all(_simulate(GLM, available_memory_bytes=least["value"], block_size=b)["status"] == "ok"
               for b in range(16, first, 16))


def test_an_exhaustive_domain_without_a_candidate_is_infeasible(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.block_size", "--open", "$.block_size=16,32",
                           "--require", "plan.status == 'ok' and plan.num_blocks < 0")
    assert code == 1 and report["status"] == "infeasible" and report["plans"] == 2


# -- the bisection route and what it relies on -------------------------------------------------------


def test_largest_max_model_len_a_memory_serves(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--maximize", "doc.max_model_len", "--open", "$.max_model_len")
    assert code == 0 and report["route"] == "bisection"
    assert [r["holds"] for r in report["relied_on"]] == [True, True]
    largest = report["value"]
    assert _simulate(GLM, max_model_len=largest)["status"] == "ok"
    beyond = _simulate(GLM, max_model_len=largest + 1)
    assert beyond["status"] == "refused"
    assert f"the estimated maximum model length is {largest}." in beyond["error"]["message"]


def test_a_non_monotone_feasibility_is_reported_not_assumed(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.available_memory_bytes", "--open", MEMORY,
                           "--require", "len(plan.kv_cache_tensors) > 0 and plan.num_blocks % 2 == 0")
    assert code == 3 and report["status"] == "unknown" and report["route"] == "bisection"
    assert report["relied_on"][0]["holds"] is False and report["relied_on"][0]["check"].startswith("FAILED:")
    assert "feasibility is not monotone" in report["reason"] and report["document"] is None


def test_a_non_monotone_block_size_is_caught_near_the_boundary(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--minimize", "doc.block_size", "--open", "$.block_size")
    assert code == 3 and report["relied_on"][0]["holds"] is False


def test_a_non_monotone_objective_is_reported(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--maximize", "plan.num_blocks % 7", "--open", MEMORY,
                           "--require", "plan.status == 'ok' and len(plan.kv_cache_tensors) > 0")
    assert code == 3 and report["route"] == "bisection"
    assert report["relied_on"][-1]["holds"] is False and "objective is not monotone" in report["reason"]


def test_no_sampled_candidate_is_unknown_not_infeasible(capsys) -> None:
    # the divisors of 2,176 start; none of 65 samples of 1..100,000 is one: nothing shows infeasibility
    code, report, _ = _run(capsys, GLM, "--maximize", "doc.prefix_match_unit", "--open", "$.prefix_match_unit=1..100000")
    assert code == 3 and report["status"] == "unknown"


def test_the_plan_budget(capsys) -> None:
    code, report, _ = _run(capsys, GLM, "--maximize", "doc.max_model_len", "--open", "$.max_model_len",
                           "--max-plans", "10")
    assert code == 3 and report["plans"] == 10 and "--max-plans (10)" in report["reason"]


def test_the_started_keys_are_the_keys_of_a_started_plan() -> None:
    # a key of a started plan read on a refused one makes the candidate infeasible, not an error
    from kvproof.solver.explore_geometry import STARTED_KEYS

    for path in sorted(GEOMETRIES.glob("*.json")):
        plan = simulate_document(path.read_text())
        if plan["status"] == "ok":
            assert set(plan) - {"status"} <= STARTED_KEYS, path
        else:
            assert set(plan) == {"status", "error"}, path


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--minimize", "1"], "needs at least one --open"),
    (["--minimize", "1", "--open", "block_size"], "starting with $"),
    (["--minimize", "1", "--open", "$.block_size=9..1"], "the range is empty"),
    (["--minimize", "1", "--open", "$.block_size=16,x"], "is not a JSON value"),
    (["--minimize", "1", "--open", "$.block_size=1..4:0"], "the step must be at least 1"),
    (["--minimize", "1", "--open", "$.nope.deeper"], "no such field"),
    (["--minimize", "1", "--open", "$.layers[99].head_size=1"], "no such list item"),
    (["--minimize", "1", "--open", "$.name"], "give the values"),
    (["--minimize", "1", "--open", "$.block_size=0..16"], "LD"),
    (["--minimize", "1", "--open", "$.bogus_field=1"], "bogus_field"),
    (["--minimize", "plan.num_blockz", "--open", "$.block_size=16"], "num_blockz"),
    (["--minimize", "plan.status == 'ok'", "--open", "$.block_size=16"], "not a number"),
    (["--minimize", "1", "--open", "$.block_size=16", "--require", "plan.num_blocks"], "truth value"),
    (["--minimize", "__import__('os')", "--open", "$.block_size=16"], "--minimize 1:1"),
    (["--minimize", "1", "--open", "$.block_size=16", "--open", "$.block_size=32"], "overlaps"),
])
def test_bad_input_is_exit_2_with_a_message(capsys, args, message) -> None:
    code, report, err = _run(capsys, GLM, *args)
    assert code == 2 and report is None
    assert message in err, err


def test_geometry_options_on_a_record_template_are_usage_errors(capsys) -> None:
    code, _, err = _run(capsys, ROOT / "examples" / "minimax-m27-tp4" / "scheduler-dp0.json", "--minimize",
                        "doc.cache.num_blocks", "--open", "$.cache", "--require", "True")
    assert code == 2 and "--require and --max-plans apply to geometry templates" in err


# -- output ------------------------------------------------------------------------------------------


def test_text_report_and_the_written_document(capsys, tmp_path) -> None:
    target = tmp_path / "least.json"
    code = main(["explore", str(GLM), "--minimize", "doc.available_memory_bytes", "--open", MEMORY, "-o", str(target)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("optimal: minimize doc.available_memory_bytes = 6704332800\n")
    assert "route: symbolic" in out and "relied on:" in out and "  checked: " in out
    assert "replayed through simulate: $.available_memory_bytes=6704332800: ok" in out
    assert "neighbour: $.available_memory_bytes=6704332799: refused: To serve at least one request" in out
    assert '"layers"' not in out  # the document went to the file
    written = json.loads(target.read_text())
    assert written["available_memory_bytes"] == 6_704_332_800
    assert simulate_document(target.read_text())["status"] == "ok"


def test_output_is_the_same_bytes_under_other_hash_seeds(tmp_path) -> None:
    outputs = set()
    for seed in ("0", "4242"):
        for args in (["--minimize", "doc.available_memory_bytes", "--open", MEMORY],
                     ["--maximize", "doc.max_model_len", "--open", "$.max_model_len", "--format", "json"]):
            env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
            run = subprocess.run([sys.executable, "-m", "kvproof", "explore", str(GLM), *args], capture_output=True,
                                 text=True, env=env, cwd=tmp_path, timeout=300)
            assert run.returncode == 0, run.stderr
            outputs.add((tuple(args), run.stdout))
    assert len(outputs) == 2
