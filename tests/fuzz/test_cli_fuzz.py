"""``kvproof fuzz``: report, exit codes, reproduction files, determinism, lazy imports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from fuzz_helpers import MINIMAX

from kvproof.cli import main
from kvproof.fuzz import explained


@pytest.fixture
def profile_only(tmp_path):
    """A record set of one FPM profile (its campaign takes a second)."""
    directory = tmp_path / "minimax"
    directory.mkdir()
    shutil.copy(MINIMAX / "profile.json", directory / "profile.json")
    return directory


def _fuzz(capsys, *args: str) -> tuple[int, str]:
    code = main(["fuzz", *args])
    return code, capsys.readouterr().out


def test_mutation_report_counts_edits_and_exits_0(profile_only, tmp_path, capsys) -> None:
    code, out = _fuzz(capsys, "--campaign", "mutation", "--count", "5", "--output", str(tmp_path / "o"), str(profile_only))
    assert code == 0, out
    assert "single-field edits tried" in out and "refused" in out and "SURVIVING (unexplained)       0" in out
    assert "fields never read:" in out and "rules never fired:" in out
    assert out.rstrip().endswith("ok: no failure")


def test_json_report_is_deterministic_for_a_seed(profile_only, tmp_path, capsys) -> None:
    args = ["--campaign", "mutation", "--count", "8", "--seed", "7", "--format", "json", "--output", str(tmp_path / "o"),
            str(profile_only)]
    text = _fuzz(capsys, *args)[1]
    assert _fuzz(capsys, *args)[1] == text  # byte for byte: no clock in the report without --timings
    first = json.loads(text)
    assert first["mutation"]["edits"] == first["mutation"]["refused"] + first["mutation"]["accepted"]
    assert first["mutation"]["random"] > 0 and first["exit_code"] == 0


def test_a_surviving_mutant_fails_with_a_reproducing_check_command(profile_only, tmp_path, capsys, monkeypatch) -> None:
    # Without the declared variant "group names are free text", renaming a group survives.
    monkeypatch.setattr(explained, "VALID_VARIANTS",
                        tuple(v for v in explained.VALID_VARIANTS if (v.owner, v.field) != ("CacheGroup", "name")))
    out_dir = tmp_path / "failures"
    code, out = _fuzz(capsys, "--campaign", "mutation", "--count", "0", "--output", str(out_dir), str(profile_only))
    assert code == 1
    assert "surviving mutant: profile.json: $.resources.cache_groups[0].name" in out
    directory = out_dir / "mutant-0001"
    assert f"reproduce: kvproof check {directory}" in out
    assert json.loads((directory / "profile.json").read_text())["resources"]["cache_groups"][0]["name"] == "kvproof-unknown"
    assert main(["check", str(directory)]) == 0  # the mutant is accepted: the command reproduces the failure
    capsys.readouterr()


def test_an_input_that_is_not_accepted_fails(tmp_path, capsys) -> None:
    directory = tmp_path / "bad"
    directory.mkdir()
    profile = json.loads((MINIMAX / "profile.json").read_text())
    profile["resources"]["cache_groups"][0]["num_layers"] = 0
    (directory / "profile.json").write_text(json.dumps(profile))
    code, out = _fuzz(capsys, "--campaign", "mutation", "--count", "0", "--output", str(tmp_path / "o"), str(directory))
    assert code == 1 and "input not accepted" in out and "PF014" in out


def test_bad_input_exits_2(tmp_path, capsys) -> None:
    (tmp_path / "x.json").write_text("{")
    code, out = _fuzz(capsys, "--campaign", "mutation", str(tmp_path / "x.json"))
    assert code == 2 and "LD001" in out


def test_importing_the_cli_imports_neither_hypothesis_nor_z3() -> None:
    code = "import sys, kvproof.cli; sys.exit(int(any(m in sys.modules for m in ('hypothesis', 'z3'))))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
