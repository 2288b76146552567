"""The geometry document: what vLLM 0.33.0 is given at start-up.

A geometry lists the KV cache spec every layer reports (vLLM class names and vLLM dataclass field
names, ``vllm/v1/kv_cache_interface.py``) and the engine settings that change the plan.  The
format is documented in ``docs/simulator.md`` and in the shared ``geometry-format.md``.

Loading is strict (:mod:`kvproof.models.codec`): unknown keys, wrong types, a field that is not
a field of the layer's spec class, a missing required field and duplicate layer names are all
refused with the JSON path of the offending value.  Values are kept as written (a fraction
``tokens_per_state`` stays the string ``"1/4"``, a dtype alias stays ``"bf16"``) so a document
round-trips; :mod:`kvproof.sim` interprets them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from fractions import Fraction
from typing import Any, Literal, NewType

import attrs

from ..diagnostics import LOAD_SCHEMA, Diagnostic, InputError
from .codec import (
    ABSENT,
    MAX_SAFE_INT,
    SignedInt,
    DocumentRefusal,
    converter,
    parse_json,
    present,
    structure,
)

__all__ = [
    "MultipleOf", "Geometry", "LayerEntry", "Speculative", "StateBackend", "replay_ring_layer", "PlatformAlignment", "Views",
    "ViewBackend", "Simulate", "WorkloadRequest", "ExpandedLayer", "load_geometry", "expand_layers",
    "SPEC_CLASSES", "SPEC_FIELDS", "REQUIRED_FIELDS", "DTYPE_CANONICAL",
    "KV_QUANT_MODES", "MAMBA_TYPES", "LAYOUT_NAMES", "LAYOUT_ALIASES", "canonical_dtype",
    "parse_tokens_per_state", "MAX_LAYERS",
]


# --------------------------------------------------------------------------------------------
# Value types shared with the simulator


@dataclasses.dataclass(frozen=True)
class MultipleOf:
    """vLLM's ``MultipleOf`` (``vllm/v1/attention/backend.py:51-56``): any multiple of ``base``."""

    base: int

    def __repr__(self) -> str:  # vLLM's repr, used in its error texts
        return f"MultipleOf({self.base})"


#: The dtype names a geometry may write (torch names and aliases) -> canonical torch name.  ``fp8``
#: is ``torch.float8_e4m3fn`` (the conformance oracle's reading; same element size as vLLM's cache
#: dtype string ``"fp8"``, which maps to ``torch.uint8``).  Element sizes are the one dtype table's,
#: ``kvproof.formulas.dtypes`` (the floor above this one: the loader needs names, not sizes).
DTYPE_CANONICAL: dict[str, str] = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
    "uint8": "uint8",
    "float8_e4m3fn": "float8_e4m3fn", "fp8": "float8_e4m3fn",
}
#: ``KVQuantMode`` (``vllm/v1/kv_cache_interface.py:39-69``); CUSTOM aliases OCTAVE_K3V4 (12).
KV_QUANT_MODES: dict[str, int] = {
    "NONE": 0, "FP8_PER_TENSOR": 1, "INT8_PER_TOKEN_HEAD": 2, "FP8_PER_TOKEN_HEAD": 3,
    "INT4_PER_TOKEN_HEAD": 4, "NVFP4": 5, "TURBOQUANT_K8V4": 6, "TURBOQUANT_4BIT_NC": 7,
    "TURBOQUANT_K3V4_NC": 8, "TURBOQUANT_3BIT_NC": 9, "NVFP4_DS_MLA": 10, "ULTRAQUANT_4BIT": 11,
    "OCTAVE_K3V4": 12, "OCTAVE_K3V3": 13, "OCTAVE_K3V3_COMPACT": 14, "CUSTOM": 12,
}
#: ``MambaAttentionBackendEnum`` members (``vllm/v1/attention/backends/registry.py:250-298``).
MAMBA_TYPES = ("MAMBA1", "MAMBA2", "SHORT_CONV", "LINEAR", "GDN_ATTN", "CUSTOM")
#: ``KVCacheLayout`` members (``vllm/v1/kv_cache_layout.py``) and the legacy aliases
#: (``vllm/config/cache.py:33-41``).
LAYOUT_NAMES = ("LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC")
LAYOUT_ALIASES = {"NHD": "LBNHC", "HND": "LBHNC"}

DTypeName = NewType("DTypeName", str)
PositiveInt = NewType("PositiveInt", int)
TokensPerState = NewType("TokensPerState", object)  # int (may be negative for Mamba) or "a/b"
AlignmentValue = NewType("AlignmentValue", object)  # int or MultipleOf
KernelBlockSize = NewType("KernelBlockSize", object)  # int or MultipleOf
MemoryBytes = NewType("MemoryBytes", object)  # int or list[int]
LayoutName = NewType("LayoutName", str)
SupportedLayouts = NewType("SupportedLayouts", object)  # list[name] or list[list[name] | None]

_FRACTION = re.compile(r"^\s*(-?\d+)\s*/\s*(\d+)\s*$")


def canonical_dtype(name: str) -> str:
    return DTYPE_CANONICAL[name]


def parse_tokens_per_state(value: Any) -> int | Fraction:
    """The value vLLM stores: an ``int`` or, for ``"a/b"``, ``Fraction(a, b)`` (an integral
    fraction such as ``"4/1"`` becomes the int 4)."""
    if isinstance(value, str):
        match = _FRACTION.match(value)
        assert match is not None
        fraction = Fraction(int(match.group(1)), int(match.group(2)))
        return int(fraction) if fraction.denominator == 1 else fraction
    return value


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _dtype_hook(value: Any, _t: Any) -> str:
    if type(value) is not str:
        raise DocumentRefusal(f"expected a dtype name, got {_describe(value)}")
    if value not in DTYPE_CANONICAL:
        raise DocumentRefusal(f"unknown dtype {value!r}; expected one of {', '.join(sorted(DTYPE_CANONICAL))}")
    return value


def _positive_hook(value: Any, _t: Any) -> int:
    if type(value) is not int:
        raise DocumentRefusal(f"expected a positive integer, got {_describe(value)}")
    if value <= 0:
        raise DocumentRefusal(f"expected a positive integer, got {value}")
    if value > MAX_SAFE_INT:
        raise DocumentRefusal(f"integer {value} exceeds 2**53")
    return value


def _tokens_per_state_hook(value: Any, _t: Any) -> Any:
    if type(value) is int:
        if abs(value) > MAX_SAFE_INT:
            raise DocumentRefusal(f"integer {value} exceeds 2**53 in magnitude")
        return value
    if type(value) is str:
        match = _FRACTION.match(value)
        if match is None or int(match.group(2)) == 0:
            raise DocumentRefusal(f"expected an integer or a fraction string such as \"1/4\", got {value!r}")
        return value
    raise DocumentRefusal(f"expected an integer or a fraction string such as \"1/4\", got {_describe(value)}")


def _multiple_of(value: Any) -> MultipleOf | None:
    if isinstance(value, dict) and set(value) == {"MultipleOf"}:
        base = value["MultipleOf"]
        if type(base) is int and 0 < base <= MAX_SAFE_INT:
            return MultipleOf(base)
    return None


def _alignment_hook(value: Any, _t: Any) -> Any:
    # An int <= 0 is kept: vLLM itself refuses it ("block_stride_alignment must be positive").
    if type(value) is int:
        if abs(value) > MAX_SAFE_INT:
            raise DocumentRefusal(f"integer {value} exceeds 2**53 in magnitude")
        return value
    multiple = _multiple_of(value)
    if multiple is not None:
        return multiple
    raise DocumentRefusal(f"expected an integer or {{\"MultipleOf\": n}} with n > 0, got {_describe(value)}")


def _kernel_block_size_hook(value: Any, _t: Any) -> Any:
    if type(value) is int:
        return _positive_hook(value, _t)
    multiple = _multiple_of(value)
    if multiple is not None:
        return multiple
    raise DocumentRefusal(f"expected a positive integer or {{\"MultipleOf\": n}}, got {_describe(value)}")


def _memory_hook(value: Any, _t: Any) -> Any:
    if type(value) is int:
        if value < 0:
            raise DocumentRefusal(f"expected a non-negative integer, got {value}")
        if value > MAX_SAFE_INT:
            raise DocumentRefusal(f"integer {value} exceeds 2**53")
        return value
    if type(value) is list and value:
        for item in value:
            if type(item) is not int or item < 0 or item > MAX_SAFE_INT:
                raise DocumentRefusal("expected a non-negative integer or a non-empty array of them")
        return list(value)
    raise DocumentRefusal(f"expected a non-negative integer or a non-empty array of them, got {_describe(value)}")


def _layout_hook(value: Any, _t: Any) -> str:
    if type(value) is not str or (value not in LAYOUT_NAMES and value not in LAYOUT_ALIASES):
        shown = value if type(value) is str else _describe(value)
        raise DocumentRefusal(f"expected a KV cache layout ({', '.join(LAYOUT_NAMES)}, NHD, HND), got {shown!r}")
    return value


def _supported_layouts_hook(value: Any, _t: Any) -> Any:
    def names(items: Any) -> list[str]:
        if type(items) is not list or not items:
            raise DocumentRefusal("expected a non-empty array of layout names or an array of such arrays")
        return [_layout_hook(item, _t) for item in items]

    if type(value) is not list or not value:
        raise DocumentRefusal("expected a non-empty array of layout names or an array of such arrays")
    if all(type(item) is str for item in value):
        return names(value)
    # One declaration per backend; null = the backend declares none (any layout works).
    return [None if item is None else names(item) for item in value]


converter.register_structure_hook(DTypeName, _dtype_hook)
converter.register_structure_hook(PositiveInt, _positive_hook)
converter.register_structure_hook(TokensPerState, _tokens_per_state_hook)
converter.register_structure_hook(AlignmentValue, _alignment_hook)
converter.register_structure_hook(KernelBlockSize, _kernel_block_size_hook)
converter.register_structure_hook(MemoryBytes, _memory_hook)
converter.register_structure_hook(LayoutName, _layout_hook)
converter.register_structure_hook(SupportedLayouts, _supported_layouts_hook)
converter.register_unstructure_hook(MultipleOf, lambda value: {"MultipleOf": value.base})


# --------------------------------------------------------------------------------------------
# Spec classes and their fields (vllm/v1/kv_cache_interface.py)

_KVCACHE = ("block_size", "dcp_sharded", "block_stride_alignment", "is_draft")  # 201-217
_ATTENTION = _KVCACHE + (  # 551-577
    "max_tp_shards", "num_kv_heads", "head_size", "dtype", "head_size_v", "kv_quant_mode",
    "page_size_padded", "num_head_slots", "state_content_bytes", "tokens_per_state",
)
_FULL = _ATTENTION + ("sliding_window", "attention_chunk_size", "non_causal")  # 618-640
_MLA = _FULL + (  # 728-742
    "cache_dtype_str", "topk_buffer_width", "alignment", "model_version", "cache_role",
    "is_index_group_leader", "non_causal_multi_token_decode",
)
_SWA = _ATTENTION + ("sliding_window", "extra_retained_tokens")  # 900-908
_MAMBA = _KVCACHE + (  # 1093-1107
    "shapes", "dtypes", "page_size_padded", "mamba_type", "mamba_cache_mode",
    "num_speculative_blocks", "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment",
    "num_heads", "tokens_per_state", "tp_replicated",
)

#: Every spec class a geometry may name, with the init fields of its vLLM dataclass.
SPEC_FIELDS: dict[str, tuple[str, ...]] = {
    "FullAttentionSpec": _FULL,
    "MLAAttentionSpec": _MLA,
    "HiddenStateCacheSpec": _MLA,
    "RSWASpec": _FULL + ("rswa_window",),
    "SinkFullAttentionSpec": _FULL + ("sink_len",),
    "ChunkedLocalAttentionSpec": _ATTENTION + ("attention_chunk_size",),
    "SlidingWindowSpec": _SWA,
    "SlidingWindowMLASpec": _SWA + ("cache_dtype_str", "alignment", "model_version", "bounded_replay"),
    "CircularBufferSpec": _ATTENTION,
    "MambaSpec": _MAMBA,
    "EncoderOnlyAttentionSpec": _ATTENTION,
    "CrossAttentionSpec": _ATTENTION,
}
SPEC_CLASSES = tuple(SPEC_FIELDS)

_ATTENTION_REQUIRED = ("num_kv_heads", "head_size", "dtype")
#: Fields without a default in vLLM (``block_size`` comes from the engine settings, except for
#: a ring, whose ``block_size`` is its capacity and not the model block size).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    name: _ATTENTION_REQUIRED for name in SPEC_CLASSES if name != "MambaSpec"
}
REQUIRED_FIELDS.update({
    "MambaSpec": ("shapes", "dtypes"),
    "RSWASpec": _ATTENTION_REQUIRED + ("rswa_window",),
    "ChunkedLocalAttentionSpec": _ATTENTION_REQUIRED + ("attention_chunk_size",),
    "SlidingWindowSpec": _ATTENTION_REQUIRED + ("sliding_window",),
    "SlidingWindowMLASpec": _ATTENTION_REQUIRED + ("sliding_window",),
    "CircularBufferSpec": _ATTENTION_REQUIRED + ("block_size",),
})

SpecName = Literal[
    "FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "RSWASpec",
    "SinkFullAttentionSpec", "ChunkedLocalAttentionSpec", "SlidingWindowSpec",
    "SlidingWindowMLASpec", "CircularBufferSpec", "MambaSpec", "EncoderOnlyAttentionSpec",
    "CrossAttentionSpec",
]
KVQuantModeName = Literal[
    "NONE", "FP8_PER_TENSOR", "INT8_PER_TOKEN_HEAD", "FP8_PER_TOKEN_HEAD", "INT4_PER_TOKEN_HEAD",
    "NVFP4", "TURBOQUANT_K8V4", "TURBOQUANT_4BIT_NC", "TURBOQUANT_K3V4_NC", "TURBOQUANT_3BIT_NC",
    "NVFP4_DS_MLA", "ULTRAQUANT_4BIT", "OCTAVE_K3V4", "OCTAVE_K3V3", "OCTAVE_K3V3_COMPACT", "CUSTOM",
]
MambaTypeName = Literal["MAMBA1", "MAMBA2", "SHORT_CONV", "LINEAR", "GDN_ATTN", "CUSTOM"]


# --------------------------------------------------------------------------------------------
# The document


#: What ``kvproof schema geometry`` says of a layer ``range`` (checked by ``_range_problem``).
RANGE_SCHEMA = {
    "minItems": 2, "maxItems": 3,
    "description": "[start, stop] or [start, stop, step] as Python's range(start, stop, step): the indices "
                   "start, start + step, ... below stop; start <= stop, step >= 1 (default 1)",
}


@attrs.frozen
class LayerEntry:
    """One entry of ``layers``: a name (``{i}`` replaced by each index), the indices it expands
    to, the spec class and that class's own fields.  Absent fields take vLLM's defaults or the
    engine settings (``block_size``; for ``MambaSpec`` also ``mamba_block_size``,
    ``mamba_page_size_padded``, ``mamba_cache_mode`` and ``num_speculative_blocks``)."""

    name: str
    spec: SpecName
    range: list[int] = attrs.field(default=ABSENT, metadata={"json_schema": RANGE_SCHEMA})
    indices: list[int] = ABSENT
    index: int = ABSENT
    # KVCacheSpec
    block_size: PositiveInt = ABSENT
    dcp_sharded: bool = ABSENT
    block_stride_alignment: AlignmentValue | None = ABSENT
    is_draft: bool = ABSENT
    # AttentionSpec
    max_tp_shards: PositiveInt | None = ABSENT
    num_kv_heads: PositiveInt = ABSENT
    head_size: int = ABSENT
    dtype: DTypeName = ABSENT
    head_size_v: int | None = ABSENT
    kv_quant_mode: KVQuantModeName = ABSENT
    page_size_padded: int | None = ABSENT
    num_head_slots: PositiveInt | None = ABSENT
    state_content_bytes: int | None = ABSENT
    tokens_per_state: TokensPerState = ABSENT
    # FullAttentionSpec / MLAAttentionSpec / SlidingWindowSpec / ...
    sliding_window: PositiveInt | None = ABSENT
    attention_chunk_size: PositiveInt | None = ABSENT
    non_causal: bool = ABSENT
    cache_dtype_str: str | None = ABSENT
    topk_buffer_width: int | None = ABSENT
    alignment: PositiveInt | None = ABSENT
    model_version: str | None = ABSENT
    cache_role: Literal["sparse", "indexer"] = ABSENT
    is_index_group_leader: bool = ABSENT
    non_causal_multi_token_decode: bool = ABSENT
    rswa_window: int = ABSENT
    sink_len: int | None = ABSENT
    extra_retained_tokens: int = ABSENT
    bounded_replay: bool = ABSENT
    # MambaSpec
    shapes: list[list[int]] = ABSENT
    dtypes: list[DTypeName] = ABSENT
    mamba_type: MambaTypeName = ABSENT
    mamba_cache_mode: Literal["none", "align"] = ABSENT
    num_speculative_blocks: int = ABSENT
    num_prefill_checkpoint_blocks: int = ABSENT
    prefill_checkpoint_alignment: PositiveInt | None = ABSENT
    num_heads: int = ABSENT
    tp_replicated: bool = ABSENT

    def given_fields(self) -> dict[str, Any]:
        """The spec fields this entry states (not the naming keys ``name/spec/range/...``)."""
        names = _spec_field_names()
        return {name: value for name in names if (value := getattr(self, name)) is not ABSENT}


_NAMING_KEYS = frozenset({"name", "spec", "range", "indices", "index"})


@functools.cache
def _spec_field_names() -> tuple[str, ...]:
    """``LayerEntry``'s fields but the naming keys, in declaration order (asked once per layer entry
    of every geometry: computed once)."""
    return tuple(field.name for field in attrs.fields(LayerEntry) if field.name not in _NAMING_KEYS)


SpeculativeMethod = Literal[
    "ngram", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash", "dspark", "extract_hidden_states",
    "ngram_gpu",
]


@attrs.frozen
class Speculative:
    """``speculative_config``: the method and the number of speculative tokens (default 1)."""

    method: SpeculativeMethod
    num_speculative_tokens: PositiveInt = ABSENT
    eagle_block_drop: bool = ABSENT  # False = disable_eagle_block_drop
    multi_module_mtp: bool = ABSENT  # use_multi_module_mtp() (num_nextn_predict_layers > 1)


#: ``vllm_revision`` values: the support table's revisions (kvproof/sim/startup/state_support.py REVISIONS).
RevisionName = Literal["0.33.0", "d9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628"]


@attrs.frozen
class StateBackend:
    """The state settings ``VllmConfig.validate_mamba_cached_kernel`` reads (vllm/config/vllm.py:3454-3553)
    beyond the top-level ``use_replayssm`` and the speculative fields; with it the simulator refuses an
    unsupported combination as vLLM does and sizes ReplaySSM's replay rings (docs/state-storage.md)."""

    architecture: str  # model_config.architecture
    mamba_backend: Literal["triton", "flashinfer", "cpu"] = ABSENT  # mamba_config.backend, default triton
    replayssm_buffer_len: PositiveInt = ABSENT  # cache_config.replayssm_buffer_len, default 16
    use_v2_model_runner: bool = ABSENT  # VLLM_USE_V2_MODEL_RUNNER; default: the resolved runner
    kv_connector: bool = ABSENT  # kv_transfer_config.is_kv_transfer_instance, default false
    stochastic_rounding: bool = ABSENT  # mamba_config.enable_stochastic_rounding, default false
    vllm_revision: RevisionName = ABSENT  # default 0.33.0
    #: The Mamba2 mixers' ``n_groups`` (the model config's): ReplaySSM's B ring holds its groups
    #: (``append_replayssm_ring``, model_executor/layers/mamba/mamba_utils.py:214-246).
    n_groups: PositiveInt = ABSENT


@attrs.frozen
class PlatformAlignment:
    """Inputs of ``Platform._align_hybrid_block_size`` (``vllm/platforms/interface.py:940-1137``)."""

    num_kv_heads: PositiveInt
    head_size: PositiveInt
    backend_kernel_block_sizes: list[KernelBlockSize]
    model_dtype: DTypeName = ABSENT  # default bfloat16
    use_mla: bool = ABSENT
    cache_dtype: str = ABSENT  # cache_config.cache_dtype; "auto" = model_dtype
    other_backend_kernel_block_sizes: list[list[KernelBlockSize]] = ABSENT
    mamba_prefill_checkpoint_alignment: PositiveInt | None = ABSENT
    backend_names: list[str] = ABSENT  # default geometry_backend_0, geometry_backend_1, ...


@attrs.frozen
class ViewBackend:
    """The attention backend of the layers whose name contains ``match``."""

    match: str
    kernel_block_sizes: list[KernelBlockSize]
    name: str = ABSENT


@attrs.frozen
class Views:
    num_blocks: PositiveInt = ABSENT  # default 3
    backends: list[ViewBackend] = ABSENT


@attrs.frozen
class WorkloadRequest:
    """One request of a ``simulate.requests`` workload (``docs/requests.md``)."""

    id: str
    prompt_tokens: PositiveInt
    decode_tokens: PositiveInt  # vLLM's max_tokens
    arrival_step: int = ABSENT  # default 0
    shared_prefix: str = ABSENT
    shared_prefix_tokens: int = ABSENT  # default 0


#: Upper bounds that keep a simulation's cost bounded (a step costs at least one Python call per
#: running request; a prompt costs one hash per block).
MAX_WORKLOAD_REQUESTS = 100_000
MAX_SIMULATE_STEPS = 10_000_000
MAX_SIMULATE_TOKENS = 1 << 24  # per request (prompt or decode)
MAX_WORKLOAD_TOKENS = 1 << 27  # the workload's prompt and decode tokens together
DEFAULT_MAX_STEPS = 100_000


@attrs.frozen
class Simulate:
    """Requests over time (``docs/requests.md``): one request through the managers
    (``prompt_tokens`` ...) and/or a workload through the scheduler (``requests``)."""

    prompt_tokens: PositiveInt = ABSENT
    decode_tokens: int = ABSENT  # default 0
    chunk_tokens: PositiveInt = ABSENT  # default: the whole prompt in one step
    prefix_hit_probe: bool = ABSENT  # default false
    requests: list[WorkloadRequest] = ABSENT
    max_steps: PositiveInt = ABSENT  # default DEFAULT_MAX_STEPS


@attrs.frozen
class Geometry:
    """A geometry document (see the module docstring)."""

    layers: list[LayerEntry]
    max_model_len: PositiveInt
    available_memory_bytes: MemoryBytes | None = ABSENT  # required unless num_gpu_blocks_override is set
    name: str = ABSENT
    layer_order: Literal["by_index", "as_listed"] = ABSENT
    block_size: PositiveInt | None = ABSENT
    original_max_model_len: SignedInt = ABSENT  # -1 = auto-fit max_model_len
    workers: list[list[str]] | None = ABSENT
    enable_prefix_caching: bool = ABSENT
    mamba_cache_mode: Literal["none", "align"] | None = ABSENT
    mamba_block_size: PositiveInt | None = ABSENT
    mamba_page_size_padded: PositiveInt | None = ABSENT
    num_speculative_tokens: int | None = ABSENT
    use_replayssm: bool = ABSENT
    state_backend: StateBackend | None = ABSENT
    speculative: Speculative | None = ABSENT
    prefix_match_unit: PositiveInt | None = ABSENT
    num_gpu_blocks_override: PositiveInt | None = ABSENT
    prefix_cache_retention_interval: SignedInt | None = ABSENT
    max_num_batched_tokens: PositiveInt = ABSENT
    async_scheduling: bool | None = ABSENT
    max_num_seqs: PositiveInt | None = ABSENT
    dcp: PositiveInt = ABSENT
    tp: PositiveInt = ABSENT
    disable_hybrid_kv_cache_manager: bool = ABSENT
    kv_cache_layout: LayoutName | None = ABSENT
    supported_kv_cache_layouts: SupportedLayouts | None = ABSENT
    platform_alignment: PlatformAlignment | None = ABSENT
    views: Views | None = ABSENT
    simulate: Simulate | None = ABSENT


@attrs.frozen
class ExpandedLayer:
    """One layer after expansion: its name, index (None when the entry has none), the entry
    it came from and that entry's position in ``layers``."""

    name: str
    index: int | None
    entry: LayerEntry
    entry_position: int


#: Most layers a geometry may expand to, all entries together. The largest vLLM models have a few
#: hundred layers; a range such as ``[0, 2**40]`` would otherwise be expanded into a list (memory
#: and time without bound) before anything else is checked. It is refused, with its JSON path,
#: before anything is expanded.
MAX_LAYERS = 10_000


def _entry_count(entry: LayerEntry) -> int:
    """How many layers ``entry`` expands to, computed without expanding it (0 for a malformed range)."""
    if present(entry.range):
        return len(_range(entry.range)) if _range_problem(entry.range) is None else 0
    if present(entry.indices):
        return len(entry.indices)
    return 1


def _range(value: list[int]) -> range:
    """``[start, stop]`` or ``[start, stop, step]`` as Python's ``range`` reads them."""
    return range(*value)


def _range_problem(value: list[int]) -> tuple[str, str] | None:
    """What is wrong with a layer ``range`` (its elements are non-negative integers already):
    ``(path suffix, message)``, or None. A range is ``[start, stop]`` or ``[start, stop, step]``
    as Python's ``range(start, stop, step)`` (``[0, 24, 2]``: the even layers 0..22, the way
    interleaved sliding-window layers are written), with ``start <= stop`` and ``step >= 1``."""
    if len(value) not in (2, 3):
        got = "an empty array" if not value else f"{len(value)} number{'s' if len(value) > 1 else ''}"
        return "", f"expected [start, stop] or [start, stop, step], got {got}"
    if value[0] > value[1]:
        return "[1]", f"stop {value[1]} is less than start {value[0]} (a range counts up: [start, stop])"
    if len(value) == 3 and value[2] < 1:
        return "[2]", f"step must be at least 1, got {value[2]}"
    return None


def _entry_indices(entry: LayerEntry) -> list[int | None]:
    if present(entry.range):
        return list(_range(entry.range))
    if present(entry.indices):
        return list(entry.indices)
    if present(entry.index):
        return [entry.index]
    return [None]


def _too_many_layers(geometry: Geometry) -> Diagnostic | None:
    """The first entry at which the expanded layer count passes :data:`MAX_LAYERS` (no expansion)."""
    total = 0
    for i, entry in enumerate(geometry.layers):
        count = _entry_count(entry)
        total += count
        if total > MAX_LAYERS:
            key = "range" if present(entry.range) else "indices" if present(entry.indices) else "name"
            return Diagnostic(
                LOAD_SCHEMA, f"$.layers[{i}].{key}",
                f"expands to {count} layer(s){'' if total == count else f' ({total} with the entries before it)'}; "
                f"a geometry holds at most {MAX_LAYERS} layers", None)
    return None


def expand_layers(geometry: Geometry) -> list[ExpandedLayer]:
    """Layers in the order vLLM registers them: ``by_index`` (the default) sorts the expanded
    layers by index (stable, so entries sharing an index keep their listed order; an entry with
    no index sorts after every indexed layer); ``as_listed`` keeps the document order.

    A geometry that expands to more than :data:`MAX_LAYERS` layers is an :class:`InputError`
    (:func:`load_geometry` refuses it first; this guards geometries built in code)."""
    too_many = _too_many_layers(geometry)
    if too_many is not None:
        raise InputError([too_many])
    out = []
    for position, entry in enumerate(geometry.layers):
        for index in _entry_indices(entry):
            name = entry.name if index is None else entry.name.replace("{i}", str(index))
            out.append(ExpandedLayer(name, index, entry, position))
    if geometry.layer_order is ABSENT or geometry.layer_order == "by_index":
        out.sort(key=lambda layer: (layer.index is None, layer.index if layer.index is not None else 0))
    return out


def replay_ring_layer(entry: LayerEntry) -> bool:
    """A layer to which ReplaySSM appends its rings: a Mamba2 mixer (``MambaMixer2.get_state_shape``,
    model_executor/layers/mamba/mamba_mixer2.py:1138-1155; the other Mamba layers keep their state)."""
    return entry.spec == "MambaSpec" and entry.mamba_type in (ABSENT, "MAMBA2")


def _semantic_diagnostics(geometry: Geometry, file: str | None) -> list[Diagnostic]:
    problems: list[Diagnostic] = []

    def add(path: str, message: str) -> None:
        problems.append(Diagnostic(LOAD_SCHEMA, path, message, file))

    for i, entry in enumerate(geometry.layers):
        base = f"$.layers[{i}]"
        allowed = set(SPEC_FIELDS[entry.spec])
        given = entry.given_fields()
        for field in given:
            if field not in allowed:
                add(f"{base}.{field}", f"{field!r} is not a field of {entry.spec}")
        for field in REQUIRED_FIELDS[entry.spec]:
            if field not in given:
                add(f"{base}.{field}", f"required key is missing ({entry.spec} has no default for {field!r})")
            elif given[field] is None:
                add(f"{base}.{field}", f"{entry.spec}.{field} cannot be null")
        naming = [key for key in ("range", "indices", "index") if present(getattr(entry, key))]
        if len(naming) > 1:
            add(f"{base}.{naming[1]}", f"give only one of range, indices, index (got {', '.join(naming)})")
        if present(entry.range):
            problem = _range_problem(entry.range)
            if problem is not None:
                add(f"{base}.range{problem[0]}", problem[1])
        if naming and "{i}" not in entry.name:
            if _entry_count(entry) > 1:
                add(f"{base}.name", "a name expanded over several indices must contain {i}")
        if not naming and "{i}" in entry.name:
            add(f"{base}.name", "the name contains {i} but the entry gives no range, indices or index")
        if present(entry.tokens_per_state):
            value = entry.tokens_per_state
            if entry.spec == "MambaSpec" and type(value) is not int:
                add(f"{base}.tokens_per_state", "MambaSpec.tokens_per_state is an integer")
        if present(entry.shapes):
            if not entry.shapes:
                add(f"{base}.shapes", "expected at least one state shape")
            if present(entry.dtypes) and len(entry.dtypes) != len(entry.shapes):
                add(f"{base}.dtypes", f"expected one dtype per shape ({len(entry.shapes)}), got {len(entry.dtypes)}")
    backend = geometry.state_backend
    if geometry.use_replayssm is True and present(backend) and backend is not None and not present(backend.n_groups):
        for i, entry in enumerate(geometry.layers):
            if replay_ring_layer(entry):
                add("$.state_backend.n_groups", f"required with use_replayssm: the Mamba2 layer $.layers[{i}] holds "
                    "ReplaySSM's replay rings, whose B ring has n_groups groups")
                break
    if geometry.use_replayssm is True and present(backend) and backend is not None:
        for i, entry in enumerate(geometry.layers):
            if replay_ring_layer(entry) and present(entry.shapes) and (len(entry.shapes) != 2 or len(entry.shapes[1]) != 3):
                add(f"$.layers[{i}].shapes", "a Mamba2 layer with ReplaySSM rings states its base (conv, ssm) shapes, "
                    "ssm = (heads, head_dim, state_size): the rings are appended to them")
    if problems:
        return problems
    too_many = _too_many_layers(geometry)
    if too_many is not None:
        return [attrs.evolve(too_many, file=file)]
    layers = expand_layers(geometry)
    seen: dict[str, int] = {}
    for layer in layers:
        if layer.name in seen:
            add(f"$.layers[{layer.entry_position}].name", f"duplicate layer name {layer.name!r}")
        seen[layer.name] = layer.entry_position
    if present(geometry.workers):
        named = set(seen)
        assigned: dict[str, int] = {}
        if not geometry.workers:
            add("$.workers", "expected at least one worker")
        for w, worker_layers in enumerate(geometry.workers):
            for j, name in enumerate(worker_layers):
                if name not in named:
                    add(f"$.workers[{w}][{j}]", f"unknown layer {name!r}")
                elif name in assigned:
                    add(f"$.workers[{w}][{j}]", f"layer {name!r} is on two workers")
                assigned.setdefault(name, w)
        missing = [name for name in seen if name not in assigned]
        if missing:
            add("$.workers", f"layers assigned to no worker: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        if isinstance(geometry.available_memory_bytes, list) and len(geometry.available_memory_bytes) != len(
            geometry.workers
        ):
            add("$.available_memory_bytes",
                f"expected one value per worker ({len(geometry.workers)}), got {len(geometry.available_memory_bytes)}")
    elif isinstance(geometry.available_memory_bytes, list) and len(geometry.available_memory_bytes) != 1:
        add("$.available_memory_bytes",
            "a list gives one value per worker; without \"workers\" there is one worker")
    if not present(geometry.available_memory_bytes) and not present(geometry.num_gpu_blocks_override):
        add("$.available_memory_bytes", "required key is missing (optional only with num_gpu_blocks_override)")
    if present(geometry.kv_cache_layout) and present(geometry.supported_kv_cache_layouts):
        add("$.supported_kv_cache_layouts", "give kv_cache_layout or supported_kv_cache_layouts, not both")
    if present(geometry.original_max_model_len) and geometry.original_max_model_len not in (-1,) and (
        geometry.original_max_model_len <= 0
    ):
        add("$.original_max_model_len", "expected -1 (auto-fit) or a positive integer")
    if present(geometry.views) and present(geometry.views.backends):
        for b, backend in enumerate(geometry.views.backends):
            if not backend.kernel_block_sizes:
                add(f"$.views.backends[{b}].kernel_block_sizes", "expected at least one kernel block size")
    if present(geometry.platform_alignment) and not geometry.platform_alignment.backend_kernel_block_sizes:
        add("$.platform_alignment.backend_kernel_block_sizes", "expected at least one kernel block size")
    if present(geometry.simulate):
        _simulate_diagnostics(geometry.simulate, add)
    return problems


def _simulate_diagnostics(simulate: Simulate, add) -> None:
    """The ``simulate`` block's cross-field rules (``docs/requests.md``)."""
    for key in ("prompt_tokens", "decode_tokens"):
        value = getattr(simulate, key)
        if present(value) and value > MAX_SIMULATE_TOKENS:
            add(f"$.simulate.{key}", f"at most {MAX_SIMULATE_TOKENS:,} tokens can be simulated")
    if present(simulate.max_steps) and simulate.max_steps > MAX_SIMULATE_STEPS:
        add("$.simulate.max_steps", f"at most {MAX_SIMULATE_STEPS:,} steps can be simulated")
    # chunk_tokens alone is the workload's long-prefill threshold
    single = [key for key in ("decode_tokens", "prefix_hit_probe") if present(getattr(simulate, key))]
    if single and not present(simulate.prompt_tokens):
        add(f"$.simulate.{single[0]}", "the single request needs prompt_tokens")
    max_steps = simulate.max_steps if present(simulate.max_steps) else DEFAULT_MAX_STEPS
    if present(simulate.prompt_tokens) and simulate.prompt_tokens <= MAX_SIMULATE_TOKENS:
        chunk = simulate.chunk_tokens if present(simulate.chunk_tokens) else simulate.prompt_tokens
        decode = simulate.decode_tokens if present(simulate.decode_tokens) else 0
        steps = -(-simulate.prompt_tokens // chunk) + max(decode - 1, 0)
        if steps > max_steps:
            add("$.simulate.prompt_tokens", f"the single request takes {steps:,} steps, more than max_steps ({max_steps:,})")
    if not present(simulate.requests):
        return
    if len(simulate.requests) > MAX_WORKLOAD_REQUESTS:
        add("$.simulate.requests", f"at most {MAX_WORKLOAD_REQUESTS:,} requests can be simulated")
        return
    total = sum(request.prompt_tokens + request.decode_tokens for request in simulate.requests)
    if total > MAX_WORKLOAD_TOKENS:
        add("$.simulate.requests", f"the workload holds {total:,} tokens; at most {MAX_WORKLOAD_TOKENS:,} can be simulated")
    seen: set[str] = set()
    for r, request in enumerate(simulate.requests):
        base = f"$.simulate.requests[{r}]"
        if request.id in seen:
            add(f"{base}.id", f"duplicate request id {request.id!r}")
        seen.add(request.id)
        for key in ("prompt_tokens", "decode_tokens"):
            if getattr(request, key) > MAX_SIMULATE_TOKENS:
                add(f"{base}.{key}", f"at most {MAX_SIMULATE_TOKENS:,} tokens can be simulated")
        if present(request.shared_prefix_tokens):
            if not present(request.shared_prefix):
                add(f"{base}.shared_prefix_tokens", "shared_prefix_tokens needs a shared_prefix name")
            elif request.shared_prefix_tokens > request.prompt_tokens:
                add(f"{base}.shared_prefix_tokens",
                    f"the shared prefix ({request.shared_prefix_tokens}) is longer than the prompt "
                    f"({request.prompt_tokens})")


def load_geometry(data: bytes | str | dict, file: str | None = None) -> Geometry:
    """Load a geometry strictly; raise :class:`kvproof.diagnostics.InputError` on bad input.

    ``data`` is the document's bytes or text, or an already parsed JSON tree of any type (a tree
    that is not an object is ``LD002 $: expected an object``)."""
    tree = parse_json(data, file) if isinstance(data, (bytes, str)) else data
    geometry = structure(tree, Geometry, file)
    problems = _semantic_diagnostics(geometry, file)
    if problems:
        raise InputError(sorted(set(problems), key=lambda d: (d.path, d.message)))
    return geometry
