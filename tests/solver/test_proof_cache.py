"""The proof cache (``kvproof prove --cache DIR``, kvproof/solver/proof_cache.py): a warm run prints
the cold run's bytes without proving; an edited rule body or formula re-proves only the rules that
reach it; a corrupted or tampered entry is ignored, re-proved and overwritten. A dead verdict is
believed only after every stored unsat core is unsat again on today's encoding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import pytest

from kvproof.commands.prove import run
from kvproof.logic import And, Implies, IntIs
from kvproof.rules import block_ownership, registry
from kvproof.solver import proof_cache
from kvproof.solver.prove import Prover

RULES = ("PF001", "PF002", "BO005")  # two profile rules and a worker record rule: cheap, reachable


def _prove(capsys, cache: Path | None, fmt: str = "json") -> tuple[int, str]:
    code = run(RULES, fmt=fmt, cache_dir=str(cache) if cache else None)
    return code, capsys.readouterr().out


@pytest.fixture
def proved(monkeypatch):
    """The rule IDs ``Prover.prove`` is asked about (in this process: ``--jobs 1``)."""
    asked: list[str] = []
    original = Prover.prove

    def spy(self, rule):
        asked.append(rule.id)
        return original(self, rule)

    monkeypatch.setattr(Prover, "prove", spy)
    return asked


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """The report without a cache (JSON and text), and a cache folder filled by a cold run."""
    import io
    import sys

    folder = tmp_path_factory.mktemp("cache")
    outputs = []
    for cache, fmt in ((None, "json"), (None, "text"), (folder, "json")):
        stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            code = run(RULES, fmt=fmt, cache_dir=str(cache) if cache else None)
            outputs.append(sys.stdout.getvalue())
        finally:
            sys.stdout = stdout
        assert code == 0
    assert outputs[0] == outputs[2]  # a cold run with the cache prints what one without it does
    return {"json": outputs[0], "text": outputs[1], "folder": folder}


@pytest.fixture
def cache(cold, tmp_path) -> Path:
    folder = tmp_path / "cache"
    shutil.copytree(cold["folder"], folder)
    return folder


def _entry(cache: Path, rule_id: str) -> Path:
    (path,) = cache.glob(f"{rule_id}-*.json")
    return path


def test_a_warm_run_prints_the_cold_bytes_without_proving(cold, cache, proved, capsys) -> None:
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.json")) == sorted(RULES)
    assert _prove(capsys, cache) == (0, cold["json"])
    assert _prove(capsys, cache, "text") == (0, cold["text"])
    assert proved == []


def test_editing_a_rule_body_re_proves_that_rule_only(cold, cache, proved, capsys, monkeypatch) -> None:
    def state_group_has_positive_count(group):  # PF001's body, written another way (n >= 1 for ints)
        return Implies(group.kind == "state", IntIs(group.blocks_per_request, lambda n: n >= 1))

    state_group_has_positive_count.__module__ = "kvproof.rules.profile_fields"  # kvproof code: walked
    rules = [attrs.evolve(r, body=state_group_has_positive_count) if r.id == "PF001" else r
             for r in registry.all_rules()]
    monkeypatch.setattr(registry, "all_rules", lambda: rules)
    before = _entry(cache, "PF001").name
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == ["PF001"]
    assert _entry(cache, "PF001").name != before  # stored under the new key, the old entry removed
    proved.clear()
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == []


def test_editing_a_formula_re_proves_the_rules_that_reach_it(cold, cache, proved, capsys, monkeypatch) -> None:
    def ranges_intersect(start, end, other_start, other_end):  # the same ranges, operands swapped
        return And(other_end > start, end > other_start)

    ranges_intersect.__module__ = "kvproof.formulas.placement"
    monkeypatch.setattr(block_ownership, "ranges_intersect", ranges_intersect)  # BO005's body reads this name
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == ["BO005"]


def test_an_entry_of_garbage_bytes_is_re_proved_and_overwritten(cold, cache, proved, capsys) -> None:
    _entry(cache, "PF002").write_bytes(b"\x00\xff{not json")
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == ["PF002"]
    json.loads(_entry(cache, "PF002").read_text())  # overwritten with a good entry
    proved.clear()
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == []


def _tamper(path: Path, change) -> None:
    """Change an entry's result and recompute its checksum: only the re-check can catch it."""
    entry = json.loads(path.read_text())
    change(entry["payload"]["result"])
    entry["checksum"] = proof_cache._checksum(entry["payload"])
    path.write_text(json.dumps(entry))


def test_a_tampered_witness_the_checker_accepts_is_re_proved(cold, cache, proved, capsys) -> None:
    example = (Path(__file__).resolve().parents[2] / "examples" / "glm53flash-tp4" / "profile.json").read_text()

    def accepted(result):  # every rule accepts the example profile: not a witness of PF001
        result["documents"] = [[result["documents"][0][0], example]]

    _tamper(_entry(cache, "PF001"), accepted)
    assert _prove(capsys, cache) == (0, cold["json"])
    assert proved == ["PF001"]


def test_a_checksum_mismatch_or_a_dead_verdict_without_its_proof_is_not_believed(cold, cache, proved, capsys) -> None:
    path = _entry(cache, "BO005")
    entry = json.loads(path.read_text())
    entry["payload"]["result"]["shapes_tried"] += 1  # checksum not recomputed
    path.write_text(json.dumps(entry))
    _tamper(_entry(cache, "PF002"), lambda result: result.update(verdict="dead"))  # no unsat cores to re-solve
    assert _prove(capsys, cache) == (0, cold["json"])
    assert sorted(proved) == ["BO005", "PF002"]


# -- dead verdicts: kept with the unsat core of every shape, re-solved on today's encoding --

DEAD = ("PF011",)  # a profile rule expected dead: ~440 shapes, a handful of distinct questions


def _prove_dead(capsys, cache: Path | None) -> tuple[int, str]:
    code = run(DEAD, fmt="json", cache_dir=str(cache) if cache else None)
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def cold_dead(tmp_path_factory):
    import io
    import sys

    folder = tmp_path_factory.mktemp("dead")
    outputs = []
    for cache in (None, folder):
        stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            assert run(DEAD, fmt="json", cache_dir=str(cache) if cache else None) == 0
            outputs.append(sys.stdout.getvalue())
        finally:
            sys.stdout = stdout
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["rules"][0]["verdict"] == "dead"
    return {"json": outputs[0], "folder": folder}


@pytest.fixture
def dead_cache(cold_dead, tmp_path) -> Path:
    folder = tmp_path / "dead"
    shutil.copytree(cold_dead["folder"], folder)
    return folder


@pytest.fixture
def rechecks(monkeypatch):
    """The answers of the re-check of stored dead verdicts (kvproof/solver/core_check.py)."""
    from kvproof.solver import core_check

    answers: list[bool] = []
    original = core_check.recheck

    def spy(rule, rules, config, payload):
        answers.append(original(rule, rules, config, payload))
        return answers[-1]

    monkeypatch.setattr(proof_cache, "recheck", spy)
    return answers


def _steps(path: Path) -> list:
    return json.loads(path.read_text())["payload"]["proof"]["steps"]


def _tamper_proof(path: Path, change) -> None:
    """Change an entry's stored proof and recompute its checksum: only the re-check can catch it."""
    entry = json.loads(path.read_text())
    change(entry["payload"])
    entry["checksum"] = proof_cache._checksum(entry["payload"])
    path.write_text(json.dumps(entry))


def test_a_stored_dead_verdict_is_believed_after_its_cores_are_re_solved(cold_dead, dead_cache, proved, rechecks,
                                                                         capsys) -> None:
    steps = _steps(_entry(dead_cache, "PF011"))
    assert len(steps) > 100 and all(step["core"] for step in steps)
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == [] and rechecks == [True]


def test_a_core_with_its_axioms_dropped_is_not_unsat_and_the_rule_is_re_proved(cold_dead, dead_cache, proved,
                                                                               rechecks, capsys) -> None:
    path = _entry(dead_cache, "PF011")

    def goal_only(payload):  # every shape's core cut to the goal: the loader axioms kill PF011, not the goal
        for step in payload["proof"]["steps"]:
            step["core"] = [c for c in step["core"] if c.startswith("goal:")]
        payload["result"]["core"] = []

    _tamper_proof(path, goal_only)
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == ["PF011"] and rechecks == [False]
    proved.clear()
    rechecks.clear()
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])  # overwritten with a good proof
    assert proved == [] and rechecks == [True]


@pytest.mark.parametrize("change", ["unknown label", "reported core differs", "no proof", "other rule set"])
def test_a_tampered_or_stale_proof_is_detected_and_re_proved(cold_dead, dead_cache, proved, capsys, change) -> None:
    path = _entry(dead_cache, "PF011")

    def tamper(payload):
        if change == "unknown label":  # a label today's encoding does not have
            payload["proof"]["steps"][0]["core"].append("LD:int-range $.no.such.leaf")
            payload["result"]["core"].append("LD:int-range $.no.such.leaf")
        elif change == "reported core differs":  # the report must be the union of the re-solved cores
            payload["result"]["core"] = payload["result"]["core"][:1]
        elif change == "no proof":
            del payload["proof"]
        else:  # written when another rule read otherwise (the pins, the repaired templates, the cores)
            payload["registry"] = "0" * 64

    _tamper_proof(path, tamper)
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == ["PF011"]


def test_a_stored_proof_is_the_proof_of_its_own_rule_only() -> None:
    """The re-check asks today's goal of the rule looked up: another rule's goal label is a label
    its encoding does not have."""
    from kvproof.solver import core_check

    prover = Prover()
    by_id = {r.id: r for r in prover.rules}
    result = prover.prove(by_id["PF011"])
    assert result.verdict == "dead" and result.steps
    payload = core_check.steps_payload(result.steps)
    assert core_check.recheck(by_id["PF011"], prover.rules, prover.config, payload)
    assert not core_check.recheck(by_id["PF010"], prover.rules, prover.config, payload)


def test_a_warm_run_with_two_jobs_re_checks_in_the_workers_and_proves_nothing(tmp_path, capsys,
                                                                            monkeypatch) -> None:
    """``--jobs 2``: the re-checks (PF011's shapes split in two, PF001's replay) run in the forked
    workers; no rule is proved (a proving unit fails here) and the bytes are the cold run's."""
    from kvproof.commands import prove as command

    rules, folder = ("PF001", "PF011"), tmp_path / "cache"
    assert run(rules, fmt="json", cache_dir=str(folder), jobs=2) == 0
    cold = capsys.readouterr().out
    monkeypatch.setattr(command, "prove_unit", _no_proving)
    assert run(rules, fmt="json", cache_dir=str(folder), jobs=2) == 0
    assert capsys.readouterr().out == cold
    _tamper_proof(_entry(folder, "PF011"), lambda payload: payload["proof"]["steps"][-1].update(core=[]))
    with pytest.raises(AssertionError, match="a rule was proved"):  # one part of two fails: proved again
        run(rules, fmt="json", cache_dir=str(folder), jobs=2)


def _no_proving(*_args, **_kwargs):  # a proving unit (module level: the pool pickles it by name)
    raise AssertionError("a rule was proved")
