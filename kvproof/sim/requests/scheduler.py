"""vLLM 0.33.0's scheduler, ported for requests over time (``docs/requests.md``, "Workload").

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text (empty, as vLLM raises it)
must not depend on pytest, which rewrites the asserts of every module of a distribution that
ships a pytest plugin (kvproof does: ``kvproof.pytest_plugin``).

Paths are relative to the ``vllm/`` package (``/work/vllm033/src/vllm``). The port keeps vLLM's names
(``Scheduler``, ``schedule``, ``update_from_output``, ``running``, ``waiting``, ``_preempt_request``,
...) and drives the KV cache manager port (``kvproof.sim.requests.kv_manager.KVCacheManager``) through vLLM's
own interface (``get_computed_blocks``, ``allocate_slots``, ``free``, ``cache_blocks``,
``block_pool.get_num_free_blocks``).

Ported (synchronous scheduling, FCFS policy, a text-only decoder model that samples one token a step):

* ``Scheduler.__init__``'s scheduling constraints (``v1/core/sched/scheduler.py:144-160, 257-316,
  453-489``): ``max_num_running_reqs = max_num_seqs``, ``max_num_active_reqs`` (= ``max_num_seqs``:
  ``max_num_active_seqs`` is unset by default, ``config/scheduler.py:69``),
  ``max_num_scheduled_tokens`` (= ``max_num_batched_tokens``, ``config/vllm.py:2341-2348``), the
  speculative lookahead numbers, ``prefix_replay_tokens`` and the Mamba "align" split inputs.
* ``schedule`` (``scheduler.py:699-1613``, the parts listed here):
  the long-prefill threshold, dropped to 0 when only one request is eligible and floored at
  ``max_num_batched_tokens // num_eligible_reqs`` when adaptive (757-771; defaults: threshold 0 and
  adaptive off, ``config/scheduler.py:79-90``); the RUNNING loop (795-1032): ``num_new_tokens =
  num_tokens_with_spec - num_computed_tokens``, capped by the threshold, the token budget, the
  input budget minus the drafting slots and ``max_model_len - num_computed_tokens - 1``
  (842-863), the Mamba block-aligned split (866-869, ``_mamba_block_aligned_split`` 546-662), the
  multi-module MTP prefill-lookahead reserve (888-893, ``_reserve_prefill_lookahead`` 678-697), a
  zero-token request skipped (895-913), ``allocate_slots(request, num_new_tokens,
  num_lookahead_tokens)`` retried after preempting ``running[-1]`` until it fits or the request
  preempted itself (916-984, FCFS branch), then ``break`` (986-996);
  the WAITING loop, entered only when nothing was preempted (1046-1516): ``max_num_active_reqs``
  (1064-1068), the local prefix-cache hit for a request with no computed tokens (1109-1123, 1224-1233;
  ``get_computed_blocks``, 664-676), the bounded-replay drop of short hits and the replay rewind
  (1241-1258, 1298-1303, ``_mark_prefix_replay`` 3447-3465), ``num_new_tokens = num_tokens -
  num_computed_tokens``, the padding of a new one-token decode to ``1 + num_spec_tokens`` under
  speculative decoding (1310-1330), the long-prefill threshold, the budget cap (1332-1346), the
  Mamba split (1349-1366), the prefill-lookahead reserve (1387-1395), the admission
  ``allocate_slots(..., full_sequence_must_fit=scheduler_reserve_full_isl,
  has_scheduled_reqs=bool(running))`` (1429-1457) whose failure stops the loop (1459-1467), then the
  admission bookkeeping (1537-1568);
  ``_update_after_schedule`` (1845-1877).
* ``_preempt_request`` (1799-1843): blocks freed, ``num_computed_tokens = 0``, status PREEMPTED,
  ``num_preemptions += 1``, prepended to ``waiting`` (recompute-style preemption).
* ``update_from_output`` (2259-2538, the parts listed here): the rejected drafts of a padded decode
  roll ``num_computed_tokens`` back (2333-2350), the sampled token is appended and ``check_stop``
  (``v1/core/sched/utils.py:96-140``: ``num_tokens >= max_model_len`` or ``num_output_tokens >=
  max_tokens``) decides (2385-2397, ``_update_request_with_output`` 2744-2770), ``cache_blocks`` after
  a speculative step (2399-2415), a stopped request is freed (2462-2476, ``_free_request`` 3031-3062)
  and leaves ``running`` (2524-2525, ``remove_all`` ``utils.py:64-93``).
* ``add_request`` (2931-2962) and ``FCFSRequestQueue`` (``request_queue.py:77-131``).
* The input processor's prompt-length check (``v1/engine/input_processor.py:557-599``): a prompt of
  ``max_model_len`` tokens or more never reaches the scheduler.
* The engine loop of ``simulate_workload``: ``add_request`` at ``arrival_step``, ``schedule``, a
  model step sampling one token per request whose prefill is complete, ``update_from_output``
  (``v1/engine/core.py`` ``EngineCore.step``, synchronous).

Verified against vLLM 0.33.0's own ``Scheduler`` (``tests/conformance/oracle_requests.py``): the
workload goldens of ``tests/conformance/requests/`` (``tests/sim/test_scheduler.py``) and 150
seeded random workloads over the example geometries (full, SWA hybrid, Mamba align / none, packed
MLA + KDA, MLA; MTP, EAGLE, EAGLE3, DFlash, ngram, draft-model drafting; pools small enough to
preempt), step by step.

Left out, with the lines that implement them in vLLM (none runs in the default synchronous,
text-only, FCFS, connector-free configuration this port models):

* async scheduling and output placeholders (``num_output_placeholders``, stale output; 803-817,
  1825-1839, 2297-2320, ``v1/core/sched/async_scheduler.py``); pipeline-parallel decode cadence
  (819-823); DP prefill balancing and the local prefill cadence (``throttle_prefills``,
  ``prefill_schedule_interval``; 745-793, 825-829, 1305-1308, 1571-1582); pause states (718-719, 1046);
* the priority policy (``SchedulingPolicy.PRIORITY``; 929-977, 986-995, ``request_queue.py:134-207``);
* KV connectors and EC connectors (external hits, async loads, deferred frees, invalid blocks;
  831-840, 924-928, 934-935, 1126-1222, 1422-1427, 1469-1505, 1517-1536, 1786-1789, 3084-3146,
  3349-3783) and ``aux_output_connector`` (1113-1117, 1204-1212);
* structured output (grammar waits, bitmasks; 2228-2257, 2415-2426), multimodal / encoder inputs
  and the encoder cache (871-886, 1022-1031, 1368-1385, 1408-1418, 2004-2226), LoRA (1034-1044,
  1086-1097), pooling and diffusion models (``num_sampled_tokens_per_step = 0``, 157-166,
  2403-2413), streaming / resumable sessions (``_update_request_as_session``,
  ``WAITING_FOR_STREAMING_REQ``; 1879-1920, 2717-2742), prompt logprobs;
* speculative-decoding acceptance: no drafter runs here, so ``update_draft_token_ids``
  (2862-2918) never gives a request draft tokens and a running decode schedules one token (plus
  ``num_lookahead_tokens`` slots in ``allocate_slots``, as the contract's single request does). The
  scheduler's own padding of a new one-token decode (1310-1330) is kept: its ``-1`` placeholder
  drafts are all rejected (``generated_token_ids`` holds the one sampled token), which rolls
  ``num_computed_tokens`` back by ``num_spec_tokens`` (2333-2350); ``dynamic_sd_lookup``
  (``num_speculative_tokens_per_batch_size``, 280-286) is not modelled;
* ``can_skip_drafts`` / ``_drafts_unused`` (only a scheduler-output flag; 502-544), KV cache events,
  stats and metrics (``make_stats``, ``record_prefix_cache_stats``), the ``SchedulerOutput`` /
  ``CachedRequestData`` payloads for workers (1584-1770) beyond the scheduled token counts;
* ``enable_chunked_prefill=False`` (1337-1344) is kept as an option; the default is on
  (``config/scheduler.py:134``); ``watermark`` is the manager's (default 0.0).

Cost: per step, O(running + admitted) Python calls plus the manager's per-block work; nothing loops
per token except the one output token a request appends per step. kvproof's decode runs
(``kvproof.sim.requests.decode_runs``, ``docs/requests.md`` "Decode runs") advance the steps where every
running request decodes at O(1) per step plus one real ``allocate_slots`` per event, and
``schedule()`` skips the ``allocate_slots`` calls the manager proves to be no-ops
(``decode_quiet_until``); :func:`step_by_step` turns both off.
"""

from __future__ import annotations

import bisect
import gc
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...models.codec import present
from ..startup.settings import DEFAULT_MAX_NUM_SEQS
from . import request as request_module
from .decode_runs import DecodeRuns
from .kv_manager import KVCacheManager, scheduler_num_lookahead_tokens
from .mamba_manager import get_mamba_prefill_checkpoint_position, is_mamba_prefill_checkpoint_valid
from .request import RequestStatus
from .scheduler_output import SchedulerOutput, WaitingPass
from .token_runs import TokenRuns

__all__ = [
    "DEFAULT_MAX_NUM_SEQS",
    "DEFAULT_MAX_STEPS",
    "FCFSRequestQueue",
    "RequestStatus",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerOutput",
    "output_token_id",
    "simulate_workload",
    "step_by_step",
    "workload_token_ids",
]

#: ``simulate.max_steps`` default (``docs/requests.md``).
DEFAULT_MAX_STEPS = 100_000

#: The default of ``decode_runs`` (``Scheduler``, ``simulate_workload``, ``simulate_request``); see
#: :func:`step_by_step`.
_decode_runs_default = True


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (reference counting still frees everything).
    A workload creates no garbage cycles worth collecting (blocks, requests and step records stay
    referenced until the end or are freed by reference counting; the pool and its free queue form the
    one cycle, collected afterwards), while the collector would traverse every block and every step
    record over and over: 10-15% of a workload's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def step_by_step() -> Iterator[None]:
    """Within the block every scheduler steps one step at a time and makes every ``allocate_slots``
    call, as vLLM does (``decode_runs`` off wherever it is not given): the reference the decode runs
    are tested against (``tests/sim/test_decode_runs.py``, the requests conformance suite)."""
    global _decode_runs_default
    saved, _decode_runs_default = _decode_runs_default, False
    try:
        yield
    finally:
        _decode_runs_default = saved


# Request status: the request port's ``RequestStatus`` (``v1/request.py:370-398``).
_WAITING = RequestStatus.WAITING
_RUNNING = RequestStatus.RUNNING
_PREEMPTED = RequestStatus.PREEMPTED
_LENGTH_CAPPED = RequestStatus.FINISHED_LENGTH_CAPPED


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulerConfig:
    """What ``Scheduler.__init__`` reads from ``VllmConfig`` (vLLM attribute names where they exist).

    ``block_size`` is the scheduler block size (``Scheduler(block_size=...)``,
    ``v1/engine/core.py:354-357``); ``cache_block_size`` is ``cache_config.block_size`` as the engine
    writes it back (``core.py:335-350``), which the Mamba split reads (``scheduler.py:570``).
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    block_size: int = 16
    hash_block_size: int = 16
    cache_block_size: int = 16
    long_prefill_token_threshold: int = 0  # config/scheduler.py:79
    long_prefill_token_threshold_adaptive: bool = False  # config/scheduler.py:86
    scheduler_reserve_full_isl: bool = True  # config/scheduler.py:190
    enable_chunked_prefill: bool = True  # config/scheduler.py:134
    max_num_active_seqs: int | None = None  # config/scheduler.py:69
    max_num_scheduled_tokens: int | None = None  # config/scheduler.py:55; None = max_num_batched_tokens
    # speculative decoding (config/vllm.py:612-692, config/speculative.py:2058-2098)
    num_spec_tokens: int = 0
    num_lookahead_tokens: int = 0
    num_prefill_lookahead: int = 0
    num_hash_lookahead_tokens: int = 0
    use_eagle_block_drop: bool = False
    draft_slots: int = 0  # max_num_new_slots_for_drafting
    # Mamba "align" split (scheduler.py:457-489)
    need_mamba_block_aligned_split: bool = False
    mamba_prefill_checkpoint_alignment: int | None = None
    mamba_has_prefill_checkpoint_blocks: bool = False
    # SWA bounded replay (scheduler.py:248-262)
    prefix_replay_tokens: int = 0

    @classmethod
    def from_plan(cls, plan: Any, *, long_prefill_token_threshold: int = 0, max_num_seqs: int | None = None,
                  **overrides: Any) -> SchedulerConfig:
        """The scheduler settings of a :class:`kvproof.sim.startup.plan.Plan`.

        ``max_num_seqs``: the argument, else ``plan.settings.max_num_seqs`` when the settings carry
        it, else :data:`DEFAULT_MAX_NUM_SEQS` capped at ``max_num_batched_tokens``.
        """
        s = plan.settings
        mnbt = s.max_num_batched_tokens
        if max_num_seqs is None:
            max_num_seqs = s.max_num_seqs
        if max_num_seqs is None:
            max_num_seqs = min(DEFAULT_MAX_NUM_SEQS, mnbt)
        method = s.speculative_method
        num_spec = s.num_speculative_tokens if method is not None else 0
        # VllmConfig.num_lookahead_tokens (config/vllm.py:625-649), the manager port's reading of it
        num_lookahead = scheduler_num_lookahead_tokens(s)
        # SpeculativeConfig.max_num_new_slots_for_drafting (config/speculative.py:2058-2098); the
        # parallel-drafting variants are not described by a geometry.
        draft_slots = 1 if method == "draft_model" else 0
        mamba_specs = [g.scheduler_spec for g in plan.groups if type(g.scheduler_spec).__name__ == "MambaSpec"]
        has_mamba = bool(mamba_specs)
        replay = max((getattr(g.spec, "prefix_replay_tokens", 0) for g in plan.groups), default=0)
        fields = {
            "max_num_seqs": max_num_seqs,
            "max_num_batched_tokens": mnbt,
            "enable_chunked_prefill": s.enable_chunked_prefill,
            "max_model_len": plan.max_model_len,
            "block_size": plan.scheduler_block_size,
            "hash_block_size": plan.hash_block_size,
            "cache_block_size": plan.engine_cache_config_block_size,
            "long_prefill_token_threshold": long_prefill_token_threshold,
            "num_spec_tokens": num_spec,
            "num_lookahead_tokens": num_lookahead,
            "num_prefill_lookahead": s.num_prefill_lookahead_tokens,
            "num_hash_lookahead_tokens": s.num_hash_lookahead_tokens,
            # Scheduler.__init__ (scheduler.py:287-301): lookahead hashes make the drop unnecessary
            "use_eagle_block_drop": s.use_eagle_block_drop and not s.num_hash_lookahead_tokens,
            "draft_slots": draft_slots,
            "need_mamba_block_aligned_split": has_mamba and s.mamba_cache_mode == "align",
            "mamba_prefill_checkpoint_alignment": (
                getattr(mamba_specs[0], "prefill_checkpoint_alignment", None) if mamba_specs else None
            ),
            "mamba_has_prefill_checkpoint_blocks": has_mamba and all(
                getattr(spec, "num_prefill_checkpoint_blocks", 0) > 0 for spec in mamba_specs
            ),
            "prefix_replay_tokens": replay,
        }
        fields.update(overrides)
        return cls(**fields)


# ---------------------------------------------------------------------------------------------
# Queue and output
# ---------------------------------------------------------------------------------------------


class FCFSRequestQueue(deque):
    """``FCFSRequestQueue`` (``v1/core/sched/request_queue.py:77-131``)."""

    def add_request(self, request: Any) -> None:
        self.append(request)

    def pop_request(self) -> Any:
        return self.popleft()

    def peek_request(self) -> Any:
        if not self:
            raise IndexError("peek from an empty queue")
        return self[0]

    def prepend_request(self, request: Any) -> None:
        self.appendleft(request)

    def prepend_requests(self, requests: Iterable[Any]) -> None:
        self.extendleft(requests)

    def remove_request(self, request: Any) -> None:
        self.remove(request)

    def remove_requests(self, requests: Iterable[Any]) -> None:
        to_remove = set(requests)
        kept = [r for r in self if r not in to_remove]
        self.clear()
        self.extend(kept)


# ---------------------------------------------------------------------------------------------
# The scheduler
# ---------------------------------------------------------------------------------------------


class Scheduler:
    """``Scheduler`` (``v1/core/sched/scheduler.py:86``): synchronous, FCFS, text-only."""

    def __init__(self, config: SchedulerConfig, kv_cache_manager: Any, *, decode_runs: bool | None = None) -> None:
        """``decode_runs`` (None: on, except inside :func:`step_by_step`): skip the ``allocate_slots``
        calls of decode steps the manager proves to be no-ops (``decode_quiet_until``); off, every
        call is made, as vLLM makes it."""
        if decode_runs is None:
            decode_runs = _decode_runs_default
        self.scheduler_config = config
        self.kv_cache_manager = kv_cache_manager
        self.block_pool = kv_cache_manager.block_pool
        # scheduler.py:144-160
        self.max_num_running_reqs = config.max_num_seqs
        self.max_num_active_reqs = (
            config.max_num_active_seqs if config.max_num_active_seqs is not None else config.max_num_seqs
        )
        self.max_num_scheduled_tokens = (
            config.max_num_scheduled_tokens
            if config.max_num_scheduled_tokens is not None
            else config.max_num_batched_tokens
        )
        self.adaptive_long_prefill_threshold = config.long_prefill_token_threshold_adaptive
        self.max_model_len = config.max_model_len
        self.num_sampled_tokens_per_step = 1  # a generate model (scheduler.py:157-166)
        self.block_size = config.block_size
        self.hash_block_size = config.hash_block_size
        self.requests: dict[str, Any] = {}
        self.waiting = FCFSRequestQueue()
        self.kv_holding_waiting = FCFSRequestQueue()  # stays empty without connectors / streaming
        self.running: list[Any] = []
        self.finished_req_ids: set[str] = set()
        self.num_spec_tokens = config.num_spec_tokens
        self.num_lookahead_tokens = config.num_lookahead_tokens
        self.num_prefill_lookahead = config.num_prefill_lookahead
        self.num_hash_lookahead_tokens = config.num_hash_lookahead_tokens
        self.use_eagle_block_drop = config.use_eagle_block_drop
        self.prefix_replay_tokens = config.prefix_replay_tokens
        self.scheduler_reserve_full_isl = config.scheduler_reserve_full_isl
        self.current_step = 0
        # Mamba "align" split (scheduler.py:457-489)
        self.need_mamba_block_aligned_split = config.need_mamba_block_aligned_split
        self.mamba_prefill_checkpoint_alignment = config.mamba_prefill_checkpoint_alignment
        self.mamba_has_prefill_checkpoint_blocks = config.mamba_has_prefill_checkpoint_blocks
        coordinator = getattr(kv_cache_manager, "coordinator", None)
        self.mamba_partial_cache_hit = (
            self.need_mamba_block_aligned_split
            and self.hash_block_size < self.block_size  # the scheduler block size (scheduler.py:451-455)
            and bool(getattr(coordinator, "enable_partial_hash_hits", False))
        )
        self.mamba_shared_prefix_checkpoint = self.mamba_partial_cache_hit and bool(
            getattr(kv_cache_manager, "mamba_shared_prefix_checkpoint", False)
        )
        # Optional manager hooks called by vLLM every step; absent ones are no-ops here.
        self._new_step_starts = getattr(kv_cache_manager, "new_step_starts", None)
        self._take_copies = getattr(kv_cache_manager, "take_kv_cache_block_copies", None)
        self._take_new_block_ids = getattr(kv_cache_manager, "take_new_block_ids", None)
        self._take_offloads = getattr(kv_cache_manager, "take_boundary_state_offloads", None)
        self._empty_blocks = getattr(kv_cache_manager, "empty_kv_cache_blocks", None)
        #: kvproof (decode runs, ``kvproof.sim.requests.decode_runs``): request id -> the computed count below
        #: which a one-token decode step of the request leaves every group as it is
        #: (``KVCacheManager.decode_quiet_steps``); None when that is not modelled here.
        self.decode_quiet_until: dict[str, int] | None = {} if decode_runs and DecodeRuns.applies(self) else None

    # -- queues --------------------------------------------------------------------------------

    def add_request(self, request: Any) -> None:
        """``add_request`` (``scheduler.py:2931-2962``), a new, non-resumable request."""
        self.waiting.add_request(request)  # _enqueue_waiting_request (2709-2715): holds no KV
        self.requests[request.request_id] = request

    def get_request_counts(self) -> tuple[int, int]:
        """``get_request_counts`` (``scheduler.py:2920-2922``)."""
        return len(self.running), len(self.waiting) + len(self.kv_holding_waiting)

    def has_requests(self) -> bool:
        return bool(self.running or self.waiting or self.kv_holding_waiting)

    # -- helpers -------------------------------------------------------------------------------

    def _reserve_prefill_lookahead(self, request: Any, num_computed_tokens: int, num_new_tokens: int) -> int:
        """``_reserve_prefill_lookahead`` (``scheduler.py:678-697``)."""
        remaining = request.num_tokens - num_computed_tokens - num_new_tokens
        if 0 < remaining < self.num_prefill_lookahead:
            num_new_tokens -= self.num_prefill_lookahead - remaining
        return max(num_new_tokens, 0)

    def _mamba_block_aligned_split(self, request: Any, num_new_tokens: int,
                                   num_new_local_computed_tokens: int = 0) -> int:
        """``_mamba_block_aligned_split`` (``scheduler.py:546-662``), without external tokens."""
        start = request.num_computed_tokens + num_new_local_computed_tokens
        num_prompt_tokens = request.num_prompt_tokens
        num_tokens = request.num_tokens
        prefill_end = max(num_prompt_tokens, num_tokens - 1)
        if start >= prefill_end:
            return num_new_tokens
        cfg = self.scheduler_config
        block_size = cfg.cache_block_size
        ckpt_block_size = self.hash_block_size if self.mamba_partial_cache_hit else self.block_size
        drop = self.use_eagle_block_drop
        lookahead = self.num_hash_lookahead_tokens
        last_cache_position = get_mamba_prefill_checkpoint_position(num_tokens, block_size, drop, lookahead)
        end = start + num_new_tokens
        checkpoint_position = get_mamba_prefill_checkpoint_position(prefill_end, ckpt_block_size, drop, lookahead)
        use_internal_checkpoint = (
            self.mamba_has_prefill_checkpoint_blocks
            and end >= prefill_end
            and is_mamba_prefill_checkpoint_valid(
                start, end, checkpoint_position, self.hash_block_size, block_size,
                self.mamba_prefill_checkpoint_alignment,
            )
        )
        if use_internal_checkpoint:
            last_cache_position = 0
        if end < prefill_end:
            max_prefill_tokens = self.max_num_scheduled_tokens
            threshold = cfg.long_prefill_token_threshold
            if threshold > 0:
                max_prefill_tokens = min(max_prefill_tokens, threshold)
            aligned_end = end // block_size * block_size
            if aligned_end > start or block_size <= max_prefill_tokens:
                end = aligned_end
        next_block_boundary = (start // block_size + 1) * block_size
        tail_boundary = (
            get_mamba_prefill_checkpoint_position(num_prompt_tokens, self.hash_block_size, drop, lookahead)
            if self.mamba_partial_cache_hit and not use_internal_checkpoint
            else 0
        )
        junction = getattr(request, "shared_prefix_boundary", 0)
        block_floored = start + (junction - start) // block_size * block_size
        junction_stop = (
            junction if self.mamba_shared_prefix_checkpoint and junction <= num_prompt_tokens else block_floored
        )
        stops = (
            next_block_boundary if start % block_size != 0 and not use_internal_checkpoint else 0,
            last_cache_position,
            tail_boundary if last_cache_position < tail_boundary < num_prompt_tokens else 0,
            junction_stop if start < junction < end else 0,
        )
        end = min((s for s in stops if start < s < end), default=end)
        return max(end - start, 0)

    def _note_decode(self, request: Any, num_computed: int, num_new_tokens: int) -> None:
        """kvproof: after a request's real ``allocate_slots``, how far its next decode steps are
        no-ops of it (a prefill chunk or a request with draft tokens is not a decode: nothing noted)."""
        request_id = request.request_id
        if num_new_tokens == 1 and num_computed == request.num_tokens - 1 and request.num_output_tokens \
                and not request.spec_token_ids:
            self.decode_quiet_until[request_id] = num_computed + 1 + self.kv_cache_manager.decode_quiet_steps(
                request, num_computed + 1, self.num_lookahead_tokens, self.num_spec_tokens > 0)
        else:
            self.decode_quiet_until.pop(request_id, None)

    def _preempt_request(self, request: Any) -> None:
        """``_preempt_request`` (``scheduler.py:1799-1843``), synchronous: no in-flight output."""
        assert request.status == _RUNNING, "Only running requests can be preempted"
        if self.decode_quiet_until is not None:
            self.decode_quiet_until.pop(request.request_id, None)
        self.kv_cache_manager.free(request)  # _free_request_blocks (3084-3093), nothing deferred
        request.status = _PREEMPTED
        request.num_computed_tokens = 0
        if request.spec_token_ids:
            request.spec_token_ids = []
        request.num_preemptions += 1
        self.waiting.prepend_request(request)

    def _free_request(self, request: Any) -> None:
        """``_free_request`` / ``_free_blocks`` (``scheduler.py:3031-3068``), no connectors."""
        self.finished_req_ids.add(request.request_id)
        if self.decode_quiet_until is not None:
            self.decode_quiet_until.pop(request.request_id, None)
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    # -- schedule ------------------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        """``Scheduler.schedule`` (``scheduler.py:699-1784``); see the module docstring."""
        self.current_step += 1
        manager = self.kv_cache_manager
        allocate_slots = manager.allocate_slots
        quiet_until = self.decode_quiet_until
        max_model_len = self.max_model_len
        num_lookahead_tokens = self.num_lookahead_tokens
        num_prefill_lookahead = self.num_prefill_lookahead
        mamba_split = self.need_mamba_block_aligned_split

        scheduled_new_reqs: list[Any] = []
        scheduled_resumed_reqs: list[Any] = []
        scheduled_running_reqs: list[Any] = []
        preempted_reqs: list[Any] = []
        num_scheduled_tokens: dict[str, int] = {}
        scheduled_spec_decode_tokens: dict[str, list[int]] = {}
        admitted: dict[str, int] = {}
        token_budget = self.max_num_scheduled_tokens
        draft_slots = self.scheduler_config.draft_slots
        input_budget = self.scheduler_config.max_num_batched_tokens
        prefill_scheduled = False

        if self._new_step_starts is not None:
            self._new_step_starts()

        long_prefill_token_threshold = self._long_prefill_token_threshold()

        # First, schedule the RUNNING requests (scheduler.py:795-1032).
        running = self.running
        req_index = 0
        while req_index < len(running) and token_budget > 0:
            request = running[req_index]
            if input_budget <= draft_slots:
                break
            num_computed = request.num_computed_tokens
            spec_token_ids = request.spec_token_ids
            num_new_tokens = request.num_tokens + len(spec_token_ids) - num_computed
            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            num_new_tokens = min(num_new_tokens, token_budget, input_budget - draft_slots)
            # Make sure the input position does not exceed the max model len (scheduler.py:856-863).
            num_new_tokens = min(num_new_tokens, max_model_len - num_computed - 1)
            if mamba_split:
                num_new_tokens = self._mamba_block_aligned_split(request, num_new_tokens)
            if num_prefill_lookahead:
                num_new_tokens = self._reserve_prefill_lookahead(request, num_computed, num_new_tokens)
            if num_new_tokens <= 0:
                # vLLM: ``if num_new_tokens == 0`` (895-913); the max_model_len cap cannot go negative
                # for a request check_stop has not finished.
                req_index += 1
                continue

            if quiet_until is not None and num_new_tokens == 1 and quiet_until.get(request.request_id, 0) > num_computed:
                pass  # kvproof: a decode step allocate_slots leaves as it is (decode runs, see _note_decode)
            else:
                # allocate_slots, preempting the lowest-priority (last) running request (916-984).
                while True:
                    new_blocks = allocate_slots(request, num_new_tokens, num_lookahead_tokens=num_lookahead_tokens)
                    if new_blocks is not None:
                        break
                    preempted_req = running.pop()
                    self._preempt_request(preempted_req)
                    preempted_reqs.append(preempted_req)
                    if preempted_req is request:
                        break
                if new_blocks is None:
                    break  # 986-996 (FCFS)
                if quiet_until is not None:
                    self._note_decode(request, num_computed, num_new_tokens)

            scheduled_running_reqs.append(request)
            prefill_scheduled |= request.is_prefill_chunk
            request_id = request.request_id
            num_scheduled_tokens[request_id] = num_new_tokens
            token_budget -= num_new_tokens
            input_budget -= num_new_tokens + draft_slots
            req_index += 1
            if spec_token_ids:  # 1013-1027; never set without a drafter (module docstring)
                num_scheduled_spec_tokens = num_new_tokens + num_computed - request.num_tokens
                if num_scheduled_spec_tokens > 0:
                    scheduled_spec_decode_tokens[request_id] = spec_token_ids[:num_scheduled_spec_tokens]
                request.spec_token_ids = []

        # Next, schedule the WAITING requests (scheduler.py:1046-1516).
        if not preempted_reqs:
            waiting_pass = WaitingPass(
                token_budget=token_budget, input_budget=input_budget,
                long_prefill_token_threshold=long_prefill_token_threshold,
                prefill_scheduled=prefill_scheduled, running_scheduled=bool(scheduled_running_reqs),
                num_scheduled_tokens=num_scheduled_tokens, scheduled_new_reqs=scheduled_new_reqs,
                scheduled_resumed_reqs=scheduled_resumed_reqs,
                scheduled_spec_decode_tokens=scheduled_spec_decode_tokens, admitted=admitted,
            )
            self._schedule_waiting(waiting_pass)
            token_budget, input_budget = waiting_pass.token_budget, waiting_pass.input_budget

        total_num_scheduled_tokens = sum(num_scheduled_tokens.values())
        assert total_num_scheduled_tokens <= self.max_num_scheduled_tokens
        assert token_budget >= 0 and input_budget >= 0
        assert len(running) <= self.max_num_running_reqs

        self._drain_step_hooks()

        output = SchedulerOutput(
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=total_num_scheduled_tokens,
            scheduled_new_reqs=scheduled_new_reqs,
            scheduled_resumed_reqs=scheduled_resumed_reqs,
            scheduled_running_reqs=scheduled_running_reqs,
            scheduled_spec_decode_tokens=scheduled_spec_decode_tokens,
            preempted_reqs=preempted_reqs,
            finished_req_ids=self.finished_req_ids,
            admitted=admitted,
        )
        self._update_after_schedule(output)
        return output

    def _long_prefill_token_threshold(self) -> int:
        """The step's long-prefill threshold (``scheduler.py:757-771``)."""
        num_running, num_waiting = self.get_request_counts()
        num_eligible_reqs = num_running + num_waiting
        long_prefill_token_threshold = (
            self.scheduler_config.long_prefill_token_threshold if num_eligible_reqs > 1 else 0
        )
        if long_prefill_token_threshold > 0 and self.adaptive_long_prefill_threshold:
            long_prefill_token_threshold = max(
                long_prefill_token_threshold, self.scheduler_config.max_num_batched_tokens // num_eligible_reqs
            )
        return long_prefill_token_threshold

    def _schedule_waiting(self, step: WaitingPass) -> None:
        """The WAITING loop of ``schedule`` (``scheduler.py:1046-1516``), entered when nothing was
        preempted: admits from ``waiting`` into ``running`` and writes ``step``."""
        manager = self.kv_cache_manager
        allocate_slots = manager.allocate_slots
        max_model_len = self.max_model_len
        num_lookahead_tokens = self.num_lookahead_tokens
        num_prefill_lookahead = self.num_prefill_lookahead
        mamba_split = self.need_mamba_block_aligned_split
        draft_slots = self.scheduler_config.draft_slots
        running = self.running
        token_budget = step.token_budget
        input_budget = step.input_budget
        long_prefill_token_threshold = step.long_prefill_token_threshold
        prefill_scheduled = step.prefill_scheduled
        num_scheduled_tokens = step.num_scheduled_tokens
        scheduled_new_reqs = step.scheduled_new_reqs
        scheduled_resumed_reqs = step.scheduled_resumed_reqs
        scheduled_spec_decode_tokens = step.scheduled_spec_decode_tokens
        admitted = step.admitted
        waiting = self.waiting
        skipped_waiting: deque = deque()
        cfg = self.scheduler_config
        while token_budget > 0:
            if not waiting or input_budget <= draft_slots:
                break
            if len(running) >= self.max_num_active_reqs:
                break
            request = waiting[0]
            request_id = request.request_id
            step.looked_at += 1

            did_prefix_cache_lookup = False
            num_new_local_computed_tokens = 0
            if request.num_computed_tokens == 0:
                did_prefix_cache_lookup = True
                new_computed_blocks, num_new_local_computed_tokens, boundary = (
                    manager.get_computed_blocks(request)
                )
                request.shared_prefix_boundary = boundary
                num_computed_tokens = num_new_local_computed_tokens
                # Bounded replay drops a hit no longer than the window (1241-1258).
                if 0 < num_computed_tokens <= self.prefix_replay_tokens:
                    new_computed_blocks = manager.empty_kv_cache_blocks
                    num_new_local_computed_tokens = 0
                    num_computed_tokens = 0
            else:  # only after a KV transfer or a streaming update (1269-1278): not modelled
                new_computed_blocks = self._empty_blocks
                num_computed_tokens = request.num_computed_tokens

            pad_spec_decode = False
            request_token_budget = min(token_budget, input_budget - draft_slots)
            num_replay_tokens = 0
            if did_prefix_cache_lookup and self.prefix_replay_tokens:
                # _mark_prefix_replay (3447-3465), no KV load
                num_replay_tokens = min(self.prefix_replay_tokens, num_computed_tokens)
                request.replay_start = num_computed_tokens - num_replay_tokens
                num_computed_tokens -= num_replay_tokens
            num_new_tokens = request.num_tokens - num_computed_tokens

            # Pad a new decode to the uniform spec-decode size (1310-1330).
            if (
                self.num_spec_tokens > 0
                and num_new_tokens == 1
                and not prefill_scheduled
                and (step.running_scheduled or num_computed_tokens > 0)
            ):
                padded_num_tokens = 1 + self.num_spec_tokens
                if num_computed_tokens + padded_num_tokens + 1 <= max_model_len:
                    if padded_num_tokens > request_token_budget:
                        break  # prefer to not schedule than schedule un-padded
                    num_new_tokens = padded_num_tokens
                    pad_spec_decode = True

            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            if not cfg.enable_chunked_prefill and num_new_tokens > request_token_budget:
                break  # 1337-1344
            num_new_tokens = min(num_new_tokens, request_token_budget)
            assert num_new_tokens > 0

            if mamba_split:  # 1349-1366
                num_new_tokens = self._mamba_block_aligned_split(
                    request, num_new_tokens, num_new_local_computed_tokens
                )
                if num_new_tokens == 0:
                    break
                if pad_spec_decode and num_new_tokens != 1 + self.num_spec_tokens:
                    num_new_tokens = 1
                    pad_spec_decode = False

            if num_prefill_lookahead:  # 1387-1395
                num_new_tokens = self._reserve_prefill_lookahead(request, num_computed_tokens, num_new_tokens)
            if num_new_tokens == 0:
                # skip_request (1054-1059, 1391-1395): requeued ahead of older skipped ones
                skipped_waiting.appendleft(waiting.popleft())
                continue

            num_tokens_past_hit = max(num_new_tokens - num_replay_tokens, 0)
            new_blocks = allocate_slots(
                request,
                num_tokens_past_hit,
                num_new_computed_tokens=num_new_local_computed_tokens,
                new_computed_blocks=new_computed_blocks,
                num_lookahead_tokens=num_lookahead_tokens,
                full_sequence_must_fit=self.scheduler_reserve_full_isl,
                has_scheduled_reqs=bool(running),
            )
            if new_blocks is None:
                break  # 1459-1467

            # Admission (1537-1568).
            waiting.popleft()
            running.append(request)
            if request.status == _WAITING:
                scheduled_new_reqs.append(request)
            elif request.status == _PREEMPTED:
                scheduled_resumed_reqs.append(request)
            else:  # pragma: no cover - vLLM raises the same
                raise RuntimeError(f"Invalid request status: {request.status}")
            num_scheduled_tokens[request_id] = num_new_tokens
            admitted[request_id] = num_computed_tokens
            token_budget -= num_new_tokens
            input_budget -= num_new_tokens + draft_slots
            request.status = _RUNNING
            request.num_computed_tokens = num_computed_tokens
            if pad_spec_decode:
                scheduled_spec_decode_tokens[request_id] = [-1] * self.num_spec_tokens

        if skipped_waiting:
            waiting.prepend_requests(skipped_waiting)

        step.token_budget = token_budget
        step.input_budget = input_budget

    def _drain_step_hooks(self) -> None:
        """The per-step manager drains vLLM performs while building the output (1700-1727, 1791-1797)."""
        if self._take_offloads is not None:
            self._take_offloads()
        if self._take_copies is not None:
            copies, retained = self._take_copies()
            if copies and retained:
                # _free_cow_retained_blocks (3095-3104), no deferred frees
                self.block_pool.free_blocks(retained)
        if self._take_new_block_ids is not None:
            self._take_new_block_ids()

    def _update_after_schedule(self, scheduler_output: SchedulerOutput) -> None:
        """``_update_after_schedule`` (``scheduler.py:1845-1877``)."""
        requests = self.requests
        for req_id, n in scheduler_output.num_scheduled_tokens.items():
            request = requests[req_id]
            request.num_computed_tokens += n
            request.num_in_flight_tokens += n
            request.is_prefill_chunk = request.num_computed_tokens < request.num_tokens
        self.finished_req_ids = set()

    # -- update_from_output --------------------------------------------------------------------

    def update_from_output(self, scheduler_output: SchedulerOutput,
                           sampled_token_ids: dict[str, list[int]]) -> list[Any]:
        """``update_from_output`` (``scheduler.py:2259-2538``); returns the requests that finished,
        in scheduling order. ``sampled_token_ids`` maps a request id to the tokens the model runner
        sampled for it (empty or missing for a partial prefill)."""
        requests = self.requests
        max_model_len = self.max_model_len
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        cache_after_spec = self.num_spec_tokens > 0
        stopped_running: list[Any] = []
        for req_id, num_tokens_scheduled in scheduler_output.num_scheduled_tokens.items():
            request = requests.get(req_id)
            if request is None:
                continue
            request.num_in_flight_tokens -= num_tokens_scheduled
            generated = sampled_token_ids.get(req_id)
            if not generated:
                continue
            scheduled_spec = spec_tokens.get(req_id) if spec_tokens else None
            if scheduled_spec:  # 2333-2350
                num_accepted = max(len(generated) - 1, 0)
                num_rejected = len(scheduled_spec) - num_accepted
                if request.num_computed_tokens > 0:
                    request.num_computed_tokens -= num_rejected
            status_before_stop = request.status
            # _update_request_with_output (2744-2770) with check_stop (utils.py:96-140)
            stopped = False
            for num_new, token_id in enumerate(generated, 1):
                request.append_output_token_ids(token_id)
                if request.num_tokens >= max_model_len or request.num_output_tokens >= request.max_tokens:
                    request.status = _LENGTH_CAPPED
                    stopped = True
                    request.num_computed_tokens -= len(generated) - num_new
                    break
            if cache_after_spec and status_before_stop == _RUNNING:  # 2399-2415
                manager_cache = self.kv_cache_manager.cache_blocks
                manager_cache(request, request.num_computed_tokens - request.num_in_flight_tokens)
            if stopped:
                self._free_request(request)
                stopped_running.append(request)
        if stopped_running:  # 2524-2525 (remove_all)
            if len(stopped_running) == 1:
                self.running.remove(stopped_running[0])
            else:
                gone = set(map(id, stopped_running))
                self.running = [r for r in self.running if id(r) not in gone]
        return stopped_running


# ---------------------------------------------------------------------------------------------
# Workload (docs/requests.md)
# ---------------------------------------------------------------------------------------------


def _field(obj: Any, name: str, default: Any) -> Any:
    """A request field of an attrs object (ABSENT = default), a plain dict or a simple object."""
    value = obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)
    return value if present(value) else default


def workload_token_ids(requests: list[Any]) -> list[TokenRuns]:
    """The prompt token ids of each request of ``simulate.requests`` (``docs/requests.md``), as runs."""
    prefix_index: dict[str, int] = {}
    out = []
    for r, req in enumerate(requests):
        prompt = _field(req, "prompt_tokens", 0)
        name = _field(req, "shared_prefix", None)
        shared = 0
        ids = TokenRuns()
        if name is not None:
            k = prefix_index.setdefault(name, len(prefix_index))
            shared = min(_field(req, "shared_prefix_tokens", 0), prompt)
            base = 10_000_000 * (k + 1)
            ids.extend(range(base, base + shared))
        base = 10_000_000 * (1_000 + r)
        ids.extend(range(base + shared, base + prompt))
        out.append(ids)
    return out


def output_token_id(r: int, j: int) -> int:
    """Output token ``j`` (0-based) of request number ``r`` (``docs/requests.md``)."""
    return 1_000_000_000 + 1_000_000 * r + j


def _default_request_factory(manager: Any) -> Callable[..., Any]:
    """Build requests with the manager port's ``Request`` (``kvproof.sim.requests.request``)."""
    make = getattr(request_module, "make_request", None)
    if make is None:
        make = getattr(manager, "make_request", None)
    if make is not None:
        return lambda request_id, prompt_token_ids, max_tokens: make(
            request_id=request_id, prompt_token_ids=prompt_token_ids, max_tokens=max_tokens
        )
    Request = request_module.Request
    hasher = getattr(manager, "block_hasher", None)
    return lambda request_id, prompt_token_ids, max_tokens: Request(
        request_id=request_id, prompt_token_ids=prompt_token_ids, max_tokens=max_tokens, block_hasher=hasher
    )


def prompt_rejection(prompt_tokens: int, max_model_len: int) -> str | None:
    """The input processor's refusal of a prompt (``v1/engine/input_processor.py:557-599``), or None."""
    if prompt_tokens > max_model_len:
        return (
            f"The decoder prompt (length {prompt_tokens}) is longer than the maximum model length of "
            f"{max_model_len}. Make sure that `max_model_len` is no smaller than the number of text tokens."
        )
    if prompt_tokens == max_model_len:
        return (
            f"The decoder prompt (length {prompt_tokens}) plus the number of requested output tokens "
            f"(at least 1) is longer than the maximum model length of {max_model_len}. Make sure that "
            "`max_model_len` is no smaller than the number of text tokens (prompt + requested output tokens)."
        )
    return None


def simulate_workload(
    plan: Any,
    simulate_block: Any,
    *,
    kv_cache_manager: Any = None,
    request_factory: Callable[..., Any] | None = None,
    config: SchedulerConfig | None = None,
    max_num_seqs: int | None = None,
    decode_runs: bool | None = None,
    on_step: Callable[[dict, Any], None] | None = None,
) -> dict:
    """Run ``simulate_block.requests`` through the scheduler; the ``workload`` object of
    ``docs/requests.md``.

    ``plan``: a :class:`kvproof.sim.startup.plan.Plan` (its settings and pool). ``simulate_block``: the
    geometry's ``simulate`` block (``requests``, ``max_steps``, ``chunk_tokens``), attrs, dict or a
    simple object. ``max_num_seqs``: the geometry's ``max_num_seqs`` (``EngineSettings`` does not carry
    it; None = :data:`DEFAULT_MAX_NUM_SEQS` capped at ``max_num_batched_tokens``). Keyword overrides
    (tests): ``kv_cache_manager`` (default ``KVCacheManager.from_plan(plan)``),
    ``request_factory(request_id, prompt_token_ids, max_tokens)`` (default the manager's
    ``make_request``) and ``config`` (default :meth:`SchedulerConfig.from_plan`; ``chunk_tokens`` is
    the long-prefill threshold).

    Each step ``s`` adds the requests with ``arrival_step == s`` (in ``requests[]`` order), calls
    ``schedule()``, lets the model sample one token for each scheduled request whose prefill is
    complete after the step, and calls ``update_from_output()``. The run stops when every request has
    finished or been rejected, or after ``max_steps`` steps (``truncated``).

    Step ``s``'s ``admitted`` maps each request admitted from ``waiting`` (new or resumed) to the
    computed tokens it starts from: its local prefix-cache hit, less the bounded-replay window of a
    replaying SWA group; ``requests[id].prefix_hit_tokens`` is that of its first admission.

    A prompt of ``max_model_len`` tokens or more is refused by vLLM's input processor before it
    reaches the scheduler (``v1/engine/input_processor.py:557-599``): its ``requests`` entry has null
    steps and a ``rejected`` message (a kvproof key), and it counts as neither finished nor pending.
    (``chunk_tokens > max_model_len`` would make vLLM's ``SchedulerConfig`` refuse to start,
    ``config/scheduler.py:355-360``; like the requests oracle, the threshold is used as given.)

    ``decode_runs`` (None: on, except inside :func:`step_by_step`): advance the steps where only token
    counts change together (``kvproof.sim.requests.decode_runs``, ``docs/requests.md`` "Decode runs"); the
    result is the same, step for step, except that the steps of a run in which only token counts
    changed share their ``scheduled``, ``running`` and ``waiting`` objects (treat the result as
    read-only). They apply with the default request factory only. A caller that must see the
    scheduler and manager after every single step turns them off.

    ``on_step(step, kv_cache_manager)`` (``simulate --plot``): called after every step with its
    ``steps`` element and the manager as that step left it; a caller passing it sees every step, so
    decode runs are off then.
    """
    requests_in = list(_field(simulate_block, "requests", []) or [])
    max_steps = _field(simulate_block, "max_steps", DEFAULT_MAX_STEPS)
    chunk_tokens = _field(simulate_block, "chunk_tokens", 0)
    if config is None:
        config = SchedulerConfig.from_plan(plan, long_prefill_token_threshold=chunk_tokens or 0,
                                           max_num_seqs=max_num_seqs)
    if kv_cache_manager is None:
        kv_cache_manager = KVCacheManager.from_plan(plan)
    default_factory = request_factory is None
    if default_factory:
        request_factory = _default_request_factory(kv_cache_manager)
    if on_step is not None:
        decode_runs = False  # on_step sees the manager after every single step
    scheduler = Scheduler(config, kv_cache_manager, decode_runs=decode_runs)
    block_pool = scheduler.block_pool
    max_model_len = config.max_model_len

    token_ids = workload_token_ids(requests_in)
    ids = [str(_field(req, "id", str(r))) for r, req in enumerate(requests_in)]
    index_of = {rid: r for r, rid in enumerate(ids)}
    info: dict[str, dict] = {}
    arrivals: dict[int, list[int]] = {}
    pending = 0
    for r, req in enumerate(requests_in):
        rid = ids[r]
        info[rid] = {"first_scheduled_step": None, "finished_step": None, "num_preemptions": 0,
                     "prefix_hit_tokens": None}
        rejection = prompt_rejection(len(token_ids[r]), max_model_len)
        if rejection is not None:
            info[rid]["rejected"] = rejection
            continue
        arrivals.setdefault(_field(req, "arrival_step", 0), []).append(r)
        pending += 1

    steps: list[dict] = []
    totals = {"steps": 0, "request_steps": 0, "preemptions": 0, "finished": 0}

    def arrive(step: int) -> None:
        for r in arrivals.get(step, ()):
            scheduler.add_request(request_factory(ids[r], token_ids[r], _field(requests_in[r], "decode_tokens", 1)))

    def record(step, scheduled, preempted, finished, admitted, running_ids, waiting_ids) -> None:
        """One element of ``steps`` (``free_blocks`` read after ``update_from_output``)."""
        for rid, hit in admitted.items():
            entry = info[rid]
            if entry["first_scheduled_step"] is None:
                entry["first_scheduled_step"] = step
                entry["prefix_hit_tokens"] = hit
        for rid in preempted:
            info[rid]["num_preemptions"] += 1
        for rid in finished:
            info[rid]["finished_step"] = step
        totals["request_steps"] += len(scheduled)
        totals["preemptions"] += len(preempted)
        totals["finished"] += len(finished)
        steps.append({"step": step, "scheduled": scheduled, "preempted": preempted, "finished": finished,
                      "admitted": admitted, "running": running_ids, "waiting": waiting_ids,
                      "free_blocks": block_pool.get_num_free_blocks()})
        if on_step is not None:
            on_step(steps[-1], kv_cache_manager)

    def record_run(step, scheduled, finished, admitted, running_ids, waiting_ids) -> None:
        record(step, scheduled, [], finished, admitted, running_ids, waiting_ids)

    def record_quiet(first, stop, scheduled, running_ids, waiting_ids) -> None:
        """Steps ``first .. stop - 1`` of a decode run in which only token counts changed: their
        elements share ``scheduled``, ``running``, ``waiting`` and the empty lists (read-only)."""
        totals["request_steps"] += len(scheduled) * (stop - first)
        free_blocks = block_pool.get_num_free_blocks()
        none: list = []
        nothing: dict = {}
        steps.extend({"step": t, "scheduled": scheduled, "preempted": none, "finished": none, "admitted": nothing,
                      "running": running_ids, "waiting": waiting_ids, "free_blocks": free_blocks}
                     for t in range(first, stop))

    arrival_steps = sorted(arrivals)

    def next_arrival(step: int) -> int:
        at = bisect.bisect_right(arrival_steps, step)
        return arrival_steps[at] if at < len(arrival_steps) else max_steps + 1

    runs = None
    if scheduler.decode_quiet_until is not None and default_factory:
        runs = DecodeRuns(scheduler, lambda rid, first, count: range(
            output_token_id(index_of[rid], first), output_token_id(index_of[rid], first + count)))

    with _cyclic_gc_paused():
        _run_workload(scheduler, runs, max_steps, arrive, next_arrival, record, record_run, record_quiet,
                      pending, totals, index_of)
    totals["steps"] = len(steps)
    return {"steps": steps, "requests": info, "totals": totals, "truncated": pending > totals["finished"]}


def _run_workload(scheduler, runs, max_steps, arrive, next_arrival, record, record_run, record_quiet,
                  pending, totals, index_of) -> None:
    """The engine loop of :func:`simulate_workload` (``EngineCore.step``, synchronous)."""
    step = 0
    while pending - totals["finished"] and step < max_steps:
        arrive(step)
        if not scheduler.has_requests():
            # EngineCore.step does not schedule without requests (v1/engine/core.py); the clock runs.
            if runs is None:
                record(step, {}, [], [], {}, [], [])
                step += 1
            else:  # idle up to the next arrival: like a decode run's quiet steps, the elements share objects
                idle_end = min(next_arrival(step), max_steps)
                record_quiet(step, idle_end, {}, [], [])
                step = idle_end
            continue
        if runs is not None:
            advanced = runs.advance(step, max_steps, next_arrival, arrive, record_run, record_quiet)
            if advanced:
                step += advanced
                continue
        output = scheduler.schedule()
        scheduled = output.num_scheduled_tokens
        running_ids = [r.request_id for r in scheduler.running]
        waiting_ids = [r.request_id for r in scheduler.waiting]
        # The model step: one sampled token per request whose prefill is complete (the runner
        # discards the sample of a partial prefill); drafts are never accepted.
        sampled: dict[str, list[int]] = {}
        requests = scheduler.requests
        for rid in scheduled:
            request = requests[rid]
            if not request.is_prefill_chunk:
                sampled[rid] = [output_token_id(index_of[rid], request.num_output_tokens)]
        finished = scheduler.update_from_output(output, sampled)
        record(step, scheduled, [r.request_id for r in output.preempted_reqs], [r.request_id for r in finished],
               output.admitted, running_ids, waiting_ids)
        step += 1
