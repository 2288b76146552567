"""The CLI: exit codes, formats, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvproof.cli import main

RULES = Path(__file__).resolve().parent / "rules"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_examples_are_accepted(capsys, examples) -> None:
    code, out, _ = run(capsys, "check", str(examples))
    assert code == 0
    assert "0 refused, 0 bad input" in out


def test_refusal_prints_id_path_message_and_exits_1(capsys) -> None:
    case = RULES / "PF006" / "two_checkpoints.json"
    code, out, _ = run(capsys, "check", str(case))
    assert code == 1
    assert f"{case}: PF006 $.resources.cache_groups[0].prefill_checkpoint_blocks: prefill_checkpoint_blocks must be 0 or 1\n" in out


def test_bad_input_exits_2_and_wins_over_refusal(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, out, _ = run(capsys, "check", str(bad), str(RULES / "PF006" / "two_checkpoints.json"))
    assert code == 2
    assert "LD001 $: invalid JSON" in out


def test_missing_path_and_empty_directory_exit_2(capsys, tmp_path) -> None:
    assert run(capsys, "check", str(tmp_path / "nope.json"))[0] == 2
    assert run(capsys, "check", str(tmp_path))[0] == 2


def test_usage_error_exits_2(capsys) -> None:
    assert run(capsys, "check")[0] == 2
    assert run(capsys, "check", "--format", "yaml", "x")[0] == 2
    assert run(capsys, "frobnicate")[0] == 2


def test_json_report_is_stable(capsys) -> None:
    case = str(RULES / "CK002" / "bool_count.json")
    first = run(capsys, "check", "--format", "json", case)
    second = run(capsys, "check", "--format", "json", case)
    assert first == second and first[0] == 1
    report = json.loads(first[1])
    assert report["exit_code"] == 1
    (document,) = report["documents"]
    assert document["status"] == "refused" and document["kind"] == "worker"
    assert [d["rule"] for d in document["diagnostics"]] == ["CK002"]


def test_sarif_report(capsys) -> None:
    code, out, _ = run(capsys, "check", "--format", "sarif", str(RULES / "PF001" / "zero_count.json"))
    sarif = json.loads(out)
    assert code == 1 and sarif["version"] == "2.1.0"
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "PF001"
    assert result["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "$.resources.cache_groups[0].blocks_per_request"
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rules[result["ruleIndex"]]["id"] == "PF001"


def test_junit_report(capsys, examples) -> None:
    code, out, _ = run(capsys, "check", "--format", "junit", str(RULES / "PF001"), str(examples / "minimax-m27-tp4"))
    root = ET.fromstring(out)
    assert code == 1
    assert int(root.get("failures")) == 3  # zero, negative, missing count
    assert int(root.get("tests")) == 3 + 6


def test_rules_lists_every_rule_with_its_source(capsys) -> None:
    from kvproof.rules.registry import all_rules

    code, out, _ = run(capsys, "rules", "--format", "json")
    listed = json.loads(out)["rules"]
    assert code == 0
    assert [r["id"] for r in listed] == [r.id for r in all_rules()]
    assert all(r["source"] and r["message"] for r in listed)
    assert run(capsys, "rules", "XX999")[0] == 2


@pytest.mark.parametrize("kind", ["record", "profile"])
def test_schema_validates_the_examples(capsys, examples, kind) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    code, out, _ = run(capsys, "schema", kind)
    schema = json.loads(out)
    assert code == 0
    pattern = "profile.json" if kind == "profile" else "*-dp0*.json"
    paths = sorted(examples.glob(f"*/{pattern}"))
    assert paths
    for path in paths:
        jsonschema.validate(json.loads(path.read_text()), schema)
    bad = json.loads(paths[0].read_text())
    bad["unexpected"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_console_script_runs_without_traceback(tmp_path) -> None:
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x00\x01\x02\xff")
    proc = subprocess.run([sys.executable, "-m", "kvproof", "check", str(binary)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "LD001 $: document is not UTF-8 text" in proc.stdout
