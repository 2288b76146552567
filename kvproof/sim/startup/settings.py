"""Engine settings resolved from a geometry, and the layer specs each worker reports.

This is the part of ``VllmConfig`` construction and model construction that shapes the KV cache
plan: defaults of ``CacheConfig``/``SchedulerConfig``, the Mamba mode and block size
(``model_executor/models/config.py:750-787``), ``--mamba-block-size`` validation
(``config/vllm.py:3441-3452``), async scheduling and in-flight tokens (``config/vllm.py:587-609,
1640-1722``), speculative lookahead (``config/vllm.py:655-692``), the HMA default
(``config/vllm.py:2223-2294``) and ``MambaBase.get_kv_cache_spec``
(``model_executor/layers/mamba/abstract.py:72-91``).
"""

from __future__ import annotations

from typing import Any

import attrs

from ...models.geometry import (
    ABSENT,
    KV_QUANT_MODES,
    ExpandedLayer,
    Geometry,
    canonical_dtype,
    expand_layers,
    parse_tokens_per_state,
    present,
    replay_ring_layer,
)
from ...formulas.blocks_per_request import max_in_flight_tokens
from .refusals import VllmValueError
from .replay_ring import ring_dtypes, ring_length, ring_shapes
from .state_support import DEFAULT_REVISION, REFUSALS, architecture_class, decide, refusal_text, speculative_class
from .specs import SPEC_TYPES, KVCacheSpec, MambaSpec

__all__ = ["DEFAULT_MAX_NUM_SEQS", "EngineSettings", "ReplayRingSettings", "resolve_settings", "build_layer_spec", "mamba_state",
           "state_support_settings", "EAGLE_METHODS", "DEFAULT_MAX_NUM_BATCHED_TOKENS"]

#: ``max_num_seqs`` when the geometry leaves it out: EngineArgs' default that goes with the
#: ``max_num_batched_tokens`` default (8192) of this module, the ``LLM_CLASS`` usage
#: context on a GPU below the H100 tier (``engine/arg_utils.py:2998-3006``), then ``min(max_num_seqs,
#: max_num_batched_tokens)`` (``arg_utils.py:3232-3234``); the planning oracle uses the same 256.
DEFAULT_MAX_NUM_SEQS = 256


#: ``SpeculativeConfig.use_eagle()`` (config/speculative.py:2116-2120) after MTP names are
#: normalised to "mtp".
EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
#: Methods the V1 runner runs with async scheduling (config/vllm.py:1651-1661).
_ASYNC_COMPATIBLE = ("eagle", "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "draft_model", "dspark")
#: Methods the V2 model runner (the GPU default) does not support (config/vllm.py:3066-3068).
_V2_UNSUPPORTED = ("suffix", "custom_class")
#: ``max_num_batched_tokens`` when a geometry leaves it out (EngineArgs' default for a GPU
#: server; the worked examples use it).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192


def _method(name: str) -> str:
    return "mtp" if name == "mtp" or name.endswith("_mtp") else name


@attrs.frozen
class ReplayRingSettings:
    """What ``append_replayssm_ring`` reads (kvproof/sim/startup/replay_ring.py): the model's ``n_groups``,
    the tensor-parallel size, the ring length and the activation (model) dtype."""

    n_groups: int
    tp: int
    length: int
    model_dtype: str = "bfloat16"


@attrs.frozen
class EngineSettings:
    """The resolved engine configuration the plan reads (vLLM attribute names)."""

    block_size: int  # cache_config.block_size before the engine writes it back
    user_block_size: int
    max_model_len: int
    original_max_model_len: int
    enable_prefix_caching: bool  # after non-causal layers disabled it
    requested_prefix_caching: bool
    mamba_cache_mode: str
    mamba_block_size: int | None
    mamba_page_size_padded: int | None
    has_mamba: bool
    num_speculative_tokens: int
    num_speculative_blocks: int  # MambaSpec default: 0 with use_replayssm
    speculative_method: str | None
    use_eagle: bool
    use_eagle_block_drop: bool
    num_prefill_lookahead_tokens: int
    num_hash_lookahead_tokens: int
    max_num_batched_tokens: int
    async_scheduling: bool
    v2_model_runner: bool
    pipeline_parallel_size: int
    max_in_flight_tokens: int
    max_num_encoder_input_tokens: int
    dcp: int
    tp: int
    disable_hybrid_kv_cache_manager: bool
    prefix_match_unit: int | None
    num_gpu_blocks_override: int | None
    prefix_cache_retention_interval: int | None
    kv_connector: bool = False
    #: ReplaySSM's rings (``geometry.state_backend`` with ``use_replayssm``), else None.
    replay_ring: ReplayRingSettings | None = None
    max_num_seqs: int | None = None  # as given; the scheduler port applies EngineArgs' default
    # EngineCore turns chunked prefill off for non-causal layers (v1/engine/core.py:266-280)
    enable_chunked_prefill: bool = True


def _v2_model_runner(geometry: Geometry, method: str | None) -> bool:
    """``VllmConfig.use_v2_model_runner`` (config/vllm.py:731-767): ``VLLM_USE_V2_MODEL_RUNNER`` when
    ``state_backend`` sets it, else V2 unless a feature needs V1 (3053-3087)."""
    backend = geometry.state_backend
    if present(backend) and backend is not None and present(backend.use_v2_model_runner):
        return backend.use_v2_model_runner
    return method not in _V2_UNSUPPORTED


def _pipeline_parallel_size(geometry: Geometry) -> int:
    """Each worker of ``workers`` is a pipeline stage (the loader refuses a layer on two)."""
    return len(geometry.workers) if present(geometry.workers) else 1


def resolve_settings(geometry: Geometry, layers: list[ExpandedLayer] | None = None) -> EngineSettings:
    """Engine settings before platform alignment and before planning."""
    layers = layers if layers is not None else expand_layers(geometry)
    tp = geometry.tp if present(geometry.tp) else 1
    dcp = geometry.dcp if present(geometry.dcp) else 1
    if tp % dcp != 0:  # ParallelConfig._validate_parallel_config (config/parallel.py:594-600), PCP off
        raise VllmValueError(f"tp_size={tp} must be divisible by dcp_size={dcp}.", "config/parallel.py:600")
    mnbt = geometry.max_num_batched_tokens if present(geometry.max_num_batched_tokens) else DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs = geometry.max_num_seqs if present(geometry.max_num_seqs) else None
    if max_num_seqs is not None and mnbt < max_num_seqs:  # SchedulerConfig.verify_max_model_len (scheduler.py:331-336)
        raise VllmValueError(
            f"max_num_batched_tokens ({mnbt}) must be greater than or equal to max_num_seqs ({max_num_seqs}).",
            "config/scheduler.py:331-336",
        )
    block_size = geometry.block_size if present(geometry.block_size) else 16  # CacheConfig.DEFAULT_BLOCK_SIZE
    max_model_len = geometry.max_model_len
    original = geometry.original_max_model_len if present(geometry.original_max_model_len) else max_model_len
    pc = geometry.enable_prefix_caching if present(geometry.enable_prefix_caching) else True
    has_mamba = any(layer.entry.spec == "MambaSpec" for layer in layers)

    # VllmConfig.__post_init__ (config/vllm.py:1651-1680), before the validate_mamba_block_size
    # validator: explicit async scheduling on the V1 model runner (suffix / custom_class drafting, or
    # VLLM_USE_V2_MODEL_RUNNER=0 through state_backend) with a V1 incompatibility is refused.
    early_spec = geometry.speculative if present(geometry.speculative) else None
    early_method = _method(early_spec.method) if early_spec is not None else None
    if geometry.async_scheduling is True and not _v2_model_runner(geometry, early_method):
        incompatible = (f"{early_method}-based speculative decoding"
                        if early_method is not None and early_method not in _ASYNC_COMPATIBLE
                        else "pipeline parallelism" if _pipeline_parallel_size(geometry) > 1 else None)
        if incompatible is not None:
            raise VllmValueError(
                f"Async scheduling is not supported by the V1 model runner with {incompatible}.",
                "config/vllm.py:1675-1680",
            )
    mamba_block_size = geometry.mamba_block_size if present(geometry.mamba_block_size) else None
    # VllmConfig.validate_mamba_block_size (config/vllm.py:3441-3452)
    if mamba_block_size is not None and mamba_block_size != max_model_len and not pc:
        raise VllmValueError("--mamba-block-size can only be set with --enable-prefix-caching", "config/vllm.py:3448-3451")
    mamba_cache_mode = geometry.mamba_cache_mode if present(geometry.mamba_cache_mode) else "none"
    if has_mamba:  # MambaModelConfig.verify_and_update_config (models/config.py:763-787)
        if pc:
            if mamba_cache_mode == "none":
                mamba_cache_mode = "align"
            if mamba_block_size is None:
                mamba_block_size = block_size
        else:
            mamba_cache_mode = "none"
            if mamba_block_size is None:
                mamba_block_size = max_model_len

    spec = geometry.speculative if present(geometry.speculative) else None
    method = _method(spec.method) if spec is not None else None
    # VllmConfig.num_speculative_tokens is the speculative config's; the top-level field stands for
    # it (and so for every MambaSpec's num_speculative_blocks) only without a speculative block.
    if spec is not None:
        num_spec = spec.num_speculative_tokens if present(spec.num_speculative_tokens) else 1
    elif present(geometry.num_speculative_tokens):
        num_spec = geometry.num_speculative_tokens
    else:
        num_spec = 0
    use_eagle = method in EAGLE_METHODS
    needs_block_drop = use_eagle and method not in ("dflash", "dspark")
    block_drop = needs_block_drop and not (spec is not None and spec.eagle_block_drop is False)
    multi_module = bool(spec is not None and method == "mtp" and spec.multi_module_mtp is True)
    lookahead = 0 if not use_eagle else (num_spec if multi_module else 1)

    pp = _pipeline_parallel_size(geometry)
    # The V2 model runner is the GPU default unless a feature needs V1 (config/vllm.py:731-767, 3053-3087).
    v2_runner = _v2_model_runner(geometry, method)
    async_scheduling = geometry.async_scheduling if present(geometry.async_scheduling) else None
    if async_scheduling is None:  # config/vllm.py:1685-1719
        if v2_runner:
            async_scheduling = True
        else:  # the V1 runner's incompatibilities (config/vllm.py:1651-1664)
            async_scheduling = pp <= 1 and (method is None or method in _ASYNC_COMPATIBLE)

    # HMA: the geometry decides (on a GPU vLLM enables it unless a chunked-local model lacks
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE or a connector lacks HMA, config/vllm.py:2223-2294).
    disable_hma = geometry.disable_hybrid_kv_cache_manager is True

    non_causal = any(layer.entry.non_causal is True for layer in layers)
    replayssm = geometry.use_replayssm is True
    backend = geometry.state_backend if present(geometry.state_backend) else None
    ring = None
    if backend is not None:
        table = state_support_settings(geometry, backend, mamba_cache_mode, num_spec, method, v2_runner, pp)
        _validate_mamba_cached_kernel(table)
        if replayssm and present(backend.n_groups):
            ring = ReplayRingSettings(backend.n_groups, tp, ring_length(
                table["replayssm_buffer_len"], table["mamba_backend"] == "flashinfer", num_spec))
    return EngineSettings(
        block_size=block_size,
        user_block_size=block_size,
        max_model_len=max_model_len,
        original_max_model_len=original,
        enable_prefix_caching=pc and not non_causal,
        requested_prefix_caching=pc,
        mamba_cache_mode=mamba_cache_mode,
        mamba_block_size=mamba_block_size,
        mamba_page_size_padded=geometry.mamba_page_size_padded if present(geometry.mamba_page_size_padded) else None,
        has_mamba=has_mamba,
        num_speculative_tokens=num_spec,
        num_speculative_blocks=0 if replayssm else num_spec,
        speculative_method=method,
        use_eagle=use_eagle,
        use_eagle_block_drop=block_drop,
        num_prefill_lookahead_tokens=lookahead,
        # VllmConfig.num_hash_lookahead_tokens (config/vllm.py:677-692): no KV connector modelled
        num_hash_lookahead_tokens=lookahead if (block_drop and pc) else 0,
        max_num_batched_tokens=mnbt,
        async_scheduling=async_scheduling,
        v2_model_runner=v2_runner,
        pipeline_parallel_size=pp,
        max_in_flight_tokens=max_in_flight_tokens(mnbt, async_scheduling, pp, v2_runner),
        max_num_encoder_input_tokens=mnbt,  # SchedulerConfig.__post_init__ (config/scheduler.py:306)
        dcp=dcp,
        tp=tp,
        disable_hybrid_kv_cache_manager=disable_hma,
        prefix_match_unit=geometry.prefix_match_unit if present(geometry.prefix_match_unit) else None,
        num_gpu_blocks_override=geometry.num_gpu_blocks_override if present(geometry.num_gpu_blocks_override) else None,
        # null is kept (cache_config's None: retain every sparse checkpoint, v1/core/kv_cache_planning.py:665-667)
        prefix_cache_retention_interval=(
            geometry.prefix_cache_retention_interval if geometry.prefix_cache_retention_interval is not ABSENT else 0
        ),
        max_num_seqs=max_num_seqs,
        enable_chunked_prefill=not non_causal,
        replay_ring=ring,
    )


def state_support_settings(geometry: Geometry, backend, mamba_cache_mode: str, num_spec: int, method: str | None,
                           v2_runner: bool, pp: int) -> dict[str, Any]:
    """The support table's axes of a geometry (kvproof/sim/startup/state_support.py; the defaults are vLLM's:
    backend triton, config/mamba.py:40; buffer 16, config/cache.py:318)."""
    return {
        "revision": backend.vllm_revision if present(backend.vllm_revision) else DEFAULT_REVISION,
        "use_replayssm": geometry.use_replayssm is True,
        "architecture": architecture_class(backend.architecture),
        "architecture_name": backend.architecture,
        "mamba_backend": backend.mamba_backend if present(backend.mamba_backend) else "triton",
        "model_runner": "V2" if v2_runner else "V1",
        "mamba_cache_mode": mamba_cache_mode,
        "speculative": speculative_class(num_spec, method),
        "kv_connector": backend.kv_connector is True,
        "stochastic_rounding": backend.stochastic_rounding is True,
        "num_speculative_tokens": num_spec,
        "replayssm_buffer_len": backend.replayssm_buffer_len if present(backend.replayssm_buffer_len) else 16,
        "pipeline_parallel_size": pp,
    }


def _validate_mamba_cached_kernel(table: dict[str, Any]) -> None:
    """``VllmConfig.validate_mamba_cached_kernel`` (config/vllm.py:3454-3553), a model validator of the
    config vLLM builds before planning: the support table's row decides, with the row's text."""
    row = decide(table)
    if row.rule is not None:
        raise VllmValueError(
            refusal_text(row.rule, table["architecture_name"], table["num_speculative_tokens"],
                         table["replayssm_buffer_len"]),
            REFUSALS[row.rule].source.removeprefix("vllm/"))


def _convert(field: str, value: Any) -> Any:
    if field == "dtype":
        return canonical_dtype(value)
    if field == "dtypes":
        return tuple(canonical_dtype(d) for d in value)
    if field == "shapes":
        return tuple(tuple(shape) for shape in value)
    if field == "tokens_per_state":
        return parse_tokens_per_state(value)
    if field == "kv_quant_mode":
        return KV_QUANT_MODES[value]
    return value


def build_layer_spec(layer: ExpandedLayer, settings: EngineSettings) -> KVCacheSpec:
    """The spec the layer reports: its own fields, the engine's block size for attention specs
    and, for a ``MambaSpec``, the Mamba settings ``MambaBase.get_kv_cache_spec`` reads."""
    entry = layer.entry
    cls = SPEC_TYPES[entry.spec]
    kwargs = {field: _convert(field, value) for field, value in entry.given_fields().items()}
    if cls is MambaSpec:
        if "shapes" in kwargs and "dtypes" in kwargs:
            kwargs["shapes"], kwargs["dtypes"] = mamba_state(layer, settings)
        kwargs.setdefault("block_size", settings.mamba_block_size)
        kwargs.setdefault("page_size_padded", settings.mamba_page_size_padded)
        kwargs.setdefault("mamba_cache_mode", settings.mamba_cache_mode)
        kwargs.setdefault("num_speculative_blocks", settings.num_speculative_blocks)
    else:
        kwargs.setdefault("block_size", settings.block_size)
    return cls(**kwargs)


def mamba_state(layer: ExpandedLayer, settings: EngineSettings) -> tuple[tuple, tuple]:
    """A Mamba layer's state shapes and dtypes as its ``get_state_shape``/``get_state_dtype`` report
    them: the geometry's, with ReplaySSM's x, dt and B rings appended to a Mamba2 layer
    (kvproof/sim/startup/replay_ring.py)."""
    entry = layer.entry
    shapes = tuple(tuple(shape) for shape in entry.shapes)
    dtypes = tuple(canonical_dtype(d) for d in entry.dtypes)
    ring = settings.replay_ring
    if ring is None or not replay_ring_layer(entry):
        return shapes, dtypes
    return (shapes + ring_shapes(shapes[1], ring.n_groups, ring.tp, ring.length),
            dtypes + ring_dtypes(ring.model_dtype))
