"""Decode runs: the scheduler steps in which only token counts change, advanced together
(``docs/requests.md``, "Decode runs").

Paths are relative to the ``vllm/`` package; line numbers are those of 0.33.0. A step of
``Scheduler.schedule`` + ``update_from_output`` (``v1/core/sched/scheduler.py:699-1784, 2259-2538``)
whose every running request is a plain decode, with nothing admitted, gives each request one token
(``num_new_tokens = num_tokens - num_computed_tokens = 1``, 842-863) and one sampled token. Its only
other effect is the KV cache manager's ``allocate_slots(request, 1)`` per request (916-984), and that
is a no-op in most steps: ``KVCacheManager.decode_quiet_steps`` says, per request, how many steps in a
row it is (no block allocated, freed or cached, no manager state changed). A decode run therefore
calls ``allocate_slots`` only at each request's events (``KVCacheManager.decode_event``), in running
order and on the request's exact state at that step, and advances everything else in closed form:
``num_computed_tokens`` and the output tokens (appended with vLLM's block hasher,
``v1/request.py:272-288``). The outputs are the step-by-step ones, step for step
(``tests/sim/test_decode_runs.py`` compares the two paths).

A run starts at a step when (every condition is checked, none assumed):

* every group's manager is modelled (``KVCacheManager.supports_decode_runs``);
* every running request is RUNNING, decoding (``num_computed_tokens = num_tokens - 1`` with at least
  one output token), with no draft tokens and nothing in flight;
* the token budget and the input budget hold one token for each of them (``max_num_scheduled_tokens``,
  ``max_num_batched_tokens``, the drafting slots; 795-863), so every one is scheduled.

Speculative decoding without a drafter is followed: the lookahead slots enter ``allocate_slots`` and,
with ``num_spec_tokens > 0``, ``update_from_output`` caches each decode again after its sampled
token (2402-2415), an event of its own. Within a run: the WAITING loop (``Scheduler._schedule_waiting``,
1046-1516) runs for real after each step's events unless it cannot look at a request (seats or
budgets used up, 1046-1068) or its failure is known to repeat (``_fails_again``); a request that stops
(``check_stop``, ``v1/core/sched/utils.py:96-140``) or is admitted goes through the real
``update_from_output``, and the run goes on with the new running set while every request in it
decodes. It stops before a step whose events could need more blocks than are free (a preemption is
possible; at most ``decode_step_max_blocks`` per request), at ``max_steps``, and after a step that
leaves a request with prefill to do.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from ...diagnostics import KvproofError
from .request import Request, RequestStatus
from .scheduler_output import SchedulerOutput, WaitingPass

__all__ = ["DecodeRunError", "DecodeRuns"]

_RUNNING = RequestStatus.RUNNING


class DecodeRunError(KvproofError):
    """A decode run found the scheduler in a state its conditions exclude: a kvproof bug (never one of
    the exceptions vLLM raises while serving, so ``simulate`` does not report it as vLLM's)."""


class _Lane:
    """One decoding request of a decode run, from the run's step offset ``start`` on."""

    __slots__ = ("request", "start", "computed", "outputs", "appended", "finish", "event", "position")

    def __init__(self, request: Request, start: int, finish: int, event: int, position: int) -> None:
        self.request = request
        self.start = start  # the run's step offset from which it decodes in the run
        self.computed = request.num_computed_tokens  # num_computed_tokens then
        self.outputs = request.num_output_tokens  # num_output_tokens then
        self.appended = 0  # output tokens appended since
        self.finish = finish  # offset of the step in which check_stop stops it
        self.event = event  # offset of its next step that is not a no-op of allocate_slots
        self.position = position  # its index in ``running``

    def computed_at(self, k: int) -> int:
        return self.computed + k - self.start


class DecodeRuns:
    """Decode runs of one ``Scheduler`` (``kvproof.sim.requests.scheduler``) in ``simulate_workload``.

    ``output_tokens(request_id, first, count)``: the model's output token ids ``first .. first +
    count - 1`` of a request, a sequence (``docs/requests.md``: one token per step, fixed ids).
    """

    def __init__(self, scheduler: Any, output_tokens: Callable[[str, int, int], Sequence[int]]) -> None:
        self.scheduler = scheduler
        self.output_tokens = output_tokens

    @staticmethod
    def applies(scheduler: Any) -> bool:
        """The condition that holds for the whole workload or never: a KV cache manager whose every
        group is modelled (``KVCacheManager.supports_decode_runs``)."""
        return bool(getattr(scheduler.kv_cache_manager, "supports_decode_runs", False))

    def _waiting_loop_closed(self, num_running: int) -> bool | None:
        """After ``num_running`` one-token decodes: True when the WAITING loop cannot look at a request
        (seats or budgets used up, 1046-1068), False when it can, None when the budgets do not even
        hold the decodes."""
        s = self.scheduler
        draft_slots = s.scheduler_config.draft_slots
        token_left = s.max_num_scheduled_tokens - num_running
        input_left = s.scheduler_config.max_num_batched_tokens - num_running * (1 + draft_slots)
        if token_left < 0 or input_left < 0:
            return None
        return token_left <= 0 or input_left <= draft_slots or num_running >= s.max_num_active_reqs

    @staticmethod
    def _decoding(requests: list[Any]) -> bool:
        """Every request is a plain running decode: one token to compute, at least one output token,
        no drafts, nothing in flight."""
        return all(
            r.status == _RUNNING
            and not r.spec_token_ids
            and not r.num_in_flight_tokens
            and r.num_output_tokens
            and r.num_computed_tokens == r.num_tokens - 1
            for r in requests
        )

    def _lane(self, request: Request, k: int, position: int) -> _Lane:
        """A lane for ``request`` decoding from offset ``k``: when it stops and its next event."""
        s = self.scheduler
        c = request.num_computed_tokens
        finish = k + min(s.max_model_len - 2 - c, request.max_tokens - 1 - request.num_output_tokens)
        until = s.decode_quiet_until.get(request.request_id)
        quiet = max(until - c, 0) if until is not None else self._quiet(request, c)
        return _Lane(request, k, finish, k + quiet, position)

    def _quiet(self, request: Request, c: int) -> int:
        """``decode_quiet_steps`` with the scheduler's lookahead slots and, under speculative decoding,
        its ``cache_blocks`` after the sampled token (``scheduler.py:2402-2415``)."""
        s = self.scheduler
        return s.kv_cache_manager.decode_quiet_steps(request, c, s.num_lookahead_tokens, s.num_spec_tokens > 0)

    def advance(self, step: int, max_steps: int, next_arrival: Callable[[int], int], arrive: Callable[[int], None],
                record: Callable[..., None], record_quiet: Callable[..., None]) -> int:
        """Advance a decode run from ``step`` (its arrivals already added); returns the number of steps
        advanced (0: the run does not apply here; ``step`` is still to be done).

        ``next_arrival(t)``: the first step after ``t`` with arrivals (or one past ``max_steps``);
        ``arrive(t)`` adds the arrivals of step ``t``; ``record(t, scheduled, finished_ids, admitted,
        running_ids, waiting_ids)`` records step ``t`` as ``simulate_workload`` does, and
        ``record_quiet(first, stop, scheduled, running_ids, waiting_ids)`` the steps ``first .. stop -
        1`` in which nothing but token counts changed (they share these objects).
        """
        s = self.scheduler
        if not s.running or not self._decoding(s.running):
            return 0
        closed = self._waiting_loop_closed(len(s.running))
        if closed is None:
            return 0
        manager = s.kv_cache_manager
        pool = s.block_pool
        max_blocks = manager.decode_step_max_blocks
        lanes = [self._lane(r, 0, position) for position, r in enumerate(s.running)]
        if sum(lane.event == 0 for lane in lanes) * max_blocks > pool.get_num_free_blocks():
            return 0
        # offset -> lanes, with a heap of the offsets
        events: dict[int, list[_Lane]] = {}
        finishes: dict[int, list[_Lane]] = {}
        event_offsets: list[int] = []
        finish_offsets: list[int] = []

        def schedule_lane(lane: _Lane) -> None:
            for table, offsets, at in ((events, event_offsets, lane.event), (finishes, finish_offsets, lane.finish)):
                same = table.get(at)
                if same is None:
                    table[at] = [lane]
                    heapq.heappush(offsets, at)
                else:
                    same.append(lane)

        for lane in lanes:
            schedule_lane(lane)
        ids = [r.request_id for r in s.running]
        scheduled_ids = dict.fromkeys(ids, 1)
        waiting_ids = [r.request_id for r in s.waiting]
        hashes = pool.cached_block_hash_to_block
        memo = None  # (head, watched changes, free blocks): the head's admission failed against that
        watched_head = None
        decode_event = manager.decode_event
        lookahead = s.num_lookahead_tokens
        after_sampling = s.num_spec_tokens > 0  # update_from_output caches each decode again
        new_step_starts = s._new_step_starts
        s.finished_req_ids = set()  # the first step's _update_after_schedule (1845-1877)
        end = max_steps - step
        arrival = 0  # offset of the next arrival (refreshed once passed)
        finished_lanes = False  # some lane in ``events`` belongs to a finished request
        k = 0
        try:
            while k < end:
                attempt = not closed and s.waiting and not self._fails_again(memo, s.waiting[0], hashes, pool)
                if not attempt:
                    # Up to the next event, stop or arrival nothing but token counts changes.
                    while event_offsets and event_offsets[0] not in events:
                        heapq.heappop(event_offsets)
                    while finish_offsets and finish_offsets[0] not in finishes:
                        heapq.heappop(finish_offsets)
                    if arrival <= k:  # the next arrival offset at or after k (offset 0's were added)
                        arrival = next_arrival(step + k - 1 if k else step) - step
                    quiet_end = min(end, arrival, event_offsets[0] if event_offsets else end,
                                    finish_offsets[0] if finish_offsets else end)
                    if quiet_end > k:
                        record_quiet(step + k, step + quiet_end, scheduled_ids, ids, waiting_ids)
                        k = quiet_end
                        continue
                due = events.pop(k, None)
                if due and finished_lanes:
                    due = [lane for lane in due if lane.position >= 0]  # (not the finished ones)
                if due and len(due) * max_blocks > pool.get_num_free_blocks():
                    events[k] = due
                    break  # the events might not fit: the real step decides (preemption, 916-984)
                if k:
                    arrive(step + k)
                    if len(s.waiting) != len(waiting_ids):
                        waiting_ids = [r.request_id for r in s.waiting]
                        memo = None  # more eligible requests: the long-prefill threshold may move (757-771)
                if due and new_step_starts is not None:
                    new_step_starts()
                if due:
                    if len(due) > 1:
                        due.sort(key=_position)  # running order (916-984)
                    for lane in due:
                        r = lane.request
                        if k - lane.start > lane.appended:
                            self._catch_up(lane, k)
                        c = lane.computed + k - lane.start  # computed_at(k)
                        r.num_computed_tokens = c
                        quiet = decode_event(r, c, lookahead, after_sampling)
                        if quiet is None:
                            raise DecodeRunError(f"allocate_slots failed for {r.request_id} inside a decode run")
                        lane.event = k + 1 + quiet
                        same = events.get(lane.event)
                        if same is None:
                            events[lane.event] = [lane]
                            heapq.heappush(event_offsets, lane.event)
                        else:
                            same.append(lane)
                waiting_pass = None
                # the WAITING loop sees the pool as the RUNNING loop's events leave it
                attempt = not closed and s.waiting and not self._fails_again(memo, s.waiting[0], hashes, pool)
                if attempt:
                    if not due and new_step_starts is not None:
                        new_step_starts()
                    head = s.waiting[0]
                    waiting_pass = self._waiting_pass(len(ids))
                    s._schedule_waiting(waiting_pass)
                    s._drain_step_hooks()
                    memo = None
                    if waiting_pass.admitted:
                        watched_head = hashes.watched = None
                    else:
                        if not due and waiting_pass.looked_at == 1:  # the head alone, clean step-local state
                            if watched_head is not head:
                                hashes.watched = set(head.block_hashes)
                                watched_head = head
                            memo = (head, hashes.watched_changes, pool.get_num_free_blocks())
                        waiting_pass = None
                elif due:
                    s._drain_step_hooks()
                stopping = finishes.pop(k, None) or []
                # the decodes update_from_output does more for than appending a token: those that stop,
                # and under speculative decoding those with an event (cache_blocks after the token)
                updating = stopping + due if after_sampling and due else stopping
                if waiting_pass is None and not stopping:
                    if updating:
                        self._update(updating, k, [], None)
                    record_quiet(step + k, step + k + 1, scheduled_ids, ids, waiting_ids)
                    k += 1
                    continue
                # A step that changes the running set: the real update_from_output for the requests
                # that stop or were admitted.
                scheduled = dict(scheduled_ids)
                admitted: list[Any] = []
                admitted_dict: dict[str, int] = {}
                running_ids = ids
                if waiting_pass is not None:
                    scheduled.update(waiting_pass.num_scheduled_tokens)
                    running_ids = [r.request_id for r in s.running]
                    waiting_ids = [r.request_id for r in s.waiting]
                    admitted = [s.requests[rid] for rid in waiting_pass.num_scheduled_tokens]
                    admitted_dict = waiting_pass.admitted
                    s._update_after_schedule(self._output(waiting_pass.num_scheduled_tokens,
                                                          waiting_pass.scheduled_spec_decode_tokens))
                finished = self._update(updating, k, admitted, waiting_pass)
                record(step + k, scheduled, [r.request_id for r in finished], admitted_dict, running_ids, waiting_ids)
                k += 1
                # The running set of the next step: the run goes on while every request in it decodes.
                finished_lanes = finished_lanes or any(lane.request.status != _RUNNING for lane in lanes)
                lanes, all_decoding = self._next_lanes(lanes, k, schedule_lane)
                ids = [r.request_id for r in s.running]
                scheduled_ids = dict.fromkeys(ids, 1)
                closed = self._waiting_loop_closed(len(ids)) if all_decoding and ids else None
                if closed is None:
                    break
        finally:
            hashes.watched = None
        quiet_until = s.decode_quiet_until
        for lane in lanes:
            r = lane.request
            if r.status == _RUNNING and not r.num_in_flight_tokens:
                self._catch_up(lane, k)
                r.num_computed_tokens = lane.computed_at(k)
                quiet_until[r.request_id] = lane.computed_at(lane.event)
        s.current_step += k
        return k

    def _next_lanes(self, lanes: list[_Lane], k: int, schedule_lane: Callable[[_Lane], None]) -> tuple[list[_Lane], bool]:
        """The lanes of ``running`` from offset ``k`` on, after a step that finished or admitted
        requests: the finished ones dropped (``position`` -1), the admitted ones that decode now added
        (``schedule_lane``); and whether every running request decodes."""
        alive = {}
        for lane in lanes:
            if lane.request.status == _RUNNING:
                alive[id(lane.request)] = lane
            else:
                lane.position = -1
        out: list[_Lane] = []
        all_decoding = True
        for position, r in enumerate(self.scheduler.running):
            lane = alive.get(id(r))
            if lane is None:
                if not self._decoding([r]):
                    all_decoding = False
                    continue
                lane = self._lane(r, k, position)
                schedule_lane(lane)
            lane.position = position
            out.append(lane)
        return out, all_decoding

    @staticmethod
    def _fails_again(memo, head: Any, hashes: Any, pool: Any) -> bool:
        """Whether the WAITING loop's answer for ``head`` is known to be the memo's failure: the same
        head, no key of its hashes inserted or evicted since (its prefix hit is the same blocks), and
        no more free blocks (a block leaving the free queue is allocated or touched; entering it,
        freed: so the hit blocks' evictable counts stand too). ``allocate_slots`` fails on
        ``blocks + watermark > free`` (``kv_cache_manager.py:527-546, 586-588``) and every other
        exit of the loop reads neither; so with fewer free blocks it fails again. (The run drops the
        memo when a request arrives or the running set changes: the budgets and the long-prefill
        threshold stay as they were.)"""
        return (
            memo is not None
            and memo[0] is head
            and memo[1] == hashes.watched_changes
            and pool.get_num_free_blocks() <= memo[2]
        )

    def _waiting_pass(self, num_running: int) -> Any:
        """The WAITING loop's view of a step whose ``num_running`` RUNNING requests took one token each."""
        s = self.scheduler
        draft_slots = s.scheduler_config.draft_slots
        return WaitingPass(
            token_budget=s.max_num_scheduled_tokens - num_running,
            input_budget=s.scheduler_config.max_num_batched_tokens - num_running * (1 + draft_slots),
            long_prefill_token_threshold=s._long_prefill_token_threshold(),
            prefill_scheduled=False, running_scheduled=True, num_scheduled_tokens={},
            scheduled_new_reqs=[], scheduled_resumed_reqs=[], scheduled_spec_decode_tokens={}, admitted={},
        )

    @staticmethod
    def _output(num_scheduled_tokens: dict[str, int], spec_decode_tokens: dict[str, list[int]] | None = None) -> Any:
        """A ``SchedulerOutput`` of these scheduled requests alone (nothing preempted)."""
        return SchedulerOutput(
            num_scheduled_tokens=num_scheduled_tokens, total_num_scheduled_tokens=sum(num_scheduled_tokens.values()),
            scheduled_new_reqs=[], scheduled_resumed_reqs=[], scheduled_running_reqs=[],
            scheduled_spec_decode_tokens=spec_decode_tokens or {}, preempted_reqs=[], finished_req_ids=set(),
        )

    def _catch_up(self, lane: _Lane, k: int) -> None:
        """Append the lane's output tokens of the steps before offset ``k`` that are still missing."""
        missing = k - lane.start - lane.appended
        if missing > 0:
            r = lane.request
            r.append_output_token_ids(self.output_tokens(r.request_id, lane.outputs + lane.appended, missing))
            lane.appended += missing

    def _update(self, lanes: list[_Lane], k: int, admitted: list[Any], waiting_pass: Any) -> list[Any]:
        """Step ``k``'s ``update_from_output`` for these decodes (those that stop in it, and under
        speculative decoding those with an event) and the requests admitted in it (the other decodes
        only gain a token): the real one, on each request as ``_update_after_schedule`` leaves it, in
        scheduling order; returns the finished requests."""
        sampled: dict[str, list[int]] = {}
        num_scheduled_tokens: dict[str, int] = {}
        for lane in sorted({id(lane): lane for lane in lanes if lane.request.status == _RUNNING}.values(),
                           key=_position):
            r = lane.request
            self._catch_up(lane, k)
            r.num_computed_tokens = lane.computed_at(k) + 1
            r.num_in_flight_tokens = 1
            num_scheduled_tokens[r.request_id] = 1
            sampled[r.request_id] = list(self.output_tokens(r.request_id, lane.outputs + k - lane.start, 1))
            lane.appended += 1  # the token of step k
        spec_decode_tokens = None
        if waiting_pass is not None:
            spec_decode_tokens = waiting_pass.scheduled_spec_decode_tokens
            for r in admitted:
                num_scheduled_tokens[r.request_id] = waiting_pass.num_scheduled_tokens[r.request_id]
                if not r.is_prefill_chunk:
                    sampled[r.request_id] = list(self.output_tokens(r.request_id, r.num_output_tokens, 1))
        finished = self.scheduler.update_from_output(self._output(num_scheduled_tokens, spec_decode_tokens), sampled)
        for lane in lanes:
            if (lane.finish == k) == (lane.request.status == _RUNNING):
                raise DecodeRunError(f"check_stop disagrees with the decode run at offset {k}")
        return finished


def _position(lane: _Lane) -> int:
    return lane.position
