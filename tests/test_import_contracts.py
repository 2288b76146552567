"""The arrows of docs/design.md as import-linter contracts ([tool.importlinter] in pyproject.toml):
the layers, rule families that never import each other, and no circle inside a package. Every
import statement counts, also one inside a function."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kvproof

ROOT = Path(__file__).resolve().parents[1]
CODE = Path(kvproof.__file__).resolve().parent


def _lint(where: Path, package: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    return subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()", "--config", str(where / "pyproject.toml"),
                           "--no-cache"], cwd=where, env=env, capture_output=True, text=True, timeout=120)


def test_the_code_keeps_every_contract() -> None:
    run = _lint(ROOT, CODE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 kept, 0 broken" in run.stdout


@pytest.mark.parametrize("module, arrow, broken", [
    ("models/record.py", "from ..rules import core", "Imports run one way"),  # an arrow back up a layer
    ("rules/version_gate.py", "from . import view_coverage", "A rule family never imports another"),
    ("formulas/pages.py", "from . import select", "No circle among the modules of a package"),
])
def test_an_arrow_that_breaks_a_contract_fails(tmp_path, module, arrow, broken) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    copy = tmp_path / "src" / "kvproof"
    shutil.copytree(CODE, copy, ignore=shutil.ignore_patterns("__pycache__", "examples"))
    target = copy / module
    if "select" in arrow:  # a circle: pages -> select -> pages
        (copy / "formulas" / "select.py").write_text((copy / "formulas" / "select.py").read_text()
                                                     + "\n\ndef _circle():\n    from . import pages\n")
    target.write_text(target.read_text() + f"\n\ndef _arrow():\n    {arrow}\n")
    run = _lint(tmp_path, copy)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{broken}" in run.stdout and "BROKEN" in run.stdout
