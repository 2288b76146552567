"""Every rule fixture: the complete report equals the hand-written expectation, and the rule
that owns the folder is the first to refuse (or nothing refuses a good_ case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.models.documents import load_path
from kvproof.rules.check import check
from kvproof.rules.registry import all_rules

HERE = Path(__file__).resolve().parent
CASES = sorted(HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]/*.json"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_report_is_exactly_expected(case: Path) -> None:
    expected = [json.loads(line) for line in case.with_suffix(".expected.jsonl").read_text().splitlines() if line]
    report = [{"rule": d.rule, "path": d.path, "message": d.message} for d in check([load_path(case)])]
    assert report == expected
    if case.stem.startswith("good_"):
        assert report == []
    else:
        assert report[0]["rule"] == case.parent.name


def test_every_reachable_rule_has_a_refused_fixture() -> None:
    refused = {p.parent.name for p in CASES if not p.stem.startswith("good_")}
    reachable = {r.id for r in all_rules() if r.expect == "reachable"}
    assert reachable - refused == set()
