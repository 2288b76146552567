"""The pytest plugin (kvproof/pytest_plugin.py): a user's test file that uses the fixture and the
assertion helpers passes where kvproof's verdict is the asserted one and fails, with the check's
report, where it is not (run by pytester in a separate pytest session)."""

from __future__ import annotations

import tomllib
from pathlib import Path

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "glm53flash-tp4"
TWO_BLOCKS = ROOT / "tests" / "rules" / "CK002" / "two_blocks.json"
CHECKPOINT = "$.cache.groups[0].state.num_prefill_checkpoint_blocks"

USER_TESTS = f'''
import shutil
from pathlib import Path

import pytest

from kvproof.pytest_plugin import assert_accepted, assert_refused

GLM = Path({str(GLM)!r})
TWO_BLOCKS = Path({str(TWO_BLOCKS)!r})


def test_records_accepted():
    assert_accepted(GLM)


def test_refused_by_its_rule_at_its_path():
    (diagnostic,) = assert_refused(TWO_BLOCKS, "ck002", path="{CHECKPOINT}", first=True)
    assert diagnostic.rule == "CK002"


def test_fixture_takes_paths_from_the_test_folder(kvproof):
    shutil.copy(TWO_BLOCKS, Path(__file__).parent / "mine.json")
    kvproof.assert_refused("mine.json", "CK002")
    assert [r.status for r in kvproof.check("mine.json")] == ["refused"]


def test_bad_input_is_refused_by_the_loader(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{{")
    assert_refused(bad, "LD001")


def test_FAILS_refused_document_asserted_accepted():
    assert_accepted(TWO_BLOCKS)


def test_FAILS_accepted_records_asserted_refused():
    assert_refused(GLM, "CK002")


def test_FAILS_wrong_rule():
    assert_refused(TWO_BLOCKS, "CK003")


def test_FAILS_wrong_path():
    assert_refused(TWO_BLOCKS, "CK002", path="$.cache")
'''


def test_a_users_test_file_passes_and_fails_as_expected(pytester, monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the plugin once, whether installed or not
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "kvproof.pytest_plugin", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=4, failed=4)
    failed = {line.split("::")[1].split(" ")[0] for line in result.outlines if line.startswith("FAILED")}
    assert failed == {"test_FAILS_refused_document_asserted_accepted", "test_FAILS_accepted_records_asserted_refused",
                      "test_FAILS_wrong_rule", "test_FAILS_wrong_path"}
    result.stdout.fnmatch_lines([
        "*kvproof check did not accept*two_blocks.json:*",
        "*two_blocks.json: CK002 $.cache.groups?0?.state.num_prefill_checkpoint_blocks: mamba prefill checkpoint blocks must be 0 or 1*",
        "*kvproof check did not refuse*glm53flash-tp4 with CK002:*",
        "*did not refuse*two_blocks.json with CK003:*",
        "*did not refuse*two_blocks.json with CK002 at $.cache:*",
    ])


def test_the_plugin_is_a_pytest11_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kvproof": "kvproof.pytest_plugin"}
