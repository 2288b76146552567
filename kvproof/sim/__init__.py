"""The simulator: vLLM 0.33.0's start-up KV cache planning (:mod:`kvproof.sim.startup`) and its
requests over time (:mod:`kvproof.sim.requests`) in pure Python.

``plan(geometry) -> Plan`` computes what vLLM computes (groups, pages, bytes per block, blocks,
tensors, concurrency, scheduler block sizes, views); a start-up refusal raises
:class:`PlanRefusal` with vLLM's exact text.  ``simulate_document(doc) -> dict`` is the JSON of
``kvproof simulate --format json`` (its typed form: :mod:`kvproof.sim.result`).  Neither vLLM nor
torch is imported.

The names below are imported when first asked for (PEP 562): the rules import modules of
``startup/`` (the support table, the replay rings), which runs this file, and `kvproof check` then
needs neither the planner nor simulate's result (``result.py`` alone is ~11 ms of its start-up,
-X importtime, 5 runs at load ~3.5).
"""

from __future__ import annotations

from typing import Any

__all__ = ["plan", "Plan", "PlannedGroup", "WorkerPlan", "PlanRefusal", "simulate_document", "simulate_geometry"]


def __getattr__(name: str) -> Any:
    if name in ("plan", "Plan", "PlannedGroup", "WorkerPlan"):
        from .startup import plan as home
    elif name == "PlanRefusal":
        from .startup import refusals as home
    elif name in ("simulate_document", "simulate_geometry"):
        from . import document as home
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
