"""vLLM 0.33.0's start-up KV cache planning, ported: what the engine computes before it serves.

:func:`plan.plan` turns a geometry into a :class:`plan.Plan`: the layer specs (``specs``,
``settings``, ``state_support``, ``replay_ring``), the groups (``grouping``), the platform's block
size (``platform``, ``block_sizes``), the pool and its tensors (``layout``, ``pool``), the memory
check (``memory_check``) and the worker views (``views``). A start-up refusal raises
:class:`refusals.PlanRefusal` with vLLM's exact text. The arithmetic these share with the rules is
:mod:`kvproof.formulas`'s. Nothing here imports :mod:`kvproof.sim.requests`.
"""
