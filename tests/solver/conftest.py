"""Solver tests: fast by default; ``slow`` ones (full sweeps) run with KVPROOF_SLOW=1."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "slow: a long solver run (set KVPROOF_SLOW=1 to run it)")


def pytest_collection_modifyitems(config, items) -> None:
    if os.environ.get("KVPROOF_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow solver run; set KVPROOF_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
