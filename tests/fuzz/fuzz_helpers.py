"""Paths and small helpers shared by the fuzz tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GLM = EXAMPLES / "glm53flash-tp4"
MINIMAX = EXAMPLES / "minimax-m27-tp4"
GEMMA = EXAMPLES / "gemma-like-swa"
FIXTURES = Path(__file__).resolve().parents[1] / "rules"

#: Long runs: HYPOTHESIS_PROFILE=campaign python -m pytest tests/fuzz
CAMPAIGN = os.environ.get("HYPOTHESIS_PROFILE") == "campaign"


def tree(path: Path) -> dict:
    return json.loads(path.read_text())
