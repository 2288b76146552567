"""``synthesize(geometry)``: the runtime records vLLM 0.33.0 would write for a geometry.

One worker record per worker (pipeline stage) and the scheduler record, in kvproof's record
format (docs/formats.md), from :func:`kvproof.sim.startup.plan`: the groups with every layer's spec and
state evidence, the one backing storage, the ``KVCacheTensor`` placement, every layer's views
(attention layers as vLLM views them, ``(B, H, N, C)`` in the layer's dtype, split into kernel
blocks as the backends require; Mamba layers as ``MambaBase.bind_kv_cache`` binds their state
tensors), the attention groups with their kernel block sizes and strides, and the scheduler's
block sizes, Mamba settings and start-up capacity.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs

from ..diagnostics import LOAD_SCHEMA, Diagnostic, InputError
from ..formulas.dtypes import dtype_size
from ..models import record as r
from ..models.codec import ABSENT
from ..models.geometry import Geometry, Views, present
from .startup.layout import layout_from_name
from .startup.plan import Plan, WorkerPlan, plan
from .startup.settings import DEFAULT_MAX_NUM_SEQS
from .startup.specs import CircularBufferSpec, KVCacheSpec, MambaSpec, UniformTypeKVCacheSpecs
from .startup.views import plan_views

__all__ = ["synthesize", "SynthesizedRecords"]

VLLM_VERSION = "0.33.0"


@attrs.frozen
class SynthesizedRecords:
    workers: list[r.WorkerRecord]
    scheduler: r.SchedulerRecord
    plan: Plan

    def files(self) -> list[tuple[str, Any]]:
        """``(file name, record)`` pairs, named as the probe names its records: every TP rank of
        every stage (the ranks of a stage hold the same cache, so each is its stage's record)."""
        tp = self.scheduler.resolved_config.tensor_parallel_size
        ranks = range(tp if isinstance(tp, int) and tp > 0 else 1)
        out = [(f"worker-dp0-tp{t}-pp{w.pp_rank}.json", attrs.evolve(w, tp_rank=t)) for w in self.workers for t in ranks]
        return out + [("scheduler-dp0.json", self.scheduler)]


def _opt(value: Any) -> Any:
    return ABSENT if value is None else value


def _int_or_absent(value: Any) -> Any:
    if value is None:
        return ABSENT
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else ABSENT
    return value


def layer_spec_record(spec: KVCacheSpec) -> r.LayerSpec:
    """A simulator spec as the probe records it (only the fields its class has)."""
    get = lambda name: getattr(spec, name, None)  # noqa: E731
    mamba = isinstance(spec, MambaSpec)
    alignment = spec.get_block_stride_alignment() if hasattr(spec, "get_block_stride_alignment") else None
    return r.LayerSpec(
        spec_type=type(spec).__name__,
        block_size=spec.block_size,
        page_size_bytes=spec.page_size_bytes,
        num_kv_heads=_opt(get("num_kv_heads")),
        head_size=_opt(get("head_size")),
        head_size_v=_opt(get("head_size_v")),
        dtype=_opt(None if mamba else get("dtype")),
        sliding_window=_opt(get("sliding_window")),
        attention_chunk_size=_opt(get("attention_chunk_size")),
        extra_retained_tokens=_opt(get("extra_retained_tokens")),
        tokens_per_state=ABSENT if mamba else _int_or_absent(get("tokens_per_state")),
        state_content_bytes=_opt(get("state_content_bytes")),
        page_size_padded=_opt(get("page_size_padded")),
        num_head_slots=_opt(get("num_head_slots")),
        cache_role=_opt(_enum_name(get("cache_role"))),
        cache_dtype_str=_opt(get("cache_dtype_str")),
        dcp_sharded=_opt(get("dcp_sharded")),
        block_stride_alignment_bytes=_opt(alignment),
        shapes=[list(s) for s in spec.shapes] if mamba else ABSENT,
        dtypes=list(spec.dtypes) if mamba else ABSENT,
        mamba_type=_opt(_enum_name(get("mamba_type"))) if mamba else ABSENT,
        mamba_cache_mode=_opt(get("mamba_cache_mode")) if mamba else ABSENT,
        num_speculative_blocks=_opt(get("num_speculative_blocks")) if mamba else ABSENT,
        num_prefill_checkpoint_blocks=get("num_prefill_checkpoint_blocks") if mamba else ABSENT,
        prefill_checkpoint_alignment=get("prefill_checkpoint_alignment") if mamba else ABSENT,
    )


def _enum_name(value: Any) -> Any:
    if value is None or isinstance(value, (str, int)):
        return value
    return getattr(value, "name", str(value))


def _state(spec: KVCacheSpec) -> Any:
    if isinstance(spec, MambaSpec):
        return r.StateEvidence(
            blocks_per_request=1 + spec.num_speculative_blocks, mamba_cache_mode=spec.mamba_cache_mode,
            num_speculative_blocks=spec.num_speculative_blocks,
            num_prefill_checkpoint_blocks=spec.num_prefill_checkpoint_blocks,
            prefill_checkpoint_alignment=spec.prefill_checkpoint_alignment,
        )
    if isinstance(spec, CircularBufferSpec):
        return r.StateEvidence(blocks_per_request=1)
    return ABSENT


def _first(spec: KVCacheSpec) -> KVCacheSpec:
    return next(iter(spec.kv_cache_specs.values())) if isinstance(spec, UniformTypeKVCacheSpecs) else spec


def _worker_groups(worker: WorkerPlan) -> list[r.WorkerGroup]:
    out = []
    for group in worker.groups:
        spec = group.kv_cache_spec
        uniform = isinstance(spec, UniformTypeKVCacheSpecs)
        first = _first(spec)
        specs = {name: (spec.kv_cache_specs[name] if uniform else spec) for name in group.layer_names}
        out.append(r.WorkerGroup(
            layer_names=list(group.layer_names),
            spec_type="UniformTypeKVCacheSpecs" if uniform else type(spec).__name__,
            block_size_tokens=spec.block_size,
            page_size_bytes=spec.page_size_bytes,
            kind="state" if isinstance(first, (MambaSpec, CircularBufferSpec)) else "attention",
            layer_specs={name: layer_spec_record(s) for name, s in specs.items()},
            state=_state(first),
        ))
    return out


def _views(geometry: Geometry, result: Plan, worker: WorkerPlan) -> tuple[dict, list]:
    """Every layer's views and the attention groups of one worker."""
    declared = geometry.views if present(geometry.views) else Views()
    full = attrs.evolve(geometry, views=attrs.evolve(declared, num_blocks=worker.num_blocks))
    view_plans = plan_views(full, attrs.evolve(result, workers=[worker]), _layout(result))
    tensors = {name: (tensor, position) for tensor in worker.tensors for position, name in enumerate(tensor.layers)}
    groups = worker.groups
    layer_views: dict[str, list[r.LayerView]] = {}
    attention_groups = []
    for view in view_plans:
        element = dtype_size(view.dtype) if view.dtype != "int8" else 1
        attention_groups.append(r.AttentionGroup(
            kv_cache_group_id=view.kv_cache_group, layer_names=list(view.layers),
            kernel_block_size=view.kernel_block_size, kernel_block_stride=view.kernel_block_stride,
            backend=view.backend,
        ))
        for name in view.layers:
            tensor, position = tensors[name]
            spec = _layer_spec(groups[view.kv_cache_group], name)
            if isinstance(spec, MambaSpec):
                layer_views[name] = _mamba_views(spec, tensor, position, worker.num_blocks)
                continue
            layer_views[name] = [r.LayerView(
                storage_id="storage-0", storage_offset_bytes=tensor.offset + position * tensor.layer_stride,
                shape=list(view.shape), stride_bytes=[s * element for s in view.strides], element_size_bytes=element,
                block_axis=0, kernel_block_size_tokens=view.kernel_block_size, kernel_block_stride=view.kernel_block_stride,
                role="kv",
            )]
    for name, (tensor, position) in tensors.items():  # Mamba layers no attention group listed
        if name not in layer_views:
            group = next(g for g in groups if name in g.layer_names)
            spec = _layer_spec(group, name)
            if isinstance(spec, MambaSpec):
                layer_views[name] = _mamba_views(spec, tensor, position, worker.num_blocks)
    return layer_views, attention_groups


def _layer_spec(group, name: str) -> KVCacheSpec:
    spec = group.kv_cache_spec
    return spec.kv_cache_specs[name] if isinstance(spec, UniformTypeKVCacheSpecs) else spec


def _mamba_views(spec: MambaSpec, tensor, position: int, num_blocks: int) -> list[r.LayerView]:
    """``MambaBase.bind_kv_cache``: the state tensors side by side at the start of the page, each
    ``(num_blocks, *shape)`` in its dtype with the block stride of the allocation."""
    base = tensor.offset + position * tensor.layer_stride
    out, inner = [], 0
    for shape, dtype in zip(spec.shapes, spec.dtypes):
        element = dtype_size(dtype)
        dense, strides = element, []
        for size in reversed(shape):
            strides.append(dense)
            dense *= size
        out.append(r.LayerView(
            storage_id="storage-0", storage_offset_bytes=base + inner, shape=[num_blocks, *shape],
            stride_bytes=[tensor.block_stride, *reversed(strides)], element_size_bytes=element, block_axis=0,
            kernel_block_size_tokens=spec.block_size, kernel_block_stride=0, role="state",
        ))
        inner += dense
    return out


def _layout(result: Plan):
    return layout_from_name(result.layout)


def _max_num_seqs(settings) -> int:
    """The engine's ``max_num_seqs``: the geometry's, else EngineArgs' default capped at
    ``max_num_batched_tokens`` (as the scheduler port, ``SchedulerState.from_plan``)."""
    value = getattr(settings, "max_num_seqs", None)
    return value if value is not None else min(DEFAULT_MAX_NUM_SEQS, settings.max_num_batched_tokens)


def _resolved(result: Plan, mamba_block_size: Any) -> r.ResolvedConfig:
    s = result.settings
    return r.ResolvedConfig(
        max_model_len=result.max_model_len, block_size=result.engine_cache_config_block_size,
        enable_prefix_caching=s.enable_prefix_caching, max_num_batched_tokens=s.max_num_batched_tokens,
        mamba_cache_mode=s.mamba_cache_mode if s.has_mamba else None, mamba_block_size=_opt(mamba_block_size),
        prefix_match_unit=s.prefix_match_unit, async_scheduling=s.async_scheduling,
        max_num_seqs=_max_num_seqs(s),
        max_in_flight_tokens=s.max_in_flight_tokens, num_speculative_tokens=s.num_speculative_tokens,
        tensor_parallel_size=s.tp, pipeline_parallel_size=s.pipeline_parallel_size, decode_context_parallel_size=s.dcp,
        num_gpu_blocks_override=_opt(s.num_gpu_blocks_override),
        prefix_cache_retention_interval=_opt(s.prefix_cache_retention_interval),
    )


#: Why an attention-free geometry has no records (``synthesize`` refuses it as bad input).
ATTENTION_FREE = (
    "the geometry has no KV cache layers: vLLM 0.33.0 starts such an attention-free model without a KV "
    "cache (vllm/v1/engine/core.py:298-314 gives it no KV cache memory) and never computes its capacity "
    "(core.py:339-352 calls update_kv_cache_capacity only when there are KV cache groups), so it logs no "
    "kv_cache_max_concurrency and there is no record kvproof checks (SU001 needs one); "
    "kvproof simulate plans it"
)


def synthesize(geometry: Geometry) -> SynthesizedRecords:
    """The records of a geometry; raises :class:`kvproof.sim.PlanRefusal` when vLLM would not start,
    and :class:`~kvproof.diagnostics.InputError` for a geometry whose records kvproof's format
    cannot hold (an attention-free model: :data:`ATTENTION_FREE`), so every record written is one
    ``kvproof check`` accepts."""
    result = plan(geometry)
    if result.max_concurrency is None:
        raise InputError([Diagnostic(LOAD_SCHEMA, "$.layers", ATTENTION_FREE)])
    s = result.settings
    runtime = r.Runtime("vllm", VLLM_VERSION)
    evidence = r.PrefixCachingEvidence(
        enable_prefix_caching=s.enable_prefix_caching, mamba_cache_mode=s.mamba_cache_mode if s.has_mamba else None,
        hash_block_size=result.hash_block_size, scheduler_block_size=result.scheduler_block_size,
        prefix_match_unit=s.prefix_match_unit,
    )
    workers = []
    for worker in result.workers:
        views, attention_groups = _views(geometry, result, worker)
        size = worker.tensors[0].size if worker.tensors else worker.num_blocks * worker.bytes_per_block
        workers.append(r.WorkerRecord(
            schema_version="kvproof/record/v1", kind="worker", dp_rank=0, tp_rank=0, pp_rank=worker.index,
            runtime=runtime, resolved_config=_resolved(result, s.mamba_block_size), prefix_caching=evidence,
            cache=r.WorkerCache(
                num_blocks=worker.num_blocks, groups=_worker_groups(worker),
                storages=[r.Storage("storage-0", size)],
                tensor_allocations=[
                    r.TensorAllocation("storage-0", t.size, list(t.layers), t.offset, t.block_stride, t.layer_stride)
                    for t in worker.tensors
                ],
                layer_tensors=views, kv_cache_layout=result.layout, attention_groups=attention_groups,
            ),
        ))
    # generate_scheduler_kv_cache_config: a copy of worker 0's config, every uniform-type group
    # replaced by its first layer spec (kv_cache_utils.py:1096-1117).
    scheduler_groups = []
    for group in result.workers[0].groups:
        spec = group.kv_cache_spec
        if isinstance(spec, UniformTypeKVCacheSpecs) and spec.kv_cache_specs:
            spec = next(iter(spec.kv_cache_specs.values()))
        scheduler_groups.append(r.SchedulerGroup(
            layer_names=list(group.layer_names), spec_type=type(spec).__name__, block_size_tokens=spec.block_size,
            page_size_bytes=spec.page_size_bytes, spec=layer_spec_record(spec),
        ))
    scheduler = r.SchedulerRecord(
        schema_version="kvproof/record/v1", kind="scheduler", dp_rank=0, runtime=runtime,
        resolved_config=_resolved(result, s.mamba_block_size), prefix_caching=evidence,
        cache=r.SchedulerCache(
            num_blocks=result.num_blocks, groups=scheduler_groups, block_size=result.engine_cache_config_block_size,
            scheduler_block_size=result.scheduler_block_size, hash_block_size=result.hash_block_size,
            mamba_cache_mode=s.mamba_cache_mode if s.has_mamba else None, mamba_block_size=_opt(s.mamba_block_size),
            cache_hit_alignment_tokens=result.cache_hit_alignment_tokens,
            kv_cache_max_concurrency=result.max_concurrency if result.max_concurrency is not None else ABSENT,
            kv_cache_size_tokens=result.kv_cache_size_tokens if result.kv_cache_size_tokens is not None else ABSENT,
        ),
    )
    return SynthesizedRecords(workers, scheduler, result)
