"""vLLM 0.33.0's requests over time, ported: the block pool, the KV cache managers and
coordinators, and the scheduler, run on a start-up :class:`~kvproof.sim.startup.plan.Plan`
(docs/requests.md).

``block_pool``, ``request``, ``managers`` / ``mamba_manager`` (one manager per spec class; which one
serves a spec is ``manager_registry``'s), ``kv_manager`` (coordinators and ``KVCacheManager``),
``scheduler``, ``decode_runs`` (kvproof's quiet-step shortcut) and ``request_trace`` (one lone
request). These read the plan's specs from :mod:`kvproof.sim.startup`; nothing there imports back.
"""
