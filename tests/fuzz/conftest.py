from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_helpers import GEMMA, GLM, MINIMAX


@pytest.fixture(scope="session")
def record_sets():
    """The example record sets (loaded once), by directory name."""
    from kvproof.fuzz.campaigns import collect_inputs

    sets, _ = collect_inputs([str(GLM), str(MINIMAX), str(GEMMA)])
    return {Path(s.name).name: s for s in sets}
