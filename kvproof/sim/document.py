"""``simulate_document``: the JSON that ``kvproof simulate --format json`` prints.

The keys are the public contract of ``geometry-format.md`` ("Output of kvproof simulate");
the conformance suite compares them key by key with what vLLM 0.33.0 itself computes.  Keys
beyond the contract follow the documented ones (``max_model_len``, ``layout``, ``workers``,
``warnings``).
"""

from __future__ import annotations

import traceback
from typing import Any

from ..diagnostics import InputError
from ..models.codec import present
from ..models.geometry import Geometry, load_geometry
from .startup.plan import Plan, plan
from .startup.platform import DEFAULT_PLATFORM, DefaultAlignment
from .startup.refusals import PlanRefusal

__all__ = ["simulate_document", "simulate_geometry", "plan_to_document", "bad_input_document", "refusal_document"]


def _group(group) -> dict[str, Any]:
    return {
        "layers": list(group.layer_names),
        "spec": group.spec_class,
        "block_size": group.block_size,
        "page_size_bytes": group.page_size_bytes,
        "blocks_per_request_at_max_model_len": group.blocks_per_request,
        "is_eagle_group": group.is_eagle_group,
    }


def _tensor(tensor) -> dict[str, Any]:
    return {
        "size": tensor.size,
        "layers": list(tensor.layers),
        "offset": tensor.offset,
        "block_stride": tensor.block_stride,
        "layer_stride": tensor.layer_stride,
    }


def plan_to_document(result: Plan, with_views: bool | None = None) -> dict[str, Any]:
    """The JSON of a plan.  ``platform_alignment`` is null when no alignment ran (the geometry's
    ``"platform_alignment": null``, or no attention layer); its ``default`` states what was assumed
    when the geometry has no block.  ``worker_views`` is present when the geometry has ``views``."""
    settings = result.settings
    alignment = None
    if result.platform_alignment is not None:
        alignment = {
            "block_size": result.platform_alignment.block_size,
            "mamba_block_size": result.platform_alignment.mamba_block_size,
            "mamba_page_size_padded": result.platform_alignment.mamba_page_size_padded,
        }
        if result.default_platform_alignment is not None:
            alignment["default"] = default_alignment_json(result.default_platform_alignment)
    doc: dict[str, Any] = {
        "status": "ok",
        "groups": [_group(group) for group in result.groups],
        "bytes_per_block": result.bytes_per_block,
        "memory_needed_for_one_max_len_request_bytes": result.memory_needed_bytes,
        "num_blocks": result.num_blocks,
        "num_usable_blocks": result.num_usable_blocks,
        "kv_cache_tensors": [_tensor(tensor) for tensor in result.tensors],
        "max_concurrency": result.max_concurrency,
        "kv_cache_size_tokens": result.kv_cache_size_tokens,
        "per_group_blocks_per_request": list(result.per_group_blocks_per_request),
        "engine_cache_config_block_size": result.engine_cache_config_block_size,
        "scheduler_block_size": result.scheduler_block_size,
        "hash_block_size": result.hash_block_size,
        "cache_hit_alignment_tokens": result.cache_hit_alignment_tokens,
        "platform_alignment": alignment,
        # beyond the documented keys (the conformance oracle reports the same ones)
        "kv_cache_layout": result.layout,
        "mamba_cache_mode": settings.mamba_cache_mode if settings.has_mamba else None,
        "enable_prefix_caching": settings.enable_prefix_caching,
        "max_in_flight_tokens": settings.max_in_flight_tokens,
        "kv_tp_replicas": result.workers[0].kv_tp_replicas,
        "workers": [
            {
                "layers": list(worker.layer_names),
                "available_memory_bytes": worker.available_memory_bytes,
                "bytes_per_block": worker.bytes_per_block,
                "memory_needed_for_one_max_len_request_bytes": worker.memory_needed_bytes,
                "num_blocks": worker.num_blocks,
                "kv_tp_replicas": worker.kv_tp_replicas,
            }
            for worker in result.workers
        ],
        "max_model_len": result.max_model_len,
        "warnings": list(result.warnings),
    }
    if with_views if with_views is not None else result.has_views:
        doc["worker_views"] = [view.to_json() for view in result.views]
    return doc


def default_alignment_json(default: DefaultAlignment) -> dict[str, Any]:
    """What a geometry without ``platform_alignment`` was planned with (:data:`DEFAULT_PLATFORM`)."""
    config = default.config
    return {
        "platform": DEFAULT_PLATFORM,
        "backend": default.backend.name,
        "backend_kernel_block_sizes": [
            {"MultipleOf": size.base} if hasattr(size, "base") else size for size in config.backend_kernel_block_sizes
        ],
        "from_layer": default.layer,
        "num_kv_heads": config.num_kv_heads,
        "head_size": config.head_size,
        "model_dtype": config.model_dtype,
        "cache_dtype": config.cache_dtype,
        "use_mla": config.use_mla,
        "mamba_prefill_checkpoint_alignment": config.mamba_prefill_checkpoint_alignment,
    }


def refusal_document(refusal: PlanRefusal) -> dict[str, Any]:
    error: dict[str, Any] = {"message": refusal.message, "type": refusal.kind}
    if refusal.source:
        error["source"] = refusal.source
    return {"status": "refused", "error": error}


def bad_input_document(error: InputError) -> dict[str, Any]:
    diagnostics = [d.to_json() for d in error.diagnostics]
    return {
        "status": "bad_input",
        "error": {"message": "; ".join(f"{d['path']}: {d['message']}" for d in diagnostics)},
        "diagnostics": diagnostics,
    }


def simulate_geometry(geometry: Geometry, on_step: Any = None) -> dict[str, Any]:
    """The ``simulate`` result of a geometry; ``on_step`` is called after every workload step
    (:func:`kvproof.sim.requests.scheduler.simulate_workload`)."""
    try:
        result = plan(geometry)
    except PlanRefusal as refusal:
        return refusal_document(refusal)
    doc = plan_to_document(result)
    if present(geometry.simulate):
        _requests_over_time(result, geometry, doc, on_step)
    return doc


def _requests_over_time(result: Plan, geometry: Geometry, doc: dict[str, Any], on_step: Any = None) -> None:
    """The ``simulate`` block (``docs/requests.md``): one request through the managers
    (``simulation``, ``prefix_hit_probe``) and a workload through the scheduler (``workload``)."""
    simulate = geometry.simulate
    if present(simulate.prompt_tokens):
        # The requests port is imported when a geometry asks for it: it is ~50 ms of imports
        # (-X importtime, 3 runs at load ~3) that `kvproof check` (the rules import kvproof.sim) and a
        # plan-only simulate never use.
        from .requests.request_trace import simulate_request

        try:
            trace = simulate_request(result, simulate)
        except _VLLM_RAISES as exc:
            doc["simulation"] = doc["prefix_hit_probe"] = None
            doc["simulation_raised"] = _raised(exc)
        else:
            doc["simulation"] = trace["simulation"]
            doc["prefix_hit_probe"] = trace.get("prefix_hit_probe")
            if trace.get("simulation_rejected"):
                doc["simulation_rejected"] = trace["simulation_rejected"]  # the input processor's refusal
            if trace.get("simulation_truncated"):
                doc["simulation_truncated"] = True  # max_steps reached
            if trace.get("simulation_stalled"):
                doc["simulation_stalled"] = True  # the lone request never fits: vLLM would wait forever
    if present(simulate.requests):
        from .requests.scheduler import simulate_workload  # lazily, as simulate_request above

        if present(simulate.chunk_tokens) and simulate.chunk_tokens > geometry.max_model_len:
            # chunk_tokens is the scheduler's long_prefill_token_threshold: SchedulerConfig refuses it.
            # vLLM checks it once, when EngineArgs builds SchedulerConfig with the length before any
            # auto-fit (engine/arg_utils.py:2658-2683 -> config/scheduler.py:315, 355-360); the auto-fit
            # runs later (v1/core/kv_cache_planning.py:1545-1548) and nothing checks the threshold again,
            # so a threshold above the fitted length is served.
            doc["workload"] = {"refused": {
                "type": "ValueError",
                "message": f"long_prefill_token_threshold ({simulate.chunk_tokens}) cannot be greater than the "
                           f"max_model_len ({geometry.max_model_len}).",
                "source": "config/scheduler.py:355-360",
            }}
            return
        try:
            doc["workload"] = simulate_workload(result, simulate, on_step=on_step)  # max_num_seqs: plan.settings
        except _VLLM_RAISES as exc:
            doc["workload"] = {"raised": _raised(exc)}


#: The exception types vLLM's managers and scheduler raise themselves (``raise`` and ``assert`` in
#: ``v1/core``), which the ports raise at the same places: vLLM would fail the same way while serving.
#: Anything else (a KeyError, a TypeError, ...) is a kvproof bug and is not caught here.
_VLLM_RAISES = (AssertionError, ValueError, NotImplementedError, RuntimeError)


def _raised(exc: BaseException) -> dict[str, Any]:
    """What vLLM raises while serving, with the ported ``raise`` (kvproof file:line) that raised it."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = frame.filename.replace("\\", "/")
    where = where[where.rfind("kvproof/"):] if "kvproof/" in where else where
    return {"type": type(exc).__name__, "message": str(exc), "at": f"{where}:{frame.lineno}"}


def simulate_document(doc: dict | str | bytes, file: str | None = None) -> dict[str, Any]:
    """Load a geometry (a parsed JSON object, or its text) and simulate vLLM's start-up plan."""
    try:
        geometry = load_geometry(doc, file)
    except InputError as error:
        return bad_input_document(error)
    return simulate_geometry(geometry)
