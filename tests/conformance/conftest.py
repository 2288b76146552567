"""Fixtures of the conformance suite: vLLM 0.33.0 itself (through ``oracle.py`` in ``.venv-vllm``)
against ``kvproof.sim.simulate_document``, key by key.

Opt-in: ``bash scripts/conformance-setup.sh && python -m pytest -m conformance tests/conformance``.
Without ``.venv-vllm/bin/python`` every test here is skipped with the reason; with it, a missing
``kvproof.sim.simulate_document`` fails the tests (it does not skip them).

At the end of the session the terminal summary (and ``out/conformance-report.json``) lists the
cases run, the agreements, and every disagreement with its geometry (the shrunk one, for
Hypothesis) and the differing keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
GEOMETRIES = HERE / "geometries"
ORACLE = HERE / "oracle.py"
VENV_PYTHON = Path(os.environ.get("KVPROOF_ORACLE_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
REPORT = ROOT / "out" / "conformance-report.json"
ORACLE_TIMEOUT_S = float(os.environ.get("KVPROOF_ORACLE_TIMEOUT", "600"))

NO_VENV_REASON = (
    f"{VENV_PYTHON} is absent: run `bash scripts/conformance-setup.sh` to create the vLLM 0.33.0 "
    "environment the conformance oracle needs"
)


def pytest_collection_modifyitems(config, items):
    """Every test of this directory is a conformance test; skip them all without the venv."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.conformance)
            if not VENV_PYTHON.exists():
                item.add_marker(pytest.mark.skip(reason=NO_VENV_REASON))


# --- the oracle process ---------------------------------------------------------------------------

class OracleProcess:
    """``oracle.py --jsonl`` in ``.venv-vllm``: one geometry per line in, one answer per line out.

    vLLM is imported once per session; answers are cached by the geometry's canonical JSON (Hypothesis
    replays examples while shrinking).
    """

    def __init__(self, python: Path):
        self._log = open(ROOT / "out" / "conformance-oracle.stderr.log", "w", encoding="utf-8")
        self._proc = subprocess.Popen(
            [str(python), str(ORACLE), "--jsonl"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, bufsize=1, cwd=str(ROOT),
        )
        self._cache: dict[str, dict] = {}
        self._lock = threading.Lock()

    def __call__(self, geometry: dict) -> dict:
        key = json.dumps(geometry, sort_keys=True)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            if self._proc.poll() is not None:
                raise RuntimeError(f"the oracle exited with {self._proc.returncode}; see {self._log.name}")
            self._proc.stdin.write(json.dumps(geometry) + "\n")
            self._proc.stdin.flush()
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(self._proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(ORACLE_TIMEOUT_S)
            if not answer or not answer[0]:
                raise RuntimeError(f"no answer from the oracle within {ORACLE_TIMEOUT_S}s; see {self._log.name}")
            result = json.loads(answer[0])
            self._cache[key] = result
            return result

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._log.close()


@pytest.fixture(scope="session")
def oracle():
    if not VENV_PYTHON.exists():
        pytest.skip(NO_VENV_REASON)
    (ROOT / "out").mkdir(exist_ok=True)
    proc = OracleProcess(VENV_PYTHON)
    yield proc
    proc.close()


@pytest.fixture(scope="session")
def simulate():
    """``kvproof.sim.simulate_document``; its absence is a failure, not a skip."""
    try:
        from kvproof.sim import simulate_document
    except ImportError as exc:  # noqa: F841 - reported below
        pytest.fail(
            "kvproof.sim.simulate_document(doc: dict) -> dict is missing: the conformance suite "
            f"compares it with vLLM 0.33.0 ({type(exc).__name__}: {exc})", pytrace=False)
    return simulate_document


# --- the report -----------------------------------------------------------------------------------

@dataclass
class Report:
    """Every comparison of the session."""

    cases: int = 0
    agreements: int = 0
    by_test: dict[str, list[int]] = field(default_factory=dict)  # test -> [cases, agreements]
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def record(self, test: str, geometry: dict, differences: list[dict]) -> None:
        """One comparison (Hypothesis calls it for every example it tries)."""
        self.cases += 1
        counts = self.by_test.setdefault(test, [0, 0])
        counts[0] += 1
        if not differences:
            self.agreements += 1
            counts[1] += 1

    def disagreement(self, test: str, geometry: dict, differences: list[dict]) -> None:
        """The final (shrunk, for Hypothesis) disagreement of a test."""
        self.disagreements.append({"test": test, "geometry": geometry, "differences": differences})


REPORT_STATE = Report()


@pytest.fixture(scope="session")
def report() -> Report:
    return REPORT_STATE


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = REPORT_STATE
    if not state.cases and not state.disagreements:
        return
    tr = terminalreporter
    tr.section("kvproof vs vLLM 0.33.0 conformance")
    tr.write_line(f"cases run: {state.cases}, agreements: {state.agreements}, "
                  f"disagreeing cases: {state.cases - state.agreements} "
                  f"(Hypothesis counts every example it tried, shrinking included)")
    for test, (cases, agree) in sorted(state.by_test.items()):
        tr.write_line(f"  {test}: {cases} cases, {agree} agreements")
    for item in state.disagreements:
        tr.write_line("")
        tr.write_line(f"DISAGREEMENT in {item['test']}")
        tr.write_line("  geometry: " + json.dumps(item["geometry"]))
        for diff in item["differences"]:
            tr.write_line(f"  {diff['path']}: vLLM {diff['vllm']} | kvproof {diff['kvproof']}")
    try:
        REPORT.parent.mkdir(exist_ok=True)
        REPORT.write_text(json.dumps({"cases": state.cases, "agreements": state.agreements,
                                      "by_test": state.by_test, "disagreements": state.disagreements},
                                     indent=1) + "\n")
        tr.write_line(f"report: {REPORT.relative_to(ROOT)}")
    except OSError as exc:
        tr.write_line(f"(report not written: {exc})")
