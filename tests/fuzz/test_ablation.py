"""Ablation: without any one rule, some refused input gets through (or the report says why not)."""

from __future__ import annotations

import attrs
import pytest
from fuzz_helpers import FIXTURES

from kvproof.fuzz.ablation import fixture_corpus, run_ablation
from kvproof.rules.registry import all_rules, get_rule

RULES = all_rules()


@pytest.fixture(scope="module")
def corpus():
    return fixture_corpus(FIXTURES)


@pytest.fixture(scope="module")
def report(corpus):
    return run_ablation(corpus, RULES)


def test_every_rule_gets_a_verdict_with_a_reason(report) -> None:
    assert [r.rule for r in report.results] == [r.id for r in RULES]
    for result in report.results:
        assert result.verdict in ("necessary", "guard", "redundant", "untested", "expected-dead"), result
        assert result.reason
    assert report.failures == []


def test_expected_dead_rules_are_reported_as_such(report) -> None:
    verdicts = {r.rule: r.verdict for r in report.results}
    assert verdicts["PF011"] == "expected-dead" and verdicts["VC007"] == "expected-dead"


def test_a_necessary_rule_names_the_input_that_gets_through(report) -> None:
    result = next(r for r in report.results if r.rule == "VG001")
    assert result.verdict == "necessary" and result.witness.startswith("fixture VG001/")


def test_every_storage_policy_rule_is_necessary(report) -> None:
    # each ST rule has a fixture that only it refuses (ST028's is checked in the replay role)
    verdicts = {r.rule: (r.verdict, r.witness) for r in report.results if r.rule.startswith("ST")}
    assert len(verdicts) == 28
    assert {rule: v for rule, v in verdicts.items() if v[0] != "necessary"} == {}


def test_a_duplicated_rule_is_redundant(corpus) -> None:
    twin = attrs.evolve(get_rule("PF009"), id="PF098")
    result = run_ablation(corpus, RULES + [twin])
    verdicts = {r.rule: r for r in result.results}
    # each refuses what the other refuses: neither is needed alone
    assert verdicts["PF009"].verdict == "redundant" and "PF098" in verdicts["PF009"].reason
    assert verdicts["PF098"].verdict in ("redundant", "untested")


def test_a_rule_that_fires_while_expected_dead_fails_the_campaign() -> None:
    dead = attrs.evolve(get_rule("PF009"), id="PF097", expect="dead", reason="planted")
    rules = [r for r in RULES if r.family == "PF"] + [dead]
    result = run_ablation(fixture_corpus(FIXTURES, rules, ids=[r.id for r in rules] + ["PF009"]), rules)
    assert [r.rule for r in result.failures] == ["PF097"]


def test_every_import_gate_rule_is_necessary_on_its_fixtures(report) -> None:
    """RS, PA, CA and CK004 each let a refused fixture through when left out, except PA003: a
    profile group's kind is fixed by its blocks_per_request (PF001: a state group has one, PF003:
    an attention group has none), which PA008 compares with the records, so every kind edit is
    refused without PA003 too (its message names the kind; kept)."""
    verdicts = {r.rule: r for r in report.results}
    new = [r.id for r in RULES if r.family in ("RS", "PA", "CA") or r.id == "CK004"]
    assert {rule: verdicts[rule].verdict for rule in new if verdicts[rule].verdict != "necessary"} == {"PA003": "redundant"}
    assert "PA008" in verdicts["PA003"].reason
