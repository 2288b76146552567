"""The pre-commit hook (.pre-commit-hooks.yaml, kvproof/precommit.py): which files it judges, and
``pre-commit try-repo`` of this repository running it over the examples in a user's repository
(pre-commit builds the hook's environment from this checkout, as a user's pre-commit does)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from kvproof.precommit import documents, main

ROOT = Path(__file__).resolve().parents[1]
GLM = ROOT / "examples" / "glm53flash-tp4"
TWO_BLOCKS = ROOT / "tests" / "rules" / "CK002" / "two_blocks.json"


def test_a_changed_record_is_checked_with_its_record_set_and_other_json_is_left_alone() -> None:
    chosen = documents([str(GLM / "worker-dp0-tp0-pp0.json"), str(ROOT / "examples" / "geometries" / "glm-like-packed.json"),
                        str(ROOT / ".benchmarks"), "no-such.json"])
    assert chosen == sorted(str(p) for p in GLM.glob("*.json"))


def test_the_hook_exits_as_check_does(capsys, tmp_path) -> None:
    assert main([str(GLM / "profile.json")]) == 0
    assert "6 document(s): 6 accepted" in capsys.readouterr().out
    assert main([str(TWO_BLOCKS)]) == 1
    assert "CK002 $.cache.groups[0].state.num_prefill_checkpoint_blocks" in capsys.readouterr().out
    other = tmp_path / "package.json"
    other.write_text('{"name": "x"}')
    assert main([str(other)]) == 0
    assert "no kvproof record or profile" in capsys.readouterr().out
    assert main(["--format", "github", str(TWO_BLOCKS)]) == 1
    assert capsys.readouterr().out.startswith("::error file=")


def test_the_manifest_names_the_hook() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "kvproof-check" and hook["entry"] == "python -m kvproof.precommit"
    assert hook["language"] == "python" and hook["types"] == ["json"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", *args], cwd=repo, check=True,
                   capture_output=True)


def test_pre_commit_try_repo_runs_the_hook_on_the_examples(tmp_path) -> None:
    """In a temporary clone (the hook manifest and the package as committed, plus this checkout's
    uncommitted changes, which try-repo carries over), then in a user's repository holding the
    examples: all accepted, then a refused record added and the run fails with its diagnostic."""
    clone = tmp_path / "kvproof"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, capture_output=True)
    for name in (".pre-commit-hooks.yaml", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(ROOT / "kvproof", clone / "kvproof", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "--allow-empty", "-m", "this checkout")
    user = tmp_path / "user"
    user.mkdir()
    shutil.copytree(ROOT / "examples", user / "examples")
    (user / "package.json").write_text('{"name": "not a kvproof document"}\n')
    _git(user, "init", "-q")
    _git(user, "add", "-A")
    _git(user, "commit", "-q", "-m", "examples")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(clone), "kvproof-check", "--all-files"]
    ok = subprocess.run(command, cwd=user, env=env, capture_output=True, text=True, timeout=900)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "kvproof check" in ok.stdout and "Passed" in ok.stdout
    shutil.copy(TWO_BLOCKS, user / "examples" / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json")
    _git(user, "commit", "-q", "-am", "a record with two checkpoint blocks")
    refused = subprocess.run(command, cwd=user, env=env, capture_output=True, text=True, timeout=900)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Failed" in refused.stdout
    assert ("examples/glm53flash-tp4/worker-dp0-tp0-pp0.json: CK002 $.cache.groups[0].state.num_prefill_checkpoint_blocks"
            in refused.stdout)
