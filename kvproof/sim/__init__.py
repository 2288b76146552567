"""The simulator core: vLLM 0.33.0's start-up KV cache planning in pure Python.

``plan(geometry) -> Plan`` computes what vLLM computes (groups, pages, bytes per block, blocks,
tensors, concurrency, scheduler block sizes, views); a start-up refusal raises :class:`PlanRefusal`
with vLLM's exact text.  ``simulate_document(doc) -> dict`` is the JSON of
``kvproof simulate --format json``.  Neither vLLM nor torch is imported.
"""

from .document import simulate_document, simulate_geometry
from .startup.plan import Plan, PlannedGroup, WorkerPlan, plan
from .startup.refusals import PlanRefusal

__all__ = ["plan", "Plan", "PlannedGroup", "WorkerPlan", "PlanRefusal", "simulate_document", "simulate_geometry"]
