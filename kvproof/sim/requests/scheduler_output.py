"""The step records the scheduler port hands around: ``SchedulerOutput`` (the parts of vLLM 0.33.0's
``v1/core/sched/output.py`` the simulation reads) and ``WaitingPass`` (the WAITING loop's view of a
step). Their own module so that ``decode_runs.py``, which builds both, and ``scheduler.py``, which
runs the decode runs, do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SchedulerOutput", "WaitingPass"]


@dataclass
class SchedulerOutput:
    """The parts of ``SchedulerOutput`` (``v1/core/sched/output.py``) the simulation reads."""

    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_new_reqs: list[Any]
    scheduled_resumed_reqs: list[Any]
    scheduled_running_reqs: list[Any]
    scheduled_spec_decode_tokens: dict[str, list[int]]
    preempted_reqs: list[Any]  # in preemption order (vLLM's preempted_req_ids is a set)
    finished_req_ids: set[str]
    #: kvproof: request id -> the computed tokens each request admitted from ``waiting`` in this step
    #: starts from (its local prefix-cache hit ``num_new_local_computed_tokens``, less the bounded-replay
    #: window when a group replays), in admission order.
    admitted: dict[str, int] = field(default_factory=dict)


@dataclass
class WaitingPass:
    """What the WAITING loop of ``schedule`` reads from the step so far and writes into it."""

    token_budget: int
    input_budget: int
    long_prefill_token_threshold: int
    prefill_scheduled: bool  # a scheduled RUNNING request is a prefill chunk (the spec padding, 1310-1330)
    running_scheduled: bool  # some RUNNING request was scheduled in this step
    num_scheduled_tokens: dict[str, int]
    scheduled_new_reqs: list[Any]
    scheduled_resumed_reqs: list[Any]
    scheduled_spec_decode_tokens: dict[str, list[int]]
    admitted: dict[str, int]
    looked_at: int = 0  # kvproof: waiting requests examined (decode runs)
