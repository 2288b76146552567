"""The proof cache (``kvproof prove --cache DIR``, kvproof/solver/proof_cache.py): a warm run prints
the cold run's bytes without proving; an edited rule body or formula re-proves only the rules that
reach it; a corrupted or tampered entry is ignored, re-proved and overwritten. A dead verdict is
believed only under today's kvproof source and rules, after every stored core question is unsat
again in z3."""

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


# -- dead verdicts: kept with the question of every shape's unsat core, re-solved by z3 on a hit --

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

    def spy(payload, config):
        answers.append(original(payload, config))
        return answers[-1]

    monkeypatch.setattr(proof_cache, "recheck", spy)
    return answers


def _proof(path: Path) -> dict:
    return json.loads(path.read_text())["payload"]["proof"]


def _tamper_proof(path: Path, change) -> None:
    """Change an entry's stored proof and recompute its checksum: only the re-check can catch it."""
    entry = json.loads(path.read_text())
    change(entry["payload"])
    entry["checksum"] = proof_cache._checksum(entry["payload"])
    path.write_text(json.dumps(entry))


def test_a_stored_dead_verdict_is_believed_after_its_questions_are_re_solved(cold_dead, dead_cache, proved,
                                                                             rechecks, capsys) -> None:
    entry = json.loads(_entry(dead_cache, "PF011").read_text())["payload"]
    proof = entry["proof"]
    assert set(proof) == {"questions", "steps"}  # no documents, no pins: the questions stand for them
    assert len(proof["steps"]) > 100 and all(set(step) == {"shape", "core", "question"} for step in proof["steps"])
    assert all(step["core"] for step in proof["steps"])
    assert {step["question"] for step in proof["steps"]} == set(range(len(proof["questions"])))
    assert len(proof["questions"]) < 10 and all("(assert" in text for text in proof["questions"])
    assert len(set(proof["questions"])) == len(proof["questions"])  # each distinct question once
    assert entry["package"] == proof_cache.folder_digest(proof_cache._PACKAGE, "*.py")
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == [] and rechecks == [True]


def _last_assertion_only(text: str) -> str:
    """The question's declarations and its last assertion (the goal: PF011's goal alone is
    satisfiable, the loader axioms kill it)."""
    head, *assertions = text.split("\n(assert")
    assert len(assertions) > 1
    return head + "\n(assert" + assertions[-1]


@pytest.mark.parametrize("change", ["satisfiable", "one assertion kept", "does not parse", "no such question",
                                    "no questions"])
def test_a_stored_question_that_is_not_unsat_again_is_re_proved(cold_dead, dead_cache, proved, rechecks, capsys,
                                                                change) -> None:
    path = _entry(dead_cache, "PF011")

    def tamper(payload):
        proof = payload["proof"]
        if change == "satisfiable":  # one question (the last step's) made satisfiable
            proof["questions"][proof["steps"][-1]["question"]] = "(assert true)\n"
        elif change == "one assertion kept":
            proof["questions"] = [_last_assertion_only(text) for text in proof["questions"]]
        elif change == "does not parse":  # cut in the middle of a term
            proof["questions"][0] = proof["questions"][0][: len(proof["questions"][0]) // 2]
        elif change == "no such question":
            proof["steps"][-1]["question"] = len(proof["questions"])
        else:
            proof["questions"] = []

    _tamper_proof(path, tamper)
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == ["PF011"] and rechecks == [False]
    proved.clear()
    rechecks.clear()
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])  # overwritten with a good proof
    assert proved == [] and rechecks == [True]


@pytest.mark.parametrize("change", ["label added", "label removed", "reported core differs", "no proof",
                                    "other rule set", "other code"])
def test_a_tampered_or_stale_proof_is_detected_and_re_proved(cold_dead, dead_cache, proved, rechecks, capsys,
                                                             change) -> None:
    """The cheap checks, before any question is asked: the steps' cores must make the reported
    core, and the entry must have been written under today's rules and today's kvproof."""
    path = _entry(dead_cache, "PF011")

    def tamper(payload):
        steps = payload["proof"]["steps"]
        if change == "label added":  # a step's core names what the report does not
            steps[0]["core"].append("LD:int-range $.no.such.leaf")
        elif change == "label removed":  # no step's core names a label of the report
            label = payload["result"]["core"][0]
            for step in steps:
                step["core"] = [c for c in step["core"] if c != label]
        elif change == "reported core differs":  # the report must be the union of the stored cores
            payload["result"]["core"] = payload["result"]["core"][:1]
        elif change == "no proof":
            del payload["proof"]
        elif change == "other rule set":  # written when another rule read otherwise (pins, templates, cores)
            payload["registry"] = "0" * 64
        else:  # written by other kvproof code: its questions are not today's encoding
            payload["package"] = "0" * 64

    _tamper_proof(path, tamper)
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])
    assert proved == ["PF011"] and rechecks == []
    proved.clear()
    assert _prove_dead(capsys, dead_cache) == (0, cold_dead["json"])  # overwritten with a good proof
    assert proved == [] and rechecks == [True]


def test_an_edit_anywhere_in_kvproof_re_proves_the_dead_verdicts_only(cold_dead, tmp_path, proved, rechecks,
                                                                      capsys, monkeypatch) -> None:
    """A dead entry's questions stand in for today's encoding: its key covers every Python file
    of kvproof (here a copy, a command module no rule reaches edited). A reachable verdict is
    replayed through today's checker: its entry stays."""
    rules, folder = ("PF001", "PF011"), tmp_path / "cache"
    assert run(rules, fmt="json", cache_dir=str(folder)) == 0
    cold = capsys.readouterr().out
    proved.clear()
    package = tmp_path / "kvproof"
    shutil.copytree(proof_cache._PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(proof_cache, "_PACKAGE", package)
    assert run(rules, fmt="json", cache_dir=str(folder)) == 0  # the same source: every entry believed
    assert capsys.readouterr().out == cold and proved == [] and rechecks == [True]
    with (package / "commands" / "rules.py").open("a") as source:
        source.write("\n# an edit\n")
    assert run(rules, fmt="json", cache_dir=str(folder)) == 0
    assert capsys.readouterr().out == cold and proved == ["PF011"] and rechecks == [True]


def test_a_stored_proof_is_the_proof_of_its_own_rule_only() -> None:
    """The questions are built from today's encoding of the rule being stored: another rule's goal
    label is a label its encoding does not have, and a core that is not unsat is not kept."""
    from kvproof.solver import core_check

    prover = Prover()
    by_id = {r.id: r for r in prover.rules}
    result = prover.prove(by_id["PF011"])
    assert result.verdict == "dead" and result.steps
    payload = core_check.proof_payload(by_id["PF011"], prover.rules, prover.config, result.steps)
    assert payload is not None and core_check.recheck(payload, prover.config)
    assert core_check.proof_payload(by_id["PF010"], prover.rules, prover.config, result.steps) is None
    goal_only = [(shape, pins, [c for c in core if c.startswith("goal:")]) for shape, pins, core, _ in result.steps]
    assert core_check.proof_payload(by_id["PF011"], prover.rules, prover.config, goal_only) is None  # sat
    # a prover that keeps proofs takes each question from the session that answered it (nothing
    # built again): the same entry, to the byte, as the questions built from the stored shapes
    keeping = Prover()
    keeping.keep_proofs = True
    kept = keeping.prove(by_id["PF011"])
    assert kept.to_json() == result.to_json() and all(question is not None for *_, question in kept.steps)
    assert all(question is None for *_, question in result.steps)
    assert core_check.proof_payload(by_id["PF011"], keeping.rules, keeping.config, kept.steps) == payload


def test_a_dead_verdict_whose_question_is_not_unsat_is_not_stored(tmp_path, monkeypatch) -> None:
    from kvproof.solver import core_check
    from kvproof.solver.shapes import Bound, examples_dir

    prover = Prover()
    result = prover.prove(next(r for r in prover.rules if r.id == "PF011"))
    cache = proof_cache.ProofCache(tmp_path / "cache", prover.rules, Bound(), prover.config, examples_dir())
    monkeypatch.setattr(core_check, "_unsat", lambda texts, config: False)
    assert not cache.store(result) and not (tmp_path / "cache").exists()
    monkeypatch.undo()
    assert cache.store(result) and len(list((tmp_path / "cache").glob("PF011-*.json"))) == 1


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

    def last_step_satisfiable(payload):  # the last step only (one part of the two) points at a satisfiable question
        proof = payload["proof"]
        proof["steps"][-1]["question"] = len(proof["questions"])
        proof["questions"].append("(assert true)\n")

    _tamper_proof(_entry(folder, "PF011"), last_step_satisfiable)
    with pytest.raises(AssertionError, match="a rule was proved"):  # one part of two fails: proved again
        run(rules, fmt="json", cache_dir=str(folder), jobs=2)


def _no_proving(*_args, **_kwargs):  # a proving unit (module level: the pool pickles it by name)
    raise AssertionError("a rule was proved")
