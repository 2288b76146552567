"""``simulate_result``: what ``kvproof simulate`` reports (:mod:`kvproof.sim.result`), and
``simulate_document``, its JSON (``--format json``).

The keys are the public contract of ``geometry-format.md`` ("Output of kvproof simulate");
the conformance suite compares them key by key with what vLLM 0.33.0 itself computes.  Keys
beyond the contract follow the documented ones (``max_model_len``, ``layout``, ``workers``,
``warnings``).
"""

from __future__ import annotations

import traceback
from typing import Any

import attrs

from ..diagnostics import InputError
from ..models.codec import present
from ..models.geometry import Geometry, load_geometry
from .result import (Alignment, AssumedAlignment, BadInput, Group, Planned, PrefixHitProbe, Raised, Refused,
                     Requests, RequestStep, SchedulerRefusal, Tensor, Worker, Workload)
from .startup.plan import Plan, plan
from .startup.platform import DEFAULT_PLATFORM, DefaultAlignment
from .startup.refusals import PlanRefusal

__all__ = ["simulate_document", "simulate_geometry", "simulate_result", "planned_result", "plan_to_document",
           "bad_input_document", "bad_input_result", "refusal_document"]


def planned_result(result: Plan, with_views: bool | None = None) -> Planned:
    """The result of a plan.  ``platform_alignment`` is None when no alignment ran (the geometry's
    ``"platform_alignment": null``, or no attention layer); its ``default`` states what was assumed
    when the geometry has no block.  ``worker_views`` is present when the geometry has ``views``."""
    settings = result.settings
    alignment = None
    if result.platform_alignment is not None:
        alignment = Alignment(
            result.platform_alignment.block_size, result.platform_alignment.mamba_block_size,
            result.platform_alignment.mamba_page_size_padded,
            None if result.default_platform_alignment is None else assumed_alignment(result.default_platform_alignment),
        )
    return Planned(
        groups=tuple(Group(tuple(group.layer_names), group.spec_class, group.block_size, group.page_size_bytes,
                           group.blocks_per_request, group.is_eagle_group) for group in result.groups),
        bytes_per_block=result.bytes_per_block,
        memory_needed_for_one_max_len_request_bytes=result.memory_needed_bytes,
        num_blocks=result.num_blocks,
        num_usable_blocks=result.num_usable_blocks,
        kv_cache_tensors=tuple(Tensor(tensor.size, tuple(tensor.layers), tensor.offset, tensor.block_stride,
                                      tensor.layer_stride) for tensor in result.tensors),
        max_concurrency=result.max_concurrency,
        kv_cache_size_tokens=result.kv_cache_size_tokens,
        per_group_blocks_per_request=tuple(result.per_group_blocks_per_request),
        engine_cache_config_block_size=result.engine_cache_config_block_size,
        scheduler_block_size=result.scheduler_block_size,
        hash_block_size=result.hash_block_size,
        cache_hit_alignment_tokens=result.cache_hit_alignment_tokens,
        platform_alignment=alignment,
        kv_cache_layout=result.layout,
        mamba_cache_mode=settings.mamba_cache_mode if settings.has_mamba else None,
        enable_prefix_caching=settings.enable_prefix_caching,
        max_in_flight_tokens=settings.max_in_flight_tokens,
        kv_tp_replicas=result.workers[0].kv_tp_replicas,
        workers=tuple(Worker(tuple(worker.layer_names), worker.available_memory_bytes, worker.bytes_per_block,
                             worker.memory_needed_bytes, worker.num_blocks, worker.kv_tp_replicas)
                      for worker in result.workers),
        max_model_len=result.max_model_len,
        warnings=tuple(result.warnings),
        worker_views=tuple(result.views) if (with_views if with_views is not None else result.has_views) else None,
    )


def plan_to_document(result: Plan, with_views: bool | None = None) -> dict[str, Any]:
    """The JSON of a plan (:func:`planned_result`)."""
    return planned_result(result, with_views).to_json()


def assumed_alignment(default: DefaultAlignment) -> AssumedAlignment:
    """What a geometry without ``platform_alignment`` was planned with (:data:`DEFAULT_PLATFORM`)."""
    config = default.config
    return AssumedAlignment(
        platform=DEFAULT_PLATFORM, backend=default.backend.name,
        backend_kernel_block_sizes=tuple(config.backend_kernel_block_sizes), from_layer=default.layer,
        num_kv_heads=config.num_kv_heads, head_size=config.head_size, model_dtype=config.model_dtype,
        cache_dtype=config.cache_dtype, use_mla=config.use_mla,
        mamba_prefill_checkpoint_alignment=config.mamba_prefill_checkpoint_alignment,
    )


def refusal_document(refusal: PlanRefusal) -> dict[str, Any]:
    return Refused(refusal.message, refusal.kind, refusal.source).to_json()


def bad_input_result(error: InputError) -> BadInput:
    return BadInput(tuple(error.diagnostics))


def bad_input_document(error: InputError) -> dict[str, Any]:
    return bad_input_result(error).to_json()


def simulate_result(geometry: Geometry, on_step: Any = None) -> Planned | Refused:
    """The ``simulate`` result of a geometry; ``on_step`` is called after every workload step
    (:func:`kvproof.sim.requests.scheduler.simulate_workload`)."""
    try:
        result = plan(geometry)
    except PlanRefusal as refusal:
        return Refused(refusal.message, refusal.kind, refusal.source)
    planned = planned_result(result)
    if present(geometry.simulate):
        planned = attrs.evolve(planned, requests=_requests_over_time(result, geometry, on_step))
    return planned


def simulate_geometry(geometry: Geometry, on_step: Any = None) -> dict[str, Any]:
    """The JSON of :func:`simulate_result`."""
    return simulate_result(geometry, on_step).to_json()


def _requests_over_time(result: Plan, geometry: Geometry, on_step: Any = None) -> Requests:
    """The ``simulate`` block (``docs/requests.md``): one request through the managers
    (``simulation``, ``prefix_hit_probe``) and a workload through the scheduler (``workload``)."""
    simulate = geometry.simulate
    single: dict[str, Any] = {}
    if present(simulate.prompt_tokens):
        # The requests port is imported when a geometry asks for it: it is ~50 ms of imports
        # (-X importtime, 3 runs at load ~3) that `kvproof check` (the rules import kvproof.sim) and a
        # plan-only simulate never use.
        from .requests.request_trace import simulate_request

        try:
            trace = simulate_request(result, simulate)
        except _VLLM_RAISES as exc:
            single = {"simulated": True, "raised": _raised(exc)}
        else:
            single = {"simulated": True, **_single_request(trace)}
    if not present(simulate.requests):
        return Requests(**single)
    from .requests.scheduler import simulate_workload  # lazily, as simulate_request above

    if present(simulate.chunk_tokens) and simulate.chunk_tokens > geometry.max_model_len:
        # chunk_tokens is the scheduler's long_prefill_token_threshold: SchedulerConfig refuses it.
        # vLLM checks it once, when EngineArgs builds SchedulerConfig with the length before any
        # auto-fit (engine/arg_utils.py:2658-2683 -> config/scheduler.py:315, 355-360); the auto-fit
        # runs later (v1/core/kv_cache_planning.py:1545-1548) and nothing checks the threshold again,
        # so a threshold above the fitted length is served.
        return Requests(**single, workload=SchedulerRefusal(
            "ValueError",
            f"long_prefill_token_threshold ({simulate.chunk_tokens}) cannot be greater than the "
            f"max_model_len ({geometry.max_model_len}).",
            "config/scheduler.py:355-360",
        ))
    try:
        workload: Workload | Raised = Workload.from_port(
            simulate_workload(result, simulate, on_step=on_step))  # max_num_seqs: plan.settings
    except _VLLM_RAISES as exc:
        workload = _raised(exc)
    return Requests(**single, workload=workload)


def _single_request(trace: dict[str, Any]) -> dict[str, Any]:
    """:class:`Requests`' fields of ``simulate_request``'s JSON (kvproof/sim/requests/request_trace.py)."""
    probe = trace.get("prefix_hit_probe")
    probe = None if probe is None else PrefixHitProbe(probe["prompt_tokens"], probe["hit_tokens"],
                                                      tuple(probe["hit_blocks"]))
    steps = trace["simulation"]
    simulation = None if steps is None else tuple(
        probe if step["phase"] == "prefix_hit_probe" else RequestStep(
            step["step"], step["phase"], step["num_computed_tokens"], step["num_new_tokens"],
            tuple(step["blocks_held"]), tuple(step["row_length"]), step["free_blocks"])
        for step in steps)
    return {"simulation": simulation, "prefix_hit_probe": probe,
            "rejected": trace.get("simulation_rejected") or None,  # the input processor's refusal
            "truncated": bool(trace.get("simulation_truncated")),  # max_steps reached
            "stalled": bool(trace.get("simulation_stalled"))}  # the lone request never fits: vLLM waits forever


#: The exception types vLLM's managers and scheduler raise themselves (``raise`` and ``assert`` in
#: ``v1/core``), which the ports raise at the same places: vLLM would fail the same way while serving.
#: Anything else (a KeyError, a TypeError, ...) is a kvproof bug and is not caught here.
_VLLM_RAISES = (AssertionError, ValueError, NotImplementedError, RuntimeError)


def _raised(exc: BaseException) -> Raised:
    """What vLLM raises while serving, with the ported ``raise`` (kvproof file:line) that raised it."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = frame.filename.replace("\\", "/")
    where = where[where.rfind("kvproof/"):] if "kvproof/" in where else where
    return Raised(type(exc).__name__, str(exc), f"{where}:{frame.lineno}")


def simulate_document(doc: dict | str | bytes, file: str | None = None) -> dict[str, Any]:
    """Load a geometry (a parsed JSON object, or its text) and simulate vLLM's start-up plan."""
    try:
        geometry = load_geometry(doc, file)
    except InputError as error:
        return bad_input_document(error)
    return simulate_geometry(geometry)
