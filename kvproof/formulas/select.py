"""``values[index]`` for an index that may be a z3 term (a view's block axis, say)."""

from __future__ import annotations

from typing import Any, Sequence

from ..logic import If, Sum, concrete

__all__ = ["select"]


def select(values: Sequence[Any], index: Any) -> Any:
    """``values[index]``; 0 when the index is out of range (a rule that selects states the range
    itself, so a body stays total)."""
    if concrete(index, *values):
        return values[index] if 0 <= index < len(values) else 0
    return Sum(*[If(index == position, value, 0) for position, value in enumerate(values)])
