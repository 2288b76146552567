"""``kvproof simulate``'s result as typed classes: one of :class:`Planned`, :class:`Refused` and
:class:`BadInput`. ``to_json()`` is the JSON of ``--format json`` (geometry-format.md "Output of
kvproof simulate": the keys, their order, which ones appear when); the text report
(kvproof/commands/simulate.py) reads the same attributes, so the two cannot drift apart.

The requests part (:class:`Requests`) types what a reader of the result needs; the workload's
per-step records stay the scheduler port's own JSON records (:attr:`Workload.steps`): a workload
has up to ``max_steps`` (1e5) of them, the decode runs share their lists on purpose, and the
conformance suite and ``--plot`` read them as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

import attrs

from ..diagnostics import Diagnostic
from ..models.geometry import MultipleOf

if TYPE_CHECKING:  # views.py is ~13 ms of `kvproof check`'s start-up (see startup/plan.py)
    from .startup.views import ViewPlan

__all__ = [
    "Group", "Tensor", "Worker", "AssumedAlignment", "Alignment", "RequestStep", "PrefixHitProbe", "Raised",
    "SchedulerRefusal", "RequestOutcome", "WorkloadTotals", "Workload", "Requests", "Planned", "Refused", "BadInput",
    "SimulateResult",
]


@attrs.frozen
class Group:
    """One KV cache group of the plan (``groups[i]``)."""

    layers: tuple[str, ...]
    spec: str
    block_size: int
    page_size_bytes: int
    blocks_per_request_at_max_model_len: int
    is_eagle_group: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": list(self.layers),
            "spec": self.spec,
            "block_size": self.block_size,
            "page_size_bytes": self.page_size_bytes,
            "blocks_per_request_at_max_model_len": self.blocks_per_request_at_max_model_len,
            "is_eagle_group": self.is_eagle_group,
        }


@attrs.frozen
class Tensor:
    """One KV cache tensor of worker 0 (``kv_cache_tensors[i]``)."""

    size: int
    layers: tuple[str, ...]
    offset: int
    block_stride: int
    layer_stride: int

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "layers": list(self.layers), "offset": self.offset,
                "block_stride": self.block_stride, "layer_stride": self.layer_stride}


@attrs.frozen
class Worker:
    """One worker (pipeline stage) of the plan (``workers[i]``)."""

    layers: tuple[str, ...]
    available_memory_bytes: int
    bytes_per_block: int
    memory_needed_for_one_max_len_request_bytes: int
    num_blocks: int
    kv_tp_replicas: int

    def to_json(self) -> dict[str, Any]:
        return {
            "layers": list(self.layers),
            "available_memory_bytes": self.available_memory_bytes,
            "bytes_per_block": self.bytes_per_block,
            "memory_needed_for_one_max_len_request_bytes": self.memory_needed_for_one_max_len_request_bytes,
            "num_blocks": self.num_blocks,
            "kv_tp_replicas": self.kv_tp_replicas,
        }


@attrs.frozen
class AssumedAlignment:
    """What a geometry without ``platform_alignment`` was planned with (``platform_alignment.default``)."""

    platform: str
    backend: str
    backend_kernel_block_sizes: tuple[Union[int, MultipleOf], ...]
    from_layer: str
    num_kv_heads: int
    head_size: int
    model_dtype: str
    cache_dtype: str
    use_mla: bool
    mamba_prefill_checkpoint_alignment: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "backend": self.backend,
            "backend_kernel_block_sizes": [
                {"MultipleOf": size.base} if hasattr(size, "base") else size for size in self.backend_kernel_block_sizes
            ],
            "from_layer": self.from_layer,
            "num_kv_heads": self.num_kv_heads,
            "head_size": self.head_size,
            "model_dtype": self.model_dtype,
            "cache_dtype": self.cache_dtype,
            "use_mla": self.use_mla,
            "mamba_prefill_checkpoint_alignment": self.mamba_prefill_checkpoint_alignment,
        }


@attrs.frozen
class Alignment:
    """The platform alignment that ran (``platform_alignment``); ``default`` when it was assumed."""

    block_size: int
    mamba_block_size: int | None
    mamba_page_size_padded: int | None
    default: AssumedAlignment | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"block_size": self.block_size, "mamba_block_size": self.mamba_block_size,
                               "mamba_page_size_padded": self.mamba_page_size_padded}
        if self.default is not None:
            out["default"] = self.default.to_json()
        return out


@attrs.frozen
class RequestStep:
    """One scheduler step of the single request (``simulation[i]``)."""

    step: int
    phase: str  # prefill / decode
    num_computed_tokens: int
    num_new_tokens: int
    blocks_held: tuple[int, ...]
    row_length: tuple[int, ...]
    free_blocks: int

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "phase": self.phase, "num_computed_tokens": self.num_computed_tokens,
                "num_new_tokens": self.num_new_tokens, "blocks_held": list(self.blocks_held),
                "row_length": list(self.row_length), "free_blocks": self.free_blocks}


@attrs.frozen
class PrefixHitProbe:
    """The same prompt asked again after the single request (``prefix_hit_probe``; also the last
    element of ``simulation``)."""

    prompt_tokens: int
    hit_tokens: int
    hit_blocks: tuple[int, ...]
    phase = "prefix_hit_probe"

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "prompt_tokens": self.prompt_tokens, "hit_tokens": self.hit_tokens,
                "hit_blocks": list(self.hit_blocks)}


@attrs.frozen
class Raised:
    """What vLLM's managers or scheduler raise while serving, at the ported ``raise`` (``at``:
    kvproof file:line)."""

    type: str
    message: str
    at: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "at": self.at}


@attrs.frozen
class SchedulerRefusal:
    """vLLM refuses the workload's scheduler settings (``workload.refused``)."""

    type: str
    message: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "source": self.source}


@attrs.frozen
class RequestOutcome:
    """One workload request (``workload.requests[id]``); ``rejected`` is the input processor's text."""

    first_scheduled_step: int | None
    finished_step: int | None
    num_preemptions: int
    prefix_hit_tokens: int | None
    rejected: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"first_scheduled_step": self.first_scheduled_step, "finished_step": self.finished_step,
                               "num_preemptions": self.num_preemptions, "prefix_hit_tokens": self.prefix_hit_tokens}
        if self.rejected is not None:
            out["rejected"] = self.rejected
        return out


@attrs.frozen
class WorkloadTotals:
    steps: int
    request_steps: int
    preemptions: int
    finished: int

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "request_steps": self.request_steps, "preemptions": self.preemptions,
                "finished": self.finished}


@attrs.frozen
class Workload:
    """The workload through the scheduler port (``workload``); ``steps`` are the port's records."""

    steps: list[dict[str, Any]]
    requests: dict[str, RequestOutcome]
    totals: WorkloadTotals
    truncated: bool

    @classmethod
    def from_port(cls, doc: dict[str, Any]) -> Workload:
        """``simulate_workload``'s JSON (kvproof/sim/requests/scheduler.py)."""
        return cls(doc["steps"], {rid: RequestOutcome(**info) for rid, info in doc["requests"].items()},
                   WorkloadTotals(**doc["totals"]), doc["truncated"])

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "requests": {rid: info.to_json() for rid, info in self.requests.items()},
                "totals": self.totals.to_json(), "truncated": self.truncated}


@attrs.frozen
class Requests:
    """The ``simulate`` block's results (docs/requests.md). ``simulated`` says the geometry asked for
    the single request (``prompt_tokens``): then ``simulation`` and ``prefix_hit_probe`` are keys
    (null when it raised or was rejected). ``workload`` is None without ``requests``."""

    simulated: bool = False
    simulation: tuple[RequestStep | PrefixHitProbe, ...] | None = None
    prefix_hit_probe: PrefixHitProbe | None = None
    rejected: str | None = None
    truncated: bool = False
    stalled: bool = False
    raised: Raised | None = None
    workload: Workload | SchedulerRefusal | Raised | None = None

    @property
    def steps(self) -> tuple[RequestStep, ...]:
        """The single request's scheduler steps (without the probe)."""
        return tuple(s for s in self.simulation or () if isinstance(s, RequestStep))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.simulated:
            out["simulation"] = None if self.simulation is None else [s.to_json() for s in self.simulation]
            out["prefix_hit_probe"] = None if self.prefix_hit_probe is None else self.prefix_hit_probe.to_json()
            if self.raised is not None:
                out["simulation_raised"] = self.raised.to_json()
            if self.rejected:
                out["simulation_rejected"] = self.rejected
            if self.truncated:
                out["simulation_truncated"] = True
            if self.stalled:
                out["simulation_stalled"] = True
        if isinstance(self.workload, SchedulerRefusal):
            out["workload"] = {"refused": self.workload.to_json()}
        elif isinstance(self.workload, Raised):
            out["workload"] = {"raised": self.workload.to_json()}
        elif self.workload is not None:
            out["workload"] = self.workload.to_json()
        return out


@attrs.frozen
class Planned:
    """vLLM 0.33.0 starts: its plan (``status`` ok), and the requests over time when asked."""

    groups: tuple[Group, ...]
    bytes_per_block: int
    memory_needed_for_one_max_len_request_bytes: int
    num_blocks: int
    num_usable_blocks: int
    kv_cache_tensors: tuple[Tensor, ...]
    max_concurrency: float | None
    kv_cache_size_tokens: int
    per_group_blocks_per_request: tuple[int, ...]
    engine_cache_config_block_size: int
    scheduler_block_size: int
    hash_block_size: int
    cache_hit_alignment_tokens: int
    platform_alignment: Alignment | None
    kv_cache_layout: str
    mamba_cache_mode: str | None
    enable_prefix_caching: bool
    max_in_flight_tokens: int
    kv_tp_replicas: int
    workers: tuple[Worker, ...]
    max_model_len: int
    warnings: tuple[str, ...]
    worker_views: tuple[ViewPlan, ...] | None = None  # None: the geometry has no ``views``
    requests: Requests | None = None  # None: the geometry has no ``simulate`` block
    status = "ok"

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "groups": [group.to_json() for group in self.groups],
            "bytes_per_block": self.bytes_per_block,
            "memory_needed_for_one_max_len_request_bytes": self.memory_needed_for_one_max_len_request_bytes,
            "num_blocks": self.num_blocks,
            "num_usable_blocks": self.num_usable_blocks,
            "kv_cache_tensors": [tensor.to_json() for tensor in self.kv_cache_tensors],
            "max_concurrency": self.max_concurrency,
            "kv_cache_size_tokens": self.kv_cache_size_tokens,
            "per_group_blocks_per_request": list(self.per_group_blocks_per_request),
            "engine_cache_config_block_size": self.engine_cache_config_block_size,
            "scheduler_block_size": self.scheduler_block_size,
            "hash_block_size": self.hash_block_size,
            "cache_hit_alignment_tokens": self.cache_hit_alignment_tokens,
            "platform_alignment": None if self.platform_alignment is None else self.platform_alignment.to_json(),
            # beyond the documented keys (the conformance oracle reports the same ones)
            "kv_cache_layout": self.kv_cache_layout,
            "mamba_cache_mode": self.mamba_cache_mode,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_in_flight_tokens": self.max_in_flight_tokens,
            "kv_tp_replicas": self.kv_tp_replicas,
            "workers": [worker.to_json() for worker in self.workers],
            "max_model_len": self.max_model_len,
            "warnings": list(self.warnings),
        }
        if self.worker_views is not None:
            doc["worker_views"] = [view.to_json() for view in self.worker_views]
        if self.requests is not None:
            doc.update(self.requests.to_json())
        return doc


@attrs.frozen
class Refused:
    """vLLM 0.33.0 refuses to start (``status`` refused): its exact text, exception class and source."""

    message: str
    type: str
    source: str | None = None
    status = "refused"

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message, "type": self.type}
        if self.source:
            error["source"] = self.source
        return {"status": self.status, "error": error}


@attrs.frozen
class BadInput:
    """The geometry does not load (``status`` bad_input): the loader's diagnostics."""

    diagnostics: tuple[Diagnostic, ...]
    status = "bad_input"

    def to_json(self) -> dict[str, Any]:
        diagnostics = [d.to_json() for d in self.diagnostics]
        return {
            "status": self.status,
            "error": {"message": "; ".join(f"{d['path']}: {d['message']}" for d in diagnostics)},
            "diagnostics": diagnostics,
        }


#: What ``kvproof simulate`` reports for one geometry.
SimulateResult = Union[Planned, Refused, BadInput]
