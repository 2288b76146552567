"""Runtime observation records of a vLLM worker and of a vLLM scheduler.

The layout follows the ``aisimulate-runtime-observation/v1`` records (reference notes §1) with
the hybrid keys of seed 001: cache groups with ``kind``, ``layer_specs`` and ``state`` evidence;
tensor allocations with ``layers`` and ``layer_stride``; per-layer views with
``kernel_block_stride``; ``attention_groups`` with ``kernel_block_size`` and
``kernel_block_stride``; the scheduler's block sizes, Mamba cache mode,
``kv_cache_max_concurrency`` and ``kv_cache_size_tokens``; ``prefix_caching`` evidence; the
runtime version.  docs/formats.md documents every key.

Typing policy: structural fields are strict (the loader refuses a wrong type with its path).
Fields whose *value* a rule judges load as :data:`~kvproof.models.codec.SignedInt` (a negative
value reaches the rule) or :data:`~kvproof.models.codec.Scalar` (a bool, a float or a null
reaches the rule), and class names, kinds and modes load as plain strings so an unknown class
or a mode vLLM lacks is a rule's refusal, not a schema error.
"""

from __future__ import annotations

from typing import Literal

import attrs

from .codec import ABSENT, Scalar, SignedInt

__all__ = [
    "RECORD_SCHEMA", "Runtime", "ResolvedConfig", "PrefixCachingEvidence", "LayerSpec",
    "StateEvidence", "WorkerGroup", "SchedulerGroup", "Storage", "TensorAllocation", "LayerView",
    "AttentionGroup", "ModelRunner", "WorkerCache", "SchedulerCache", "WorkerRecord",
    "SchedulerRecord", "Record", "RawCacheConfig",
]

RECORD_SCHEMA = "kvproof/record/v1"


@attrs.define
class Runtime:
    framework: Literal["vllm"]
    #: The installed vLLM version string as the runtime reports it (``vllm.__version__``).
    version: str


@attrs.define
class ResolvedConfig:
    """The engine settings vLLM resolved at start-up (``VllmConfig``), as far as rules read them."""

    max_model_len: int
    #: ``cache_config.block_size`` after the engine wrote it back (v1/engine/core.py:334-352).
    block_size: int
    enable_prefix_caching: bool
    max_num_batched_tokens: int
    mamba_cache_mode: str | None = ABSENT
    mamba_block_size: int | None = ABSENT
    prefix_match_unit: int | None = ABSENT
    max_num_seqs: int | None = ABSENT
    async_scheduling: bool | None = ABSENT
    #: ``VllmConfig.max_in_flight_tokens`` (config/vllm.py:601-609): the SWA admission term.
    max_in_flight_tokens: int | None = ABSENT
    #: ``num_prefill_lookahead_tokens`` - 1, floored at 0: SWA ``extra_retained_tokens``.
    num_speculative_tokens: int | None = ABSENT
    tensor_parallel_size: int | None = ABSENT
    pipeline_parallel_size: int | None = ABSENT
    decode_context_parallel_size: int | None = ABSENT
    num_gpu_blocks_override: int | None = ABSENT
    prefix_cache_retention_interval: int | None = ABSENT
    # The state settings the SS rules judge (kvproof/sim/startup/state_support.py; absent keys take
    # vLLM's defaults there): the vLLM revision of the support table (absent: 0.33.0),
    # ``model_config.architecture``, ``cache_config.use_replayssm`` and ``replayssm_buffer_len``,
    # ``mamba_config.backend`` (the MambaBackendEnum value) and ``enable_stochastic_rounding``,
    # ``VllmConfig.use_v2_model_runner``, ``speculative_config.method``,
    # ``kv_transfer_config.is_kv_transfer_instance``.
    vllm_revision: str | None = ABSENT
    architecture: str | None = ABSENT
    use_replayssm: bool | None = ABSENT
    mamba_backend: str | None = ABSENT
    replayssm_buffer_len: int | None = ABSENT
    use_v2_model_runner: bool | None = ABSENT
    speculative_method: str | None = ABSENT
    is_kv_transfer_instance: bool | None = ABSENT
    mamba_stochastic_rounding: bool | None = ABSENT


@attrs.define
class RawCacheConfig:
    """``vllm_config.cache_config`` as the probe dumped it in this process (config/cache.py).

    The settings it shares with ``resolved_config`` must agree with them (RS rules);
    ``gpu_memory_utilization`` is what the profile's runtime memory records."""

    block_size: Scalar = ABSENT
    gpu_memory_utilization: Scalar = ABSENT
    enable_prefix_caching: Scalar = ABSENT
    mamba_cache_mode: str | None = ABSENT
    mamba_block_size: Scalar = ABSENT
    num_gpu_blocks_override: Scalar = ABSENT
    prefix_match_unit: Scalar = ABSENT
    cache_dtype: str | None = ABSENT


@attrs.define
class PrefixCachingEvidence:
    """What the probe observed of prefix caching; every key is required evidence (PC rules)."""

    enable_prefix_caching: Scalar = ABSENT
    mamba_cache_mode: str | None = ABSENT
    hash_block_size: Scalar = ABSENT
    scheduler_block_size: Scalar = ABSENT
    prefix_match_unit: Scalar = ABSENT


@attrs.define
class LayerSpec:
    """One layer's ``KVCacheSpec`` (vLLM field names; only the fields its class has)."""

    spec_type: str
    block_size: int
    page_size_bytes: int
    # the attention family (AttentionSpec and subclasses)
    num_kv_heads: int | None = ABSENT
    head_size: int | None = ABSENT
    head_size_v: int | None = ABSENT
    dtype: str | None = ABSENT
    sliding_window: int | None = ABSENT
    attention_chunk_size: int | None = ABSENT
    extra_retained_tokens: int | None = ABSENT
    tokens_per_state: int | None = ABSENT
    state_content_bytes: int | None = ABSENT
    page_size_padded: int | None = ABSENT
    num_head_slots: int | None = ABSENT
    cache_role: str | None = ABSENT
    cache_dtype_str: str | None = ABSENT
    dcp_sharded: bool | None = ABSENT
    #: ``get_block_stride_alignment()`` in bytes (kv_cache_interface.py:224-234).
    block_stride_alignment_bytes: int | None = ABSENT
    # MambaSpec
    shapes: list[list[int]] | None = ABSENT
    dtypes: list[str] | None = ABSENT
    mamba_type: str | None = ABSENT
    mamba_cache_mode: str | None = ABSENT
    num_speculative_blocks: int | None = ABSENT
    num_prefill_checkpoint_blocks: Scalar = ABSENT
    prefill_checkpoint_alignment: Scalar = ABSENT
    # anything a placement carries beyond vLLM's spec (HiSparse placement is refused by SC)
    placement: str | None = ABSENT


@attrs.define
class StateEvidence:
    """The state evidence of a state group (Mamba or ring)."""

    #: Blocks a running request holds between block boundaries (1 + k for Mamba, 1 for a ring).
    blocks_per_request: Scalar
    mamba_cache_mode: str | None = ABSENT
    num_speculative_blocks: int | None = ABSENT
    num_prefill_checkpoint_blocks: Scalar = ABSENT
    prefill_checkpoint_alignment: Scalar = ABSENT


@attrs.define
class WorkerGroup:
    """A ``KVCacheGroupSpec`` as the worker holds it."""

    layer_names: list[str]
    #: The group spec class (``UniformTypeKVCacheSpecs`` for a group of one type, mixed pages).
    spec_type: str
    block_size_tokens: int
    #: The group's own page: the sum of its layers' pages for ``UniformTypeKVCacheSpecs``.
    page_size_bytes: int
    #: ``attention`` or ``state`` (a string: the SC class table judges it).
    kind: str | None = ABSENT
    #: plain evidence of a sliding-window group (hybrid records carry it in ``layer_specs``).
    sliding_window: int | None = ABSENT
    #: Hybrid evidence: the spec of every layer of the group, keyed by layer name.
    layer_specs: dict[str, LayerSpec] | None = ABSENT
    state: StateEvidence | None = ABSENT


@attrs.define
class SchedulerGroup:
    """A group of the scheduler's ``KVCacheConfig`` (a uniform group becomes its first spec)."""

    layer_names: list[str]
    spec_type: str
    block_size_tokens: int
    page_size_bytes: int
    #: plain evidence of a sliding-window group (hybrid records carry it in ``spec``).
    sliding_window: int | None = ABSENT
    spec: LayerSpec | None = ABSENT


@attrs.define
class Storage:
    storage_id: str
    size_bytes: int
    device: str | None = ABSENT


@attrs.define
class TensorAllocation:
    """A ``KVCacheTensor``: layer ``l`` block ``b`` starts at offset + l*layer_stride + b*block_stride."""

    storage_id: str
    size: int
    layers: list[str]
    offset: int
    block_stride: int
    layer_stride: int


@attrs.define
class LayerView:
    """One tensor view a layer's kernels use (shape and strides in bytes)."""

    storage_id: str
    storage_offset_bytes: int
    shape: list[int]
    stride_bytes: list[int]
    element_size_bytes: int
    block_axis: int
    kernel_block_size_tokens: int
    #: 0 for an allocation-time split; stride(0) // page_stride for a packed cache.
    kernel_block_stride: SignedInt
    #: ``kv`` for an attention cache, ``conv``/``ssm``/``state`` for a Mamba state tensor.
    role: str | None = ABSENT


@attrs.define
class AttentionGroup:
    kv_cache_group_id: int
    layer_names: list[str]
    #: null when the backend uses the spec's own block (vLLM leaves it None then).
    kernel_block_size: int | None
    kernel_block_stride: SignedInt
    backend: str | None = ABSENT


@attrs.define
class ModelRunner:
    class_name: str
    kernel_block_sizes: list[int]


@attrs.define
class WorkerCache:
    num_blocks: int
    groups: list[WorkerGroup]
    storages: list[Storage]
    tensor_allocations: list[TensorAllocation]
    layer_tensors: dict[str, list[LayerView]]
    kv_cache_layout: str | None = ABSENT
    attention_groups: list[AttentionGroup] | None = ABSENT
    model_runner: ModelRunner | None = ABSENT


@attrs.define
class SchedulerCache:
    num_blocks: int
    groups: list[SchedulerGroup]
    block_size: int
    scheduler_block_size: int
    hash_block_size: int
    mamba_cache_mode: str | None = ABSENT
    mamba_block_size: int | None = ABSENT
    cache_hit_alignment_tokens: int | None = ABSENT
    #: ``get_max_concurrency_for_kv_cache_config`` (a float; SU rules judge it).
    kv_cache_max_concurrency: Scalar = ABSENT
    #: ``get_kv_cache_capacity``: int(concurrency * max_model_len).
    kv_cache_size_tokens: Scalar = ABSENT


@attrs.define
class WorkerRecord:
    schema_version: Literal["kvproof/record/v1"]
    kind: Literal["worker"]
    dp_rank: int
    tp_rank: int
    pp_rank: int
    runtime: Runtime
    resolved_config: ResolvedConfig
    cache: WorkerCache
    phase: str | None = ABSENT
    prefix_caching: PrefixCachingEvidence | None = ABSENT
    #: The served model (``model_config.model``) and the SHA-256 of its loaded configuration.
    model: str | None = ABSENT
    model_config_sha256: str | None = ABSENT
    raw_cache_config: RawCacheConfig | None = ABSENT


@attrs.define
class SchedulerRecord:
    schema_version: Literal["kvproof/record/v1"]
    kind: Literal["scheduler"]
    dp_rank: int
    runtime: Runtime
    resolved_config: ResolvedConfig
    cache: SchedulerCache
    phase: str | None = ABSENT
    prefix_caching: PrefixCachingEvidence | None = ABSENT
    #: The served model (``model_config.model``) and the SHA-256 of its loaded configuration.
    model: str | None = ABSENT
    model_config_sha256: str | None = ABSENT
    raw_cache_config: RawCacheConfig | None = ABSENT


Record = WorkerRecord | SchedulerRecord
