"""``plan(geometry) -> Plan``: vLLM 0.33.0's start-up KV cache planning, end to end.

The order is vLLM's (``EngineCore._initialize_kv_caches``, ``v1/engine/core.py:251-371``, after
``VllmConfig`` construction and ``Platform.update_block_size_for_backend``):

1. engine settings, Mamba mode and block size, platform hybrid alignment (B.2);
2. the specs every worker reports; non-causal layers disable prefix caching (core.py:266-280);
3. ``resolve_kv_cache_layout`` (B.9);
4. ``get_global_kv_cache_groups`` (B.1);
5. ``get_kv_cache_configs`` (B.3, B.4): per worker bytes per block, ``num_gpu_blocks_override``,
   null-block reserve, auto-fit, memory check, ``num_blocks``, tensors, the cross-worker minimum;
6. the scheduler's config, the engine block size, capacity and concurrency (B.5, B.6);
7. ``resolve_kv_cache_block_sizes`` and the cache-hit alignment (B.7);
8. optional worker views (D): the workers bind their caches before the scheduler exists;
9. the scheduler's KV cache coordinator and manager checks (B.8).

A start-up refusal raises :class:`kvproof.sim.PlanRefusal` with vLLM's exact text.
"""

from __future__ import annotations

import math
from functools import reduce

import attrs

from ...models.geometry import ABSENT, Geometry, PlatformAlignment, canonical_dtype, expand_layers, present
from ...formulas import concurrency as conc
from .block_sizes import (
    engine_cache_block_size,
    resolve_cache_hit_alignment_tokens,
    resolve_kv_cache_block_sizes,
)
from .grouping import KVCacheGroupSpec, get_global_kv_cache_groups, per_layer_spec
from .layout import DEFAULT_LAYOUT_PREFERENCE, get_supported_kv_cache_layouts, layout_from_name, resolve_kv_cache_layout
from .memory_check import auto_fit_max_model_len, check_enough_kv_cache_memory
from .platform import (
    AlignmentResult,
    DefaultAlignment,
    align_hybrid_block_size,
    check_aligned_block_size,
    default_platform_alignment,
    preferred_block_size,
)
from .pool import KVCacheConfig, KVCacheTensor, get_kv_cache_bytes_per_block, get_kv_cache_config_from_groups, \
    project_groups_to_worker
from .refusals import VllmAssertionError, VllmError, VllmTypeError, VllmValueError, as_refusal
from .settings import EngineSettings, build_layer_spec, mamba_state, resolve_settings
from .specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    SpecContext,
    UniformTypeKVCacheSpecs,
    iter_layer_specs,
    manager_class_name,
    uniform_type_base_spec,
)

__all__ = ["Plan", "PlannedGroup", "WorkerPlan", "plan", "spec_kind"]


@attrs.frozen
class PlannedGroup:
    """One KV cache group, in vLLM's order."""

    index: int
    layer_names: list[str]
    spec: KVCacheSpec  # the group spec: a merged layer spec or a UniformTypeKVCacheSpecs
    spec_class: str
    layer_specs: dict[str, KVCacheSpec]  # every layer's own spec
    scheduler_spec: KVCacheSpec  # what the scheduler sees (the first layer spec of a uniform-type group)
    block_size: int
    page_size_bytes: int
    blocks_per_request: int  # at max_model_len: cdiv(max_memory_usage_bytes, page_size_bytes)
    block_table_width: int  # max_num_blocks_per_req(max_model_len), before block-table rounding
    manager: str
    kind: str  # get_kv_cache_spec_kind
    prefix_cacheable: bool
    is_eagle_group: bool
    padding_layers: int  # layers short of the group size (uniform-page hybrid grouping)


@attrs.frozen
class WorkerPlan:
    """One worker's ``KVCacheConfig`` and the numbers that produced it."""

    index: int
    layer_names: list[str]
    groups: list[KVCacheGroupSpec]  # the global groups projected onto this worker
    bytes_per_block: int
    available_memory_bytes: int  # as given
    effective_memory_bytes: int  # num_gpu_blocks_override * bytes_per_block when the override is set
    check_memory_bytes: int  # minus the null block
    memory_needed_bytes: int  # what the start-up check compared (0 without groups)
    own_num_blocks: int  # before the cross-worker minimum
    num_blocks: int
    tensors: list[KVCacheTensor]
    kv_tp_replicas: int


@attrs.frozen
class Plan:
    """Everything vLLM computes at start-up for a geometry."""

    settings: EngineSettings
    layout: str
    grouping_path: str
    layer_specs: dict[str, KVCacheSpec]  # per layer, as grouped (after promotion / unification)
    groups: list[PlannedGroup]
    workers: list[WorkerPlan]
    bytes_per_block: int  # worker 0 (the scheduler's config)
    memory_needed_bytes: int  # worker 0
    num_blocks: int
    num_usable_blocks: int
    tensors: list[KVCacheTensor]  # worker 0
    per_group_blocks_per_request: list[int]
    max_concurrency: float | None  # None for an attention-free model
    kv_cache_size_tokens: int | None
    engine_cache_config_block_size: int
    scheduler_block_size: int
    hash_block_size: int
    cache_hit_alignment_tokens: int
    platform_alignment: AlignmentResult | None  # None: no alignment ran
    max_model_len: int  # after auto-fit
    warnings: list[str]
    views: list = attrs.field(factory=list)  # ViewPlan per attention group of worker 0
    has_views: bool = False  # the geometry asked for views
    kv_cache_config: KVCacheConfig | None = None  # worker 0
    # what was assumed when the geometry has no platform_alignment block (DEFAULT_PLATFORM)
    default_platform_alignment: DefaultAlignment | None = None


def spec_kind(spec: KVCacheSpec) -> str:
    """``get_kv_cache_spec_kind`` (kv_cache_interface.py:1419-1459)."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        kinds = {spec_kind(s) for s in spec.kv_cache_specs.values()}
        if len(kinds) == 1:
            return next(iter(kinds))
        bases = {uniform_type_base_spec(s) for s in spec.kv_cache_specs.values()}
        if len(bases) == 1 and next(iter(bases)) is FullAttentionSpec:
            return "full_attention"
        return "unknown"
    for cls, kind in (
        (SlidingWindowMLASpec, "sliding_window_mla"),
        (MLAAttentionSpec, "mla_attention"),
        (SinkFullAttentionSpec, "sink_full_attention"),
        (FullAttentionSpec, "full_attention"),
        (ChunkedLocalAttentionSpec, "chunked_local_attention"),
        (SlidingWindowSpec, "sliding_window"),
        (MambaSpec, "mamba"),
        (EncoderOnlyAttentionSpec, "encoder_only_attention"),
        (CrossAttentionSpec, "cross_attention"),
    ):
        if isinstance(spec, cls):
            return kind
    return "unknown"


def _scheduler_spec(spec: KVCacheSpec) -> KVCacheSpec:
    """``generate_scheduler_kv_cache_config`` (kv_cache_utils.py:1096-1117)."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return next(iter(spec.kv_cache_specs.values()))
    return spec


def _layer_tp_replicas(spec: KVCacheSpec, tp: int, dcp: int) -> int:
    """``_layer_tp_replicas`` (kv_cache_planning.py:1233-1238)."""
    if not isinstance(spec, AttentionSpec) or spec.max_tp_shards is None:
        return 1
    if spec.dcp_sharded and dcp > 1:
        return 1
    return max(1, tp // spec.max_tp_shards)


def kv_cache_groups_tp_replicas(groups: list[KVCacheGroupSpec], tp: int, dcp: int) -> int:
    """``kv_cache_groups_tp_replicas`` (kv_cache_planning.py:1241-1250)."""
    specs = [spec for g in groups for spec in iter_layer_specs(g.kv_cache_spec)]
    if not specs:
        return 1
    return reduce(math.gcd, (_layer_tp_replicas(s, tp, dcp) for s in specs), tp)


def _model_dtype(geometry: Geometry, layers) -> str:
    """``model_config.dtype``: the platform block's ``model_dtype`` (the default platform's, derived
    from a layer, when the block is absent), else bfloat16."""
    config = geometry.platform_alignment
    if config is ABSENT:
        default = default_platform_alignment(layers)
        config = default.config if default is not None else None
    return canonical_dtype(config.model_dtype) if config is not None and present(config.model_dtype) else "bfloat16"


def _platform_alignment(
    geometry: Geometry, layers, settings: EngineSettings
) -> tuple[EngineSettings, AlignmentResult | None, DefaultAlignment | None]:
    """``Platform.update_block_size_for_backend`` (platforms/interface.py:749-794), which vLLM runs
    on every GPU start-up: with the backends the geometry describes (``platform_alignment``), with
    those of :data:`DEFAULT_PLATFORM` when the block is absent, not at all for ``null``."""
    if geometry.platform_alignment is None:  # the geometry opts out
        return settings, None, None
    default = None
    if geometry.platform_alignment is ABSENT:
        default = default_platform_alignment(layers)
        if default is None:  # no attention layer: vLLM finds no backend and aligns nothing
            return settings, None, None
        config = default.config
    else:
        config = geometry.platform_alignment
    settings, result = _run_alignment(geometry, layers, settings, config)
    return settings, result, default


def _run_alignment(geometry: Geometry, layers, settings: EngineSettings,
                   config: PlatformAlignment) -> tuple[EngineSettings, AlignmentResult]:
    unchanged = AlignmentResult(settings.block_size, settings.mamba_block_size, settings.mamba_page_size_padded, 0, 0, 0)
    # _find_non_ssm_backends: a model without attention layers has none -> nothing happens.
    if not any(layer.entry.spec != "MambaSpec" for layer in layers):
        return settings, unchanged
    if not present(geometry.block_size):  # phase 1, skipped for a user --block-size
        settings = attrs.evolve(settings, block_size=preferred_block_size(config))
    pre_block_size = settings.block_size
    result = None
    if settings.has_mamba:  # model_config.is_hybrid: phase 2
        mamba_layers = [layer for layer in layers if layer.entry.spec == "MambaSpec"]
        states = [mamba_state(layer, settings) for layer in mamba_layers]  # ReplaySSM rings included
        shapes = {shape for shape, _ in states}
        dtypes = {dtype for _, dtype in states}
        if len(shapes) == 1 and len(dtypes) == 1:  # get_mamba_state_shape/dtype_from_config (1053-1061)
            mamba_page = MambaSpec(block_size=-1, shapes=next(iter(shapes)), dtypes=next(iter(dtypes))).page_size_bytes
        else:  # get_mamba_specs_from_config: the layers' own specs (1047-1052)
            mamba_page = max(build_layer_spec(layer, settings).page_size_bytes for layer in mamba_layers)
        result = align_hybrid_block_size(
            config, settings.block_size, settings.mamba_cache_mode, settings.mamba_block_size,
            settings.mamba_page_size_padded, mamba_page,
        )
        settings = attrs.evolve(
            settings,
            block_size=result.block_size,
            mamba_block_size=result.mamba_block_size,
            mamba_page_size_padded=result.mamba_page_size_padded,
        )
    check_aligned_block_size(config, settings.block_size, pre_block_size)
    if result is None:
        result = AlignmentResult(settings.block_size, settings.mamba_block_size, settings.mamba_page_size_padded, 0, 0, 0)
    return settings, result


def _supported_layout_names(geometry: Geometry) -> list[str]:
    declared = geometry.supported_kv_cache_layouts
    if not present(declared):
        return [layout.name for layout in DEFAULT_LAYOUT_PREFERENCE]
    if all(isinstance(item, str) for item in declared):
        return [layout_from_name(name).name for name in declared]
    declarations = [None if item is None else [layout_from_name(n) for n in item] for item in declared]
    return [layout.name for layout in get_supported_kv_cache_layouts(declarations)]


def _coordinator_checks(
    groups: list[KVCacheGroupSpec], settings: EngineSettings, scheduler_block_size: int, hash_block_size: int,
    needs_zeroing: bool,
) -> None:
    """The scheduler's ``KVCacheCoordinator`` construction (kv_cache_coordinator.py:80-192,
    560-690) and its managers (single_type_kv_cache_manager.py)."""
    enable_caching = settings.enable_prefix_caching
    specs = [g.kv_cache_spec for g in groups]  # scheduler specs
    if not (scheduler_block_size % hash_block_size == 0 and all(scheduler_block_size % s.block_size == 0 for s in specs)):
        raise VllmAssertionError("", "v1/core/kv_cache_coordinator.py:113-116")
    eagle_ids = {i for i, g in enumerate(groups) if g.is_eagle_group}
    # The scheduler passes use_eagle = use_eagle_block_drop, cleared when lookahead block hashes
    # are on (v1/core/sched/scheduler.py:330-356); only then do unflagged groups all count.
    if settings.use_eagle_block_drop and not settings.num_hash_lookahead_tokens and not eagle_ids:
        eagle_ids = set(range(len(groups)))
    lookahead = settings.num_prefill_lookahead_tokens
    if enable_caching and eagle_ids and scheduler_block_size < lookahead:
        raise VllmValueError(
            f"Multi-module MTP with prefix caching requires scheduler_block_size"
            f" (={scheduler_block_size}) >= num_speculative_tokens"
            f" (={lookahead}).",
            "v1/core/kv_cache_coordinator.py:150-159",
        )
    for spec in specs:  # get_manager_for_kv_cache_spec, in group order
        manager = manager_class_name(spec)
        if manager == "SinkFullAttentionManager":  # S8
            raise VllmTypeError(
                "SinkFullAttentionManager.__init__() got an unexpected keyword argument 'needs_kv_cache_zeroing'",
                "v1/core/single_type_kv_cache_manager.py:2199-2218",
            )
        if manager == "MambaManager" and not (spec.mamba_cache_mode == "align" or not enable_caching):
            raise VllmAssertionError(
                "Mamba prefix caching requires mamba_cache_mode='align'", "v1/core/single_type_kv_cache_manager.py:1442-1444"
            )
    retention = settings.prefix_cache_retention_interval
    if retention is not None:  # _validate_prefix_cache_retention_interval (33-62)
        if not any(isinstance(s, (SlidingWindowSpec, MambaSpec)) for s in specs):
            if retention != 0:
                raise VllmValueError(
                    "prefix_cache_retention_interval is set but this model has "
                    "no sliding-window or Mamba KV cache group, so retention has no "
                    "effect. Set it to 0 (it only applies to sliding-window and Mamba "
                    "attention).",
                    "v1/core/kv_cache_coordinator.py:47-53",
                )
        elif retention < 0 or retention % scheduler_block_size != 0:
            raise VllmValueError(
                f"prefix_cache_retention_interval ({retention}) "
                "must be non-negative and a multiple of scheduler_block_size "
                f"({scheduler_block_size}).",
                "v1/core/kv_cache_coordinator.py:55-62",
            )
    if not enable_caching:
        return
    dcp = settings.dcp
    if len(groups) == 1:  # UnitaryKVCacheCoordinator (570-578)
        block_size = specs[0].block_size * (dcp if specs[0].dcp_sharded else 1)
        if hash_block_size != block_size:
            raise VllmAssertionError("UnitaryKVCacheCoordinator assumes hash_block_size == block_size")
        return
    cacheable = [s.block_size * (dcp if s.dcp_sharded else 1) for s in specs if s.prefix_cacheable]
    if not all(bs % hash_block_size == 0 for bs in cacheable):  # HybridKVCacheCoordinator (663-676)
        raise VllmAssertionError(
            "Each KV cache group's real block_size must be divisible by "
            f"hash_block_size. block_sizes={cacheable}, "
            f"hash_block_size={hash_block_size}"
        )
    if dcp > 1:
        for spec in specs:
            if not (isinstance(spec, FullAttentionSpec) or not spec.dcp_sharded):
                raise VllmAssertionError(
                    "DCP with hybrid KV cache layouts only supports "
                    "full-attention, Mamba, and replicated draft groups, got: "
                    f"{type(spec).__name__}."
                )


def _needs_zeroing(groups: list[KVCacheGroupSpec]) -> bool:
    """``KVCacheConfig.needs_kv_cache_zeroing`` (kv_cache_interface.py:1629-1660)."""
    specs = [s for g in groups for s in iter_layer_specs(g.kv_cache_spec)]
    has_mamba = any(isinstance(s, MambaSpec) for s in specs)
    precisions = {(s.dtype, s.kv_quant_mode) for s in specs if isinstance(s, AttentionSpec)}
    return has_mamba or len(precisions) > 1


def plan(geometry: Geometry) -> Plan:
    """vLLM 0.33.0's start-up KV cache plan for ``geometry``; raises :class:`PlanRefusal`."""
    try:
        return _plan(geometry)
    except (VllmError, ZeroDivisionError) as exc:  # vLLM's int arithmetic divides by a zero page too
        raise as_refusal(exc) from None


def _plan(geometry: Geometry) -> Plan:
    layers = expand_layers(geometry)
    settings = resolve_settings(geometry, layers)
    if settings.replay_ring is not None:  # the rings' activation dtype is model_config.dtype
        settings = attrs.evolve(settings, replay_ring=attrs.evolve(settings.replay_ring, model_dtype=_model_dtype(geometry, layers)))
    settings, alignment, default_alignment = _platform_alignment(geometry, layers, settings)

    # A spec depends on the layer's entry and the settings alone: a range's layers report equal
    # (frozen) specs, built once per entry.
    built: dict[int, KVCacheSpec] = {}
    specs = {}
    for layer in layers:
        spec = built.get(id(layer.entry))
        if spec is None:
            spec = built[id(layer.entry)] = build_layer_spec(layer, settings)
        specs[layer.name] = spec
    order = list(specs)
    if present(geometry.workers):
        worker_layers = [[name for name in order if name in set(names)] for names in geometry.workers]
    else:
        worker_layers = [order]
    worker_specs = [{name: specs[name] for name in names} for names in worker_layers]
    # Profiling is replaced by the geometry's memory (core.py:303-318); without it only
    # num_gpu_blocks_override sizes the pool.
    memory = geometry.available_memory_bytes if present(geometry.available_memory_bytes) else 0
    available = list(memory) if isinstance(memory, list) else [memory] * len(worker_layers)
    if not any(worker_layers):  # an attention-free model is given no KV cache memory (core.py:318-320)
        available = [0] * len(worker_layers)

    layout = resolve_kv_cache_layout(
        geometry.kv_cache_layout if present(geometry.kv_cache_layout) else None,
        _supported_layout_names(geometry),
        [spec for ws in worker_specs for spec in ws.values()],
        len(worker_layers),
    )
    grouping = get_global_kv_cache_groups(
        worker_specs,
        layout,
        disable_hybrid_kv_cache_manager=settings.disable_hybrid_kv_cache_manager,
        num_prefill_lookahead_tokens=settings.num_prefill_lookahead_tokens,
        use_eagle_block_drop=settings.use_eagle_block_drop,
    )
    global_groups = grouping.groups

    ctx = SpecContext(
        max_model_len=settings.max_model_len,
        dcp=settings.dcp,
        in_flight_tokens=settings.max_in_flight_tokens,
        mamba_cache_mode=settings.mamba_cache_mode,
        max_num_encoder_input_tokens=settings.max_num_encoder_input_tokens,
    )

    # get_kv_cache_configs (kv_cache_planning.py:1461-1604)
    projected = [project_groups_to_worker(global_groups, set(names)) for names in worker_layers]
    bytes_per_block = []
    for groups in projected:
        if groups:
            # The builder probes a one-block placement (validate_kv_cache_layout and the tensor
            # placement run there): _pool_bytes_per_block_from_builder, 265-304.
            probe = get_kv_cache_config_from_groups(groups, layout, get_kv_cache_bytes_per_block(groups, layout), None)
            bytes_per_block.append(probe.bytes_per_block)
        else:
            bytes_per_block.append(0)
    override = settings.num_gpu_blocks_override
    effective = [
        override * bpb if (override is not None and groups) else avail
        for groups, bpb, avail in zip(projected, bytes_per_block, available)
    ]
    check_memory = [avail - bpb if groups else avail for groups, bpb, avail in zip(projected, bytes_per_block, effective)]
    if settings.original_max_model_len == -1:
        new_len = auto_fit_max_model_len(projected, bytes_per_block, check_memory, ctx)
        if new_len != settings.max_model_len:
            settings = attrs.evolve(settings, max_model_len=new_len)
            ctx = ctx.with_max_model_len(new_len)
    needed = []
    for groups, bpb, check in zip(projected, bytes_per_block, check_memory):
        needed.append(check_enough_kv_cache_memory(groups, bpb, ctx, check) if groups else 0)

    configs = []
    own_blocks = []
    for groups, bpb, avail in zip(projected, bytes_per_block, effective):
        num_blocks = avail // bpb if groups else 1
        own_blocks.append(num_blocks)
        configs.append(get_kv_cache_config_from_groups(groups, layout, num_blocks * bpb, override))
    min_blocks = min(config.num_blocks for config in configs)
    for i, config in enumerate(configs):
        if config.num_blocks != min_blocks:
            configs[i] = get_kv_cache_config_from_groups(
                config.kv_cache_groups, layout, min_blocks * bytes_per_block[i], override
            )
            if configs[i].num_blocks != min_blocks:  # the override pins it again
                configs[i].num_blocks = min_blocks
    workers = [
        WorkerPlan(
            index=i,
            layer_names=worker_layers[i],
            groups=projected[i],
            bytes_per_block=bytes_per_block[i],
            available_memory_bytes=available[i],
            effective_memory_bytes=effective[i],
            check_memory_bytes=check_memory[i],
            memory_needed_bytes=needed[i],
            own_num_blocks=own_blocks[i],
            num_blocks=configs[i].num_blocks,
            tensors=configs[i].kv_cache_tensors,
            kv_tp_replicas=kv_cache_groups_tp_replicas(configs[i].kv_cache_groups, settings.tp, settings.dcp),
        )
        for i in range(len(configs))
    ]

    # The scheduler's config: worker 0's, uniform-type groups replaced by their first layer spec.
    scheduler_groups = [
        KVCacheGroupSpec(g.layer_names, _scheduler_spec(g.kv_cache_spec), g.is_eagle_group)
        for g in configs[0].kv_cache_groups
    ]
    num_blocks = configs[0].num_blocks
    engine_block_size = engine_cache_block_size(scheduler_groups, settings.block_size)
    per_group = [g.kv_cache_spec.blocks_per_request(ctx) for g in scheduler_groups]
    if scheduler_groups:
        concurrency = conc.max_concurrency(num_blocks, per_group)
        size_tokens = conc.kv_cache_size_tokens(concurrency, settings.max_model_len)
    else:  # attention-free: the engine never computes a capacity
        concurrency, size_tokens = None, None
    scheduler_bs, hash_bs = resolve_kv_cache_block_sizes(
        scheduler_groups,
        engine_block_size,
        dcp=settings.dcp,
        enable_prefix_caching=settings.enable_prefix_caching,
        kv_connector=settings.kv_connector,
        prefix_match_unit=settings.prefix_match_unit,
    )
    alignment_tokens = resolve_cache_hit_alignment_tokens(
        scheduler_groups,
        enable_prefix_caching=settings.enable_prefix_caching,
        dcp=settings.dcp,
        scheduler_block_size=scheduler_bs,
        hash_block_size=hash_bs,
    )

    planned = []
    for i, group in enumerate(global_groups):
        spec = group.kv_cache_spec
        layer_specs = {name: per_layer_spec(group, name) if isinstance(spec, UniformTypeKVCacheSpecs)
                       else grouping.layer_specs.get(name, spec) for name in group.layer_names}
        planned.append(PlannedGroup(
            index=i,
            layer_names=list(group.layer_names),
            spec=spec,
            spec_class=type(spec).__name__,
            layer_specs=layer_specs,
            scheduler_spec=_scheduler_spec(spec),
            block_size=spec.block_size,
            page_size_bytes=spec.page_size_bytes,
            blocks_per_request=spec.blocks_per_request(ctx),
            block_table_width=spec.max_num_blocks_per_req(ctx, settings.max_model_len),
            manager=manager_class_name(_scheduler_spec(spec)) or "",
            kind=spec_kind(spec),
            prefix_cacheable=spec.prefix_cacheable,
            is_eagle_group=group.is_eagle_group,
            padding_layers=grouping.padding_slots[i] if i < len(grouping.padding_slots) else 0,
        ))

    result = Plan(
        settings=settings,
        layout=layout.name,
        grouping_path=grouping.path,
        layer_specs=grouping.layer_specs,
        groups=planned,
        workers=workers,
        bytes_per_block=bytes_per_block[0],
        memory_needed_bytes=needed[0],
        num_blocks=num_blocks,
        num_usable_blocks=num_blocks - 1,
        tensors=configs[0].kv_cache_tensors,
        per_group_blocks_per_request=per_group,
        max_concurrency=concurrency,
        kv_cache_size_tokens=size_tokens,
        engine_cache_config_block_size=engine_block_size,
        scheduler_block_size=scheduler_bs,
        hash_block_size=hash_bs,
        cache_hit_alignment_tokens=alignment_tokens,
        platform_alignment=alignment,
        default_platform_alignment=default_alignment,
        max_model_len=settings.max_model_len,
        warnings=grouping.warnings,
        kv_cache_config=configs[0],
    )
    # The workers allocate and bind their KV cache (core.py:372, model_executor.initialize_from_config)
    # before the engine builds the scheduler and its KV cache manager (the coordinator checks).
    if present(geometry.views):
        # Imported here: views.py costs ~13 ms of `kvproof check`'s start-up (-X importtime, 5 runs at
        # load ~3), which imports this module for the rules and plans no views.
        from .views import _plan_views

        result = attrs.evolve(result, views=_plan_views(geometry, result, layout), has_views=True)
    if scheduler_groups:
        _coordinator_checks(scheduler_groups, settings, scheduler_bs, hash_bs, _needs_zeroing(configs[0].kv_cache_groups))
    return result
