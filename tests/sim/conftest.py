from __future__ import annotations

import pytest
from sim_helpers import GEOMETRIES, full_attention, geometry, load_example  # noqa: F401 - re-exported

__all__ = ["GEOMETRIES", "full_attention", "geometry", "load_example"]


@pytest.fixture
def example():
    return load_example
