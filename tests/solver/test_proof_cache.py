"""The proof cache (``kvproof prove --cache DIR``, kvproof/solver/proof_cache.py): a warm run prints
the cold run's bytes without proving; an edited rule body or formula re-proves only the rules that
reach it; a corrupted or tampered entry is ignored, re-proved and overwritten."""

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


def test_a_checksum_mismatch_or_a_stored_dead_verdict_is_not_believed(cold, cache, proved, capsys) -> None:
    path = _entry(cache, "BO005")
    entry = json.loads(path.read_text())
    entry["payload"]["result"]["shapes_tried"] += 1  # checksum not recomputed
    path.write_text(json.dumps(entry))
    _tamper(_entry(cache, "PF002"), lambda result: result.update(verdict="dead"))  # dead is never cached
    assert _prove(capsys, cache) == (0, cold["json"])
    assert sorted(proved) == ["BO005", "PF002"]


def test_a_key_follows_the_constants_and_formulas_a_rule_reaches(monkeypatch) -> None:
    from kvproof.rules import profile_fields

    rules = {r.id: r for r in registry.all_rules()}
    keys = {i: proof_cache.rule_key(rules[i], "env") for i in ("PF001", "PF004", "BO005")}
    assert proof_cache.rule_key(rules["PF004"], "other env") != keys["PF004"]
    monkeypatch.setattr(profile_fields, "MAX_U32", profile_fields.MAX_U32 - 1)  # a table PF004's body reads
    after = {i: proof_cache.rule_key(rules[i], "env") for i in keys}
    assert after["PF004"] != keys["PF004"]
    assert (after["PF001"], after["BO005"]) == (keys["PF001"], keys["BO005"])


def test_keys_are_the_same_under_two_hash_seeds() -> None:
    """A cache shared between machines and runs: no key may follow the hash seed (sets, ids)."""
    import os
    import subprocess
    import sys

    script = ("from kvproof.rules.registry import all_rules; from kvproof.solver.prove import Prover; "
              "from kvproof.solver.proof_cache import ProofCache; from kvproof.solver.shapes import examples_dir; "
              "p = Prover(); c = ProofCache('unused', p.rules, p.bound, p.config, examples_dir()); "
              "print(' '.join(c.key(r) for r in p.rules))")
    keys = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert keys[0] == keys[1] and len(keys[0].split()) == len(registry.all_rules())
