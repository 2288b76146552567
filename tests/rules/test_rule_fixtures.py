"""Every rule fixture: the complete report equals the hand-written expectation, and the rule
that owns the folder is the first to refuse (or nothing refuses a good_ case).

A case is a document ``<ID>/<case>.json`` or a record set ``<ID>/<case>/`` (its documents
checked together, an optional ``probe/`` folder holding the accepted probe's records).
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from kvproof.models.documents import load_path
from kvproof.rules.check import check
from kvproof.rules.registry import all_rules
from kvproof.rules.state_storage import replay_document

HERE = Path(__file__).resolve().parent
DOCUMENT_CASES = sorted(HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]/*.json"))
SET_CASES = sorted(p for p in HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]/*") if p.is_dir())


def _expected(case: Path) -> list[dict]:
    lines = (case.parent / f"{case.stem if case.suffix else case.name}.expected.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line]


def _assert_first(case: Path, report: list[dict]) -> None:
    if case.stem.startswith("good_"):
        assert report == []
    else:
        assert report and report[0]["rule"] == case.parent.name


@pytest.mark.parametrize("case", DOCUMENT_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_document_report_is_exactly_expected(case: Path) -> None:
    document = load_path(case)
    if case.stem.removeprefix("good_").startswith("replay_"):  # sized or replayed, as kvproof plan checks it (ST028)
        document = replay_document(document)
    report = [{"rule": d.rule, "path": d.path, "message": d.message} for d in check([document])]
    assert report == _expected(case)
    _assert_first(case, report)


@pytest.mark.parametrize("case", SET_CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_record_set_report_is_exactly_expected(case: Path) -> None:
    documents = [load_path(p) for p in sorted(case.glob("*.json"))]
    documents += [attrs.evolve(load_path(p), role="probe") for p in sorted((case / "probe").glob("*.json"))]
    diagnostics = sorted(check(documents), key=lambda d: Path(d.file).name)
    report = [{"file": Path(d.file).name, "rule": d.rule, "path": d.path, "message": d.message} for d in diagnostics]
    assert report == _expected(case)
    if case.name.startswith("good_"):
        assert report == []
    else:
        assert report and min(report, key=lambda r: [x.id for x in all_rules()].index(r["rule"]))["rule"] == case.parent.name


def test_every_reachable_rule_has_a_refused_fixture() -> None:
    refused = {p.parent.name for p in DOCUMENT_CASES + SET_CASES if not p.stem.startswith("good_")}
    reachable = {r.id for r in all_rules() if r.expect == "reachable"}
    assert reachable - refused == set()
