from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# Hypothesis profiles: "ci" keeps the suite fast on 2 cores; "campaign" is for long runs
# (HYPOTHESIS_PROFILE=campaign python -m pytest ...).
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("campaign", max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
# "conformance": the acceptance run of the vLLM conformance suite (tests/conformance), 400 geometries
# per model family (8 families: 3,200 cases, over 2,000 of them distinct), well under 20 minutes on
# 2 cores; see docs/conformance.md.
settings.register_profile("conformance", max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES
