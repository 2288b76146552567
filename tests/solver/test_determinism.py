"""prove answers the same question the same way: across PYTHONHASHSEED values, across --jobs,
and whatever was asked before in the same process (#13 item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvproof.rules.registry import all_rules, get_rule
from kvproof.solver.prove import Prover

ROOT = Path(__file__).resolve().parents[2]
#: PC010 (its witness ended in 'none' or 'align' by hash seed), SU007 (a goal's or-order followed
#: term ids), PF022/PF023 (changed by the rules proved before them), PF011 (dead: its core).
RULES = ["PC010", "SU007", "PF011", "PF022", "PF023"]


def _prove(rules: list[str], seed: int, jobs: int, tmp: Path, code: int = 0) -> tuple[dict, dict]:
    witnesses = tmp / f"w-{seed}-{jobs}-{len(rules)}"
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "kvproof", "prove", *rules, "--format", "json", "--jobs", str(jobs),
                          "--output", str(witnesses)], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == code, run.stderr
    report = {r["rule"]: {k: v for k, v in r.items() if k != "witness"} for r in json.loads(run.stdout)["rules"]}
    assert all("seconds" not in r for r in report.values())  # no clock in the report: the same bytes every run
    files = {str(p.relative_to(witnesses)): p.read_text() for p in sorted(witnesses.rglob("*.json"))}
    return report, files


def test_two_hash_seeds_and_two_job_counts_give_the_same_bytes(tmp_path) -> None:
    first = _prove(RULES, 1, 1, tmp_path)
    second = _prove(RULES, 2, 2, tmp_path)
    assert first[0] == second[0]
    assert first[1] == second[1] and len(first[1]) == len(RULES) - 1  # every reachable rule has a witness


def test_a_rule_gets_the_same_answer_whatever_else_is_requested(tmp_path) -> None:
    # each kind closes its own pins, only when asked: PF023 (profile) alone must not differ from
    # PF023 asked with rules over workers, schedulers and bundles (their pins used to be closed
    # together, over all 124 base shapes, before any question)
    alone = _prove(["PF023"], 1, 1, tmp_path)
    together = _prove(["SU007", "PC010", "RS008", "PF023"], 2, 1, tmp_path)
    assert alone[0]["PF023"] == together[0]["PF023"]
    assert alone[1]["PF023.json"] == together[1]["PF023.json"]


def test_the_pins_of_a_kind_are_closed_alone_and_lazily() -> None:
    prover = Prover()
    prover.prove(get_rule("PF001"))
    assert prover.closed_kinds == ["profile"]  # prove PF001 pays for the profile shapes only
    other = Prover()
    other.close_pins(["bundle", "scheduler"])
    assert other.pins_of("worker") == Prover().pins_of("worker")  # whatever kind was closed before


def test_a_rule_gets_the_same_answer_whatever_was_asked_before() -> None:
    alone = Prover().prove(get_rule("PF023"))
    prover = Prover()
    for rule_id in ("PF001", "SU007", "PF022"):
        prover.prove(get_rule(rule_id))
    prover.sessions.clear()  # the sessions are built again, their z3 terms get other ids
    after = prover.prove(get_rule("PF023"))
    assert after.documents == alone.documents and after.changed == alone.changed and after.reason == alone.reason


@pytest.mark.slow
def test_prove_all_is_byte_identical_across_hash_seeds_and_jobs(tmp_path) -> None:
    rules = [rule.id for rule in all_rules()]
    assert _prove(rules, 1, 1, tmp_path) == _prove(rules, 2, 2, tmp_path)
