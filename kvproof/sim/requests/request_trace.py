"""One request through vLLM 0.33.0's KV cache manager: the ``simulation[]`` of ``docs/requests.md``.

The request runs alone through the scheduler port (:class:`kvproof.sim.requests.scheduler.Scheduler`, a port of
``Scheduler.schedule`` / ``update_from_output`` of ``v1/core/sched/scheduler.py``; paths relative to the
``vllm/`` package) with synchronous scheduling and the KV cache manager port
(``kvproof.sim.requests.kv_manager``), exactly as ``tests/conformance/oracle_requests.py`` runs it through
vLLM's own ``Scheduler``:

* ``chunk_tokens`` is the scheduler's token budget for the run: ``SchedulerConfig.max_num_scheduled_tokens``
  (``config/scheduler.py:55-60``, read by ``Scheduler.__init__``, ``scheduler.py:139-143``) set to
  ``min(chunk_tokens, max_num_batched_tokens)``; the start-up plan and the KV cache manager keep the
  geometry's ``max_num_batched_tokens``. So the scheduler decides each step's tokens as vLLM does for
  a lone request: the budget, the ``max_model_len`` cap, the Mamba block-aligned split (546-662) and the
  multi-module MTP prefill lookahead (678-697) all apply; without ``chunk_tokens`` the budget is
  ``max_num_batched_tokens``;
* each step is read after ``schedule()`` (its allocation), before ``update_from_output``;
* the model samples one token once the prefill is complete; ``max_tokens`` is ``decode_tokens``, and
  ``decode_tokens = 0`` ends the request after its prefill without sampling (``finish_requests``
  with ``FINISHED_ABORTED``, ``scheduler.py``), which frees its blocks as a finished request's are;
* with ``prefix_hit_probe``, a new request with the same prompt then asks ``get_computed_blocks``.

A lone request whose allocation fails (vLLM would wait forever) stops the run: the result then has
``"simulation_stalled": true`` and no probe, as the conformance oracle reports it. Where vLLM itself
raises while serving, the port raises the same exception class and text (for example
``NotImplementedError("CrossAttentionManager does not support caching")`` on the first lookup of an
encoder-decoder model with prefix caching on, or the chunked-local ``AssertionError`` about different
block sizes); callers report it.
"""

from __future__ import annotations

from typing import Any

from ...models.codec import present
from .block_pool import leading_null_run
from .kv_manager import KVCacheManager
from .managers import (
    ChunkedLocalAttentionManager,
    CircularBufferManager,
    CrossAttentionManager,
    FullAttentionManager,
    SinkFullAttentionManager,
    SlidingWindowManager,
)
from .request import RequestStatus
from .scheduler import DEFAULT_MAX_STEPS, Scheduler, SchedulerConfig, prompt_rejection

__all__ = ["output_token_id", "simulate_request", "single_request_token_ids"]

#: ``Request`` id of the single request and of its probe.
SINGLE_REQUEST_ID = "simulate-0"
PROBE_REQUEST_ID = "simulate-probe"


def single_request_token_ids(prompt_tokens: int) -> range:
    """Prompt token ids of the single request (``docs/requests.md``: request number 0, no shared
    prefix): token ``i`` is ``10_000_000 * 1_000 + i``."""
    return range(10_000_000 * 1_000, 10_000_000 * 1_000 + prompt_tokens)


def output_token_id(r: int, j: int) -> int:
    """Output token ``j`` of request number ``r`` (``docs/requests.md``)."""
    return 1_000_000_000 + 1_000_000 * r + j


def _field(block: Any, key: str, default: Any) -> Any:
    value = block.get(key, default) if isinstance(block, dict) else getattr(block, key, default)
    if value is None or not present(value):
        return default
    return value


#: Managers whose rows hold nulls only as one leading run (skipped or hit-padding blocks): their
#: non-null count is ``len(row) - leading_null_run(row)``, O(log n) per step. Other managers (R-SWA's
#: middle gap, Mamba's sparse states) are counted in full.
_LEADING_NULLS_ONLY = (
    FullAttentionManager, SinkFullAttentionManager, SlidingWindowManager, ChunkedLocalAttentionManager,
    CircularBufferManager, CrossAttentionManager,
)


def _held(manager: KVCacheManager, request_id: str) -> tuple[list[int], list[int]]:
    held, rows = [], []
    for stm in manager.coordinator.single_type_managers:
        blocks = stm.req_to_blocks.get(request_id, [])
        if type(stm) in _LEADING_NULLS_ONLY:
            held.append(len(blocks) - leading_null_run(blocks))
        else:
            held.append(len(blocks) - blocks.count(stm._null_block))
        rows.append(len(blocks))
    return held, rows


def held_by_group(manager: KVCacheManager) -> list[int]:
    """The distinct non-null blocks the requests hold, per KV cache group: a prefix-cache block
    shared by several requests counts once, so the groups' counts and the pool's free blocks add
    up to its usable blocks."""
    return [len({block.block_id for blocks in stm.req_to_blocks.values() for block in blocks
                 if block is not stm._null_block})
            for stm in manager.coordinator.single_type_managers]


def simulate_request(plan: Any, simulate_block: Any, *, kv_cache_manager: KVCacheManager | None = None,
                     decode_runs: bool | None = None) -> dict:
    """Run the single request of ``simulate_block`` alone through the scheduler port and a fresh
    ``KVCacheManager.from_plan(plan)``.

    ``simulate_block``: the geometry's ``simulate`` block (attrs ``Simulate``, a dict or any object with
    ``prompt_tokens``, ``decode_tokens``, ``chunk_tokens``, ``prefix_hit_probe``, ``max_steps``; ABSENT
    or None means the default). Returns ``{"simulation": [...], "prefix_hit_probe": {...} | None}``
    (plus ``"simulation_stalled": True`` when the lone request cannot be scheduled, which vLLM would
    wait on forever), or ``{"simulation": None, "prefix_hit_probe": None}`` without ``prompt_tokens``.
    ``decode_runs``: the scheduler's (``kvproof.sim.requests.scheduler.Scheduler``): its decode steps skip the
    ``allocate_slots`` calls the manager proves to be no-ops; every step is still listed.
    """
    prompt = _field(simulate_block, "prompt_tokens", None)
    if prompt is None:
        return {"simulation": None, "prefix_hit_probe": None}
    decode = _field(simulate_block, "decode_tokens", 0)
    chunk = _field(simulate_block, "chunk_tokens", None)
    want_probe = bool(_field(simulate_block, "prefix_hit_probe", False))
    max_steps = _field(simulate_block, "max_steps", DEFAULT_MAX_STEPS)

    rejection = prompt_rejection(prompt, plan.max_model_len)
    if rejection is not None:  # vLLM's input processor refuses the prompt before any scheduling
        return {"simulation": None, "prefix_hit_probe": None, "simulation_rejected": rejection}
    manager = kv_cache_manager if kv_cache_manager is not None else KVCacheManager.from_plan(plan)
    budget = plan.settings.max_num_batched_tokens
    config = SchedulerConfig.from_plan(
        plan, max_num_scheduled_tokens=None if chunk is None else min(chunk, budget))
    scheduler = Scheduler(config, manager, decode_runs=decode_runs)

    tokens = single_request_token_ids(prompt)
    request = manager.make_request(SINGLE_REQUEST_ID, tokens, max(decode, 1))
    scheduler.add_request(request)
    steps: list[dict] = []
    stalled = truncated = False
    step = 0
    while not request.is_finished():
        if step >= max_steps:  # (a budget below chunk_tokens can take more steps than the loader counted)
            truncated = True
            break
        output = scheduler.schedule()
        num_new = output.num_scheduled_tokens.get(SINGLE_REQUEST_ID, 0)
        if num_new == 0:  # a lone request that does not fit: vLLM would wait (or preempt it) forever
            stalled = True
            break
        computed = request.num_computed_tokens - num_new  # _update_after_schedule counted them
        held, rows = _held(manager, SINGLE_REQUEST_ID)
        steps.append({
            "step": step,
            "phase": "prefill" if computed < request.num_prompt_tokens else "decode",
            "num_computed_tokens": computed,
            "num_new_tokens": num_new,
            "blocks_held": held,
            "row_length": rows,
            "free_blocks": manager.block_pool.get_num_free_blocks(),
        })
        complete = request.num_computed_tokens >= request.num_tokens
        sampled = {SINGLE_REQUEST_ID: [output_token_id(0, request.num_output_tokens)]} if complete and decode else {}
        scheduler.update_from_output(output, sampled)
        step += 1
        if complete and decode == 0:  # finish_requests(FINISHED_ABORTED): prefill only
            scheduler.running.remove(request)
            request.status = RequestStatus.FINISHED_ABORTED
            scheduler._free_request(request)

    probe = None
    if want_probe and not stalled and not truncated:
        probe_request = manager.make_request(PROBE_REQUEST_ID, tokens, max(decode, 1))
        manager.new_step_starts()
        blocks, hit, _ = manager.get_computed_blocks(probe_request)
        probe = {
            "phase": "prefix_hit_probe",
            "prompt_tokens": prompt,
            "hit_tokens": hit,
            "hit_blocks": [sum(1 for b in group if not b.is_null) for group in blocks.blocks],
        }
        steps.append(dict(probe))
    out: dict[str, Any] = {"simulation": steps, "prefix_hit_probe": probe}
    if stalled:
        out["simulation_stalled"] = True
    if truncated:
        out["simulation_truncated"] = True
    return out
