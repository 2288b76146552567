"""The request goldens of ``tests/conformance/requests/`` (answers of vLLM 0.33.0's own
``KVCacheManager`` and ``Scheduler``, written by ``oracle_requests.py``) against
``kvproof.sim.simulate_document``, in the default suite: they need no vLLM to compare.
The live comparison (the oracle re-run, random workloads) is the opt-in
``tests/conformance/test_requests_parity.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvproof.sim import simulate_document

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
sys.path.insert(0, str(CONFORMANCE))
from test_requests_parity import GOLDEN, _expected, _format, compare  # noqa: E402

sys.path.remove(str(CONFORMANCE))


def test_there_are_goldens() -> None:
    assert len(GOLDEN) >= 18


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    geometry = json.loads(path.read_text())
    differences = compare(json.loads(_expected(path).read_text()), simulate_document(geometry))
    assert not differences, _format(f"golden {path.stem}", geometry, differences)
