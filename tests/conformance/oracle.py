#!/usr/bin/env python3
"""Conformance oracle: vLLM 0.33.0's own KV-cache start-up planning, driven by a geometry.

Run it with the interpreter of ``.venv-vllm`` (made by ``scripts/conformance-setup.sh``)::

    .venv-vllm/bin/python tests/conformance/oracle.py GEOMETRY.json      # one geometry or a JSON list
    .venv-vllm/bin/python tests/conformance/oracle.py --jsonl < IN.jsonl   # one geometry per line
    .venv-vllm/bin/python tests/conformance/oracle.py --jsonl -          # same; answers stream (flushed)

For every geometry (``/work/shared/reference/geometry-format.md``) it prints one JSON object with the
output keys of ``kvproof simulate --format json``, computed by calling vLLM's planning functions in the
order of ``EngineCore._initialize_kv_caches`` (``v1/engine/core.py:251-371``). The input document is
never interpreted by formulas of our own: every number comes out of a vLLM function or object.

Where vLLM needs a part of a running engine that a geometry does not describe (an HF model config, a
speculative config, attention backends, profiled memory), the oracle builds the smallest stand-in;
``docs/conformance.md`` lists each one and why it cannot change the plan.

The script imports only the standard library, torch and vLLM. Its output on stdout is JSON only: vLLM's
log lines go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import sys
import traceback
import types
import typing
from fractions import Fraction
from typing import Any

# --- process set-up, before vLLM is imported -------------------------------------------------------
# The CPU platform is the only one that imports on a machine without a GPU. It is used for the parts of
# VllmConfig that need *a* platform (DeviceConfig); every planning decision that is platform-dependent
# is taken explicitly below (HMA switch, builder, hybrid block-size alignment on the generic Platform).
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
# vLLM logs to stdout by default (envs.py:863); stdout carries our JSON.
os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# The V2 model runner is the GPU default (config/vllm.py:730-767) unless a feature needs V1; it only
# enters the plan through VllmConfig.max_concurrent_batches (config/vllm.py:588-598). On the CPU without
# Triton vLLM would pick V1 (vllm.py:750-755), so the choice is made per geometry in build_vllm_config
# with vLLM's own _get_v2_model_runner_unsupported_features (the GPU decision, vllm.py:757-767).
os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
# A layout is forced through the geometry (cache_config.kv_cache_layout), never through the environment.
os.environ.pop("VLLM_KV_CACHE_LAYOUT", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_REAL_STDOUT = sys.stdout
with contextlib.redirect_stdout(sys.stderr):
    import torch

    from vllm.config import CacheConfig, VllmConfig
    from vllm.config.vllm import set_current_vllm_config
    from vllm.config.speculative import EagleModelTypes, NgramGPUTypes, SpeculativeConfig
    from vllm.config.mamba import MambaBackendEnum
    from vllm.model_executor.layers.mamba.abstract import MambaBase
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateDtypeCalculator, MambaStateShapeCalculator
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.config import MambaModelConfig
    from vllm.platforms.interface import Platform, PlatformEnum
    from vllm.utils.math_utils import cdiv
    from vllm.v1.attention.backend import AttentionBackend, MultipleOf
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core import kv_cache_planning as planning
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_max_concurrency_for_kv_cache_config,
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
        update_kv_cache_capacity,
    )
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1 import kv_cache_interface as kvi
    from vllm.v1.kv_cache_interface import (
        KVQuantMode,
        MambaSpec,
        SparseCacheRole,
        UniformTypeKVCacheSpecs,
    )
    from vllm.v1.worker.utils import (
        AttentionGroup,
        allocate_kv_cache,
        map_kv_caches_to_kernel_blocks,
        prepare_kernel_block_sizes,
    )

VLLM_SOURCE_MARKER = os.sep + "vllm" + os.sep
ORACLE_VERSION = 1

# ---------------------------------------------------------------------------------------------------
# Geometry format (geometry-format.md "Input")
# ---------------------------------------------------------------------------------------------------

TOP_LEVEL_KEYS = {
    "name", "layers", "layer_order", "block_size", "max_model_len", "available_memory_bytes",
    "workers", "enable_prefix_caching", "mamba_cache_mode", "mamba_block_size",
    "mamba_page_size_padded", "num_speculative_tokens", "use_replayssm", "speculative",
    "prefix_match_unit", "num_gpu_blocks_override", "prefix_cache_retention_interval",
    "max_num_batched_tokens", "async_scheduling", "max_num_seqs", "dcp", "tp",
    "disable_hybrid_kv_cache_manager", "kv_cache_layout", "supported_kv_cache_layouts",
    "platform_alignment", "views", "simulate", "state_backend",
    # kvproof extensions (docs/simulator.md): auto-fit of max_model_len
    "original_max_model_len",
}
LAYER_KEYS = {"name", "range", "indices", "index", "spec"}
# validate_mamba_cached_kernel's further inputs and the Mamba2 n_groups of ReplaySSM's rings (docs/state-storage.md)
STATE_BACKEND_KEYS = {"architecture", "mamba_backend", "replayssm_buffer_len", "use_v2_model_runner", "kv_connector",
                      "stochastic_rounding", "vllm_revision", "n_groups"}
SPECULATIVE_KEYS = {"method", "num_speculative_tokens", "eagle_block_drop", "multi_module_mtp"}
PLATFORM_ALIGNMENT_KEYS = {
    "use_mla", "num_kv_heads", "head_size", "model_dtype", "backend_kernel_block_sizes",
    "other_backend_kernel_block_sizes", "mamba_prefill_checkpoint_alignment",
    # kvproof extensions: cache_config.cache_dtype and the backends' names
    "cache_dtype", "backend_names",
}
VIEWS_KEYS = {"num_blocks", "backends"}
VIEW_BACKEND_KEYS = {"match", "kernel_block_sizes", "name"}  # name: kvproof extension

# The layer spec classes a model reports (v1/kv_cache_interface.py). HiSparse and
# UniformTypeKVCacheSpecs are built by the planner, never reported by a layer.
SPEC_CLASSES = {
    name: getattr(kvi, name)
    for name in (
        "FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "ChunkedLocalAttentionSpec",
        "MambaSpec", "CircularBufferSpec", "SlidingWindowMLASpec", "HiddenStateCacheSpec",
        "RSWASpec", "SinkFullAttentionSpec", "CrossAttentionSpec", "EncoderOnlyAttentionSpec",
    )
}

DTYPES = {
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "uint8": torch.uint8,
    "float8_e4m3fn": torch.float8_e4m3fn, "fp8": torch.float8_e4m3fn,
}
LAYOUT_NAMES = [layout.name for layout in kvi.KVCacheLayout]
MAMBA_MODES = ("none", "align")
SPEC_METHODS = (
    "ngram", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash", "dspark",
    "extract_hidden_states", "ngram_gpu",
)


class BadInput(Exception):
    """The document is not a valid geometry (status ``bad_input``)."""

    def __init__(self, message: str, path: str = "$"):
        super().__init__(f"{message} @ {path}")
        self.path = path


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: Any, path: str, *, minimum: int | None = None, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if not _is_int(value):
        raise BadInput(f"expected an integer, got {json.dumps(value)}", path)
    if minimum is not None and value < minimum:
        raise BadInput(f"expected an integer >= {minimum}, got {value}", path)
    return value


def _bool(value: Any, path: str, *, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise BadInput(f"expected a boolean, got {json.dumps(value)}", path)
    return value


def _str(value: Any, path: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BadInput(f"expected a string, got {json.dumps(value)}", path)
    return value


def _dtype(value: Any, path: str) -> torch.dtype:
    if not isinstance(value, str) or value not in DTYPES:
        raise BadInput(f"unknown dtype {json.dumps(value)} (one of {sorted(DTYPES)})", path)
    return DTYPES[value]


def _kernel_sizes(value: Any, path: str) -> list[int | MultipleOf]:
    """``[16, {"MultipleOf": 64}]`` -> ``[16, MultipleOf(64)]`` (AttentionBackend declaration)."""
    if not isinstance(value, list):
        raise BadInput("expected a list of kernel block sizes", path)
    out: list[int | MultipleOf] = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            if set(item) != {"MultipleOf"}:
                raise BadInput('expected {"MultipleOf": n}', f"{path}[{i}]")
            out.append(MultipleOf(_int(item["MultipleOf"], f"{path}[{i}].MultipleOf", minimum=1)))
        else:
            out.append(_int(item, f"{path}[{i}]", minimum=1))
    return out


def _cache_dtype(value: Any, path: str) -> str:
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE

    if value != "auto" and value not in STR_DTYPE_TO_TORCH_DTYPE:
        raise BadInput(f"unknown cache_dtype {json.dumps(value)}", path)
    return value


def _names(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput("expected a list of names", path)
    return list(value)


def _check_keys(obj: Any, allowed: set[str], path: str) -> dict:
    if not isinstance(obj, dict):
        raise BadInput("expected an object", path)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BadInput(f"unknown field {unknown[0]!r}", f"{path}.{unknown[0]}")
    return obj


# --- layer fields -------------------------------------------------------------------------------------

def _convert_field(cls: type, name: str, annotation: str, value: Any, path: str) -> Any:
    """Convert one JSON value to the dataclass field ``name`` of spec class ``cls``."""
    if name == "dtype":
        return _dtype(value, path)
    if name == "dtypes":
        if not isinstance(value, list) or not value:
            raise BadInput("expected a non-empty list of dtypes", path)
        return tuple(_dtype(v, f"{path}[{i}]") for i, v in enumerate(value))
    if name == "shapes":
        if not isinstance(value, list) or not value:
            raise BadInput("expected a non-empty list of shapes", path)
        shapes = []
        for i, shape in enumerate(value):
            if not isinstance(shape, list):
                raise BadInput("expected a list of integers", f"{path}[{i}]")
            shapes.append(tuple(_int(d, f"{path}[{i}][{j}]", minimum=0) for j, d in enumerate(shape)))
        return tuple(shapes)
    if name == "mamba_type":
        if not isinstance(value, str) or value not in MambaAttentionBackendEnum.__members__:
            raise BadInput(
                f"unknown mamba_type {json.dumps(value)} "
                f"(one of {sorted(MambaAttentionBackendEnum.__members__)})", path)
        return MambaAttentionBackendEnum[value]
    if name == "cache_role":
        try:
            return SparseCacheRole(value)
        except ValueError:
            raise BadInput('cache_role must be "sparse" or "indexer"', path) from None
    if name == "kv_quant_mode":
        if not isinstance(value, str) or value not in KVQuantMode.__members__:
            raise BadInput(f"unknown kv_quant_mode {json.dumps(value)}", path)
        return KVQuantMode[value]
    if name == "block_stride_alignment":
        if value is None:
            return None
        if isinstance(value, dict):
            if set(value) != {"MultipleOf"}:
                raise BadInput('expected an integer or {"MultipleOf": n}', path)
            return MultipleOf(_int(value["MultipleOf"], f"{path}.MultipleOf", minimum=1))
        return _int(value, path)
    if name == "tokens_per_state":
        if annotation == "int":  # MambaSpec.tokens_per_state
            return _int(value, path)
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(-?\d+)\s*/\s*(\d+)\s*", value)
            if not match or int(match.group(2)) == 0:
                raise BadInput('expected an integer or a fraction string like "1/4"', path)
            frac = Fraction(int(match.group(1)), int(match.group(2)))
            return int(frac) if frac.denominator == 1 else frac
        return _int(value, path)
    if name == "mamba_cache_mode":
        if value not in MAMBA_MODES:
            raise BadInput('mamba_cache_mode must be "none" or "align"', path)
        return value
    # Plain fields, checked against their annotation (v1/kv_cache_interface.py).
    optional = annotation.endswith("| None")
    base = annotation.replace("| None", "").strip()
    if base == "int":
        return _int(value, path, optional=optional)
    if base == "bool":
        return _bool(value, path, optional=optional)
    if base == "str":
        return _str(value, path, optional=optional)
    raise BadInput(f"field {name!r} of {cls.__name__} cannot be given in a geometry", path)


def _expand_layers(doc: dict) -> list[dict]:
    """Expand the ``layers`` entries and order them (``layer_order``)."""
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise BadInput("expected a list of layers", "$.layers")
    order = doc.get("layer_order", "by_index")
    if order not in ("by_index", "as_listed"):
        raise BadInput('layer_order must be "by_index" or "as_listed"', "$.layer_order")
    expanded: list[dict] = []
    for li, entry in enumerate(layers):
        path = f"$.layers[{li}]"
        if not isinstance(entry, dict):
            raise BadInput("expected an object", path)
        spec_name = entry.get("spec")
        if spec_name not in SPEC_CLASSES:
            raise BadInput(f"unknown spec class {json.dumps(spec_name)}", f"{path}.spec")
        cls = SPEC_CLASSES[spec_name]
        field_types = {f.name: f.type for f in dataclasses.fields(cls) if f.init}
        for key in entry:
            if key not in LAYER_KEYS and key not in field_types:
                raise BadInput(f"unknown field {key!r} for {spec_name}", f"{path}.{key}")
        name = _str(entry.get("name"), f"{path}.name")
        selectors = [k for k in ("range", "indices", "index") if k in entry]
        if len(selectors) > 1:
            raise BadInput("give only one of range, indices, index", path)
        if not selectors:
            if "{i}" in name:
                raise BadInput("a name with {i} needs range, indices or index", f"{path}.name")
            indices: list[int | None] = [None]
        elif selectors[0] == "range":
            rng = entry["range"]
            if not (isinstance(rng, list) and len(rng) == 2 and all(_is_int(x) for x in rng)
                    and 0 <= rng[0] <= rng[1]):
                raise BadInput("range must be [start, stop] with 0 <= start <= stop", f"{path}.range")
            indices = list(range(rng[0], rng[1]))
        elif selectors[0] == "indices":
            idx = entry["indices"]
            if not isinstance(idx, list):
                raise BadInput("indices must be a list of integers", f"{path}.indices")
            indices = [_int(x, f"{path}.indices[{j}]", minimum=0) for j, x in enumerate(idx)]
        else:
            indices = [_int(entry["index"], f"{path}.index", minimum=0)]
        fields = {}
        for key, value in entry.items():
            if key in LAYER_KEYS:
                continue
            fields[key] = _convert_field(cls, key, field_types[key], value, f"{path}.{key}")
        for index in indices:
            layer_name = name.replace("{i}", str(index)) if index is not None else name
            expanded.append({"name": layer_name, "index": index, "cls": cls, "fields": fields,
                             "path": path, "listed": len(expanded)})
    names = [layer["name"] for layer in expanded]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise BadInput(f"layer name {dup!r} appears twice", "$.layers")
    if order == "by_index":
        # Stable: layers of one index keep their listed order (module registration order,
        # which is static_forward_context order). A layer without an index sorts last.
        expanded.sort(key=lambda l: (l["index"] is None, l["index"] or 0, l["listed"]))
    return expanded


def parse_geometry(doc: Any) -> dict:
    """Validate a geometry document; return the settings with defaults resolved to vLLM's inputs."""
    doc = _check_keys(doc, TOP_LEVEL_KEYS, "$")
    g: dict[str, Any] = {"name": _str(doc.get("name", ""), "$.name")}
    g["layers"] = _expand_layers(doc)
    g["block_size"] = _int(doc.get("block_size"), "$.block_size", minimum=1, optional=True)
    if "max_model_len" not in doc:
        raise BadInput("max_model_len is required", "$.max_model_len")
    g["max_model_len"] = _int(doc["max_model_len"], "$.max_model_len", minimum=1)
    original = doc.get("original_max_model_len", g["max_model_len"])
    if not _is_int(original) or not (original == -1 or original >= 1):
        raise BadInput("expected -1 (auto-fit) or a positive integer", "$.original_max_model_len")
    g["original_max_model_len"] = original
    g["enable_prefix_caching"] = _bool(doc.get("enable_prefix_caching", True), "$.enable_prefix_caching")
    mode = doc.get("mamba_cache_mode")
    if mode is not None and mode not in MAMBA_MODES:
        raise BadInput('mamba_cache_mode must be "none" or "align"', "$.mamba_cache_mode")
    g["mamba_cache_mode"] = mode
    g["mamba_block_size"] = _int(doc.get("mamba_block_size"), "$.mamba_block_size", minimum=1, optional=True)
    g["mamba_page_size_padded"] = _int(doc.get("mamba_page_size_padded"), "$.mamba_page_size_padded",
                                       minimum=1, optional=True)
    g["num_speculative_tokens"] = _int(doc.get("num_speculative_tokens"), "$.num_speculative_tokens",
                                       minimum=0, optional=True)
    g["use_replayssm"] = _bool(doc.get("use_replayssm", False), "$.use_replayssm")
    g["state_backend"] = _state_backend(doc, g)
    spec = doc.get("speculative")
    if spec is not None:
        spec = _check_keys(spec, SPECULATIVE_KEYS, "$.speculative")
        method = spec.get("method")
        if method not in SPEC_METHODS:
            raise BadInput(f"unknown speculative method {json.dumps(method)}", "$.speculative.method")
        spec = {
            "method": method,
            "num_speculative_tokens": _int(spec.get("num_speculative_tokens", 1),
                                           "$.speculative.num_speculative_tokens", minimum=1),
            "eagle_block_drop": _bool(spec.get("eagle_block_drop", True), "$.speculative.eagle_block_drop"),
            "multi_module_mtp": _bool(spec.get("multi_module_mtp", False), "$.speculative.multi_module_mtp"),
        }
    g["speculative"] = spec
    g["prefix_match_unit"] = _int(doc.get("prefix_match_unit"), "$.prefix_match_unit", minimum=1, optional=True)
    g["num_gpu_blocks_override"] = _int(doc.get("num_gpu_blocks_override"), "$.num_gpu_blocks_override",
                                        minimum=1, optional=True)
    g["prefix_cache_retention_interval"] = _int(doc.get("prefix_cache_retention_interval", 0),
                                                "$.prefix_cache_retention_interval", optional=True)
    g["max_num_batched_tokens"] = _int(doc.get("max_num_batched_tokens", 8192), "$.max_num_batched_tokens",
                                       minimum=1)
    g["async_scheduling"] = _bool(doc.get("async_scheduling"), "$.async_scheduling", optional=True)
    g["max_num_seqs"] = _int(doc.get("max_num_seqs"), "$.max_num_seqs", minimum=1, optional=True)
    g["dcp"] = _int(doc.get("dcp", 1), "$.dcp", minimum=1)
    g["tp"] = _int(doc.get("tp", 1), "$.tp", minimum=1)
    g["disable_hybrid_kv_cache_manager"] = _bool(doc.get("disable_hybrid_kv_cache_manager", False),
                                                 "$.disable_hybrid_kv_cache_manager")
    layout = doc.get("kv_cache_layout")
    if layout is not None and layout not in LAYOUT_NAMES:
        raise BadInput(f"unknown kv_cache_layout {json.dumps(layout)} (one of {LAYOUT_NAMES})",
                       "$.kv_cache_layout")
    g["kv_cache_layout"] = layout
    supported = doc.get("supported_kv_cache_layouts")
    if supported is not None:
        if layout is not None:
            raise BadInput("give kv_cache_layout or supported_kv_cache_layouts, not both",
                           "$.supported_kv_cache_layouts")
        if not isinstance(supported, list) or not supported:
            raise BadInput("expected a non-empty list", "$.supported_kv_cache_layouts")
        # A flat list is one backend's declaration; a list of lists (or nulls) is one per backend.
        declarations = [supported] if all(isinstance(x, str) for x in supported) else supported
        parsed = []
        for i, decl in enumerate(declarations):
            if decl is None:
                parsed.append(None)
                continue
            if not isinstance(decl, list) or not decl or any(x not in LAYOUT_NAMES for x in decl):
                raise BadInput(f"expected a list of layout names {LAYOUT_NAMES}",
                               f"$.supported_kv_cache_layouts[{i}]")
            parsed.append(tuple(kvi.KVCacheLayout[x] for x in decl))
        supported = parsed
    g["supported_kv_cache_layouts"] = supported

    # Workers (pipeline stages) and their memory.
    names = [layer["name"] for layer in g["layers"]]
    workers = doc.get("workers")
    if workers is None:
        g["workers"] = [names]
    else:
        if not isinstance(workers, list) or not workers:
            raise BadInput("expected a non-empty list of layer-name lists", "$.workers")
        seen: set[str] = set()
        for wi, w in enumerate(workers):
            if not isinstance(w, list) or not all(isinstance(n, str) for n in w):
                raise BadInput("expected a list of layer names", f"$.workers[{wi}]")
            for n in w:
                if n not in names:
                    raise BadInput(f"unknown layer {n!r}", f"$.workers[{wi}]")
                if n in seen:
                    raise BadInput(f"layer {n!r} is on two workers", f"$.workers[{wi}]")
                seen.add(n)
        missing = [n for n in names if n not in seen]
        if missing:
            raise BadInput(f"layer {missing[0]!r} is on no worker", "$.workers")
        # Each worker reports its layers in the model's (global) order.
        g["workers"] = [[n for n in names if n in set(w)] for w in workers]
    mem = doc.get("available_memory_bytes")
    num_workers = len(g["workers"])
    if mem is None:
        if g["num_gpu_blocks_override"] is None:
            raise BadInput("available_memory_bytes is required", "$.available_memory_bytes")
        mem = 0  # only logged by vLLM when num_gpu_blocks_override is set
    if isinstance(mem, list):
        if len(mem) != num_workers:
            raise BadInput(f"expected {num_workers} values, one per worker", "$.available_memory_bytes")
        g["available_memory"] = [_int(m, f"$.available_memory_bytes[{i}]", minimum=0)
                                 for i, m in enumerate(mem)]
    else:
        g["available_memory"] = [_int(mem, "$.available_memory_bytes", minimum=0)] * num_workers

    pa = doc.get("platform_alignment")
    if pa is not None:
        pa = _check_keys(pa, PLATFORM_ALIGNMENT_KEYS, "$.platform_alignment")
        if "backend_kernel_block_sizes" not in pa:
            raise BadInput("backend_kernel_block_sizes is required",
                           "$.platform_alignment.backend_kernel_block_sizes")
        others = pa.get("other_backend_kernel_block_sizes", [])
        if not isinstance(others, list):
            raise BadInput("expected a list of kernel block size lists",
                           "$.platform_alignment.other_backend_kernel_block_sizes")
        pa = {
            "use_mla": _bool(pa.get("use_mla", False), "$.platform_alignment.use_mla"),
            "num_kv_heads": _int(pa.get("num_kv_heads"), "$.platform_alignment.num_kv_heads", minimum=1),
            "head_size": _int(pa.get("head_size"), "$.platform_alignment.head_size", minimum=1),
            "model_dtype": _dtype(pa.get("model_dtype", "bfloat16"), "$.platform_alignment.model_dtype"),
            "backend_kernel_block_sizes": _kernel_sizes(pa["backend_kernel_block_sizes"],
                                                        "$.platform_alignment.backend_kernel_block_sizes"),
            "other_backend_kernel_block_sizes": [
                _kernel_sizes(o, f"$.platform_alignment.other_backend_kernel_block_sizes[{i}]")
                for i, o in enumerate(others)
            ],
            "mamba_prefill_checkpoint_alignment": _int(
                pa.get("mamba_prefill_checkpoint_alignment"),
                "$.platform_alignment.mamba_prefill_checkpoint_alignment", minimum=1, optional=True),
            "cache_dtype": _cache_dtype(pa.get("cache_dtype", "auto"), "$.platform_alignment.cache_dtype"),
            "backend_names": _names(pa.get("backend_names", []), "$.platform_alignment.backend_names"),
        }
    if "platform_alignment" not in doc:  # vLLM aligns on every GPU: the default platform's backend
        pa = _default_platform_alignment(g["layers"])
    g["platform_alignment"] = pa

    views = doc.get("views")
    if views is not None:
        views = _check_keys(views, VIEWS_KEYS, "$.views")
        backends = views.get("backends", [])
        if not isinstance(backends, list):
            raise BadInput("expected a list", "$.views.backends")
        parsed_backends = []
        for i, b in enumerate(backends):
            b = _check_keys(b, VIEW_BACKEND_KEYS, f"$.views.backends[{i}]")
            parsed_backends.append({
                "name": _str(b.get("name"), f"$.views.backends[{i}].name", optional=True),
                "match": _str(b.get("match"), f"$.views.backends[{i}].match"),
                "kernel_block_sizes": _kernel_sizes(b.get("kernel_block_sizes"),
                                                    f"$.views.backends[{i}].kernel_block_sizes"),
            })
        views = {"num_blocks": _int(views.get("num_blocks", 3), "$.views.num_blocks", minimum=1),
                 "backends": parsed_backends}
    g["views"] = views
    # "simulate" (one request through the managers) is accepted and not driven by this oracle.
    g["simulate"] = doc.get("simulate")
    return g


# ---------------------------------------------------------------------------------------------------
# The default platform of a geometry without platform_alignment (docs/simulator.md)
# ---------------------------------------------------------------------------------------------------

#: The GPU a geometry without ``platform_alignment`` is planned on (kvproof's DEFAULT_PLATFORM).
DEFAULT_PLATFORM = "cuda, compute capability 9.0 (FlashAttention 3)"
#: Layer specs that stand for the model's attention (ModelConfig.get_head_size/get_num_kv_heads).
MODEL_ATTENTION_SPECS = (
    "FullAttentionSpec", "MLAAttentionSpec", "RSWASpec", "SinkFullAttentionSpec", "ChunkedLocalAttentionSpec",
    "SlidingWindowSpec", "SlidingWindowMLASpec", "EncoderOnlyAttentionSpec", "CrossAttentionSpec",
)


def _default_platform_alignment(layers: list[dict]) -> dict | None:
    """The model config the default platform's alignment reads: the first model-attention layer's
    heads, head size and dtype (a one-byte dtype is an fp8 cache of a bfloat16 model), and the LCM
    of the Mamba layers' prefill checkpoint alignments (mamba/abstract.py:98-113)."""
    attention = [l for l in layers if not issubclass(l["cls"], MambaSpec)]
    model = next((l for l in attention if l["cls"].__name__ in MODEL_ATTENTION_SPECS
                  and l["fields"].get("cache_role") is None and l["fields"].get("is_draft") is not True),
                 attention[0] if attention else None)
    if model is None:
        return None  # _find_non_ssm_backends finds nothing: vLLM aligns nothing
    dtype = model["fields"]["dtype"]
    one_byte = torch.empty((), dtype=dtype).element_size() == 1
    checkpoint = 1
    for l in layers:
        if issubclass(l["cls"], MambaSpec):
            value = l["fields"].get("prefill_checkpoint_alignment")
            if value is None:
                checkpoint = None
                break
            checkpoint = math.lcm(checkpoint, value)
    return {
        "use_mla": model["cls"].__name__ in ("MLAAttentionSpec", "SlidingWindowMLASpec"),
        "num_kv_heads": model["fields"]["num_kv_heads"],
        "head_size": model["fields"]["head_size"],
        "model_dtype": torch.bfloat16 if one_byte else dtype,
        "cache_dtype": "fp8" if one_byte else "auto",
        "mamba_prefill_checkpoint_alignment": checkpoint,
        "default_from_layer": model["name"],
    }


def _cuda_only_stand_ins() -> dict[str, type]:
    """The SM90 backends whose modules import CUDA kernels at import time, declared with the values
    of their vLLM source (documented in docs/conformance.md)."""
    from vllm.model_executor.layers.attention.mla_attention import MLACommonBackend
    from vllm.platforms.interface import DeviceCapability

    class FlashAttnMLAStandIn(MLACommonBackend):  # v1/attention/backends/mla/flashattn_mla.py:40-70
        supported_dtypes = [torch.float16, torch.bfloat16]
        supported_kv_cache_dtypes = ["auto", "float16", "bfloat16"]
        get_supported_kernel_block_sizes = staticmethod(lambda kv_cache_spec=None: [MultipleOf(16)])
        get_name = staticmethod(lambda: "FLASH_ATTN_MLA")
        supports_compute_capability = classmethod(lambda cls, cap: cap.major == 9)

    class FlashInferStandIn(AttentionBackend):  # v1/attention/backends/flashinfer.py:572-704 (not SM100)
        supported_dtypes = [torch.float16, torch.bfloat16]
        supported_kv_cache_dtypes = ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4"]
        get_supported_kernel_block_sizes = staticmethod(lambda kv_cache_spec=None: [16, 32, 64])
        get_name = staticmethod(lambda: "FLASHINFER")
        get_supported_head_sizes = classmethod(lambda cls: [64, 128, 256, 512])
        supports_compute_capability = classmethod(
            lambda cls, cap: DeviceCapability(8, 0) <= cap <= DeviceCapability(12, 1))

    class FlashInferMLAStandIn(MLACommonBackend):  # mla/flashinfer_mla.py:194-221: SM100 only
        get_name = staticmethod(lambda: "FLASHINFER_MLA")
        supports_compute_capability = classmethod(lambda cls, cap: cap.major == 10)

    return {"FLASH_ATTN_MLA": FlashAttnMLAStandIn, "FLASHINFER": FlashInferStandIn,
            "FLASHINFER_MLA": FlashInferMLAStandIn}


def _select_default_backend(pa: dict) -> type:
    """vLLM's own SM90 priority list (platforms/cuda.py:84-181, imported without its CUDA custom ops)
    and, per backend, the class checks of validate_configuration (v1/attention/backend.py:301-331);
    supports_combination's device probes are taken as passing on an SM90 GPU with FlashAttention 3."""
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    from vllm.platforms.cuda import _get_backend_priorities
    from vllm.platforms.interface import DeviceCapability

    cap = DeviceCapability(9, 0)
    stand_ins = _cuda_only_stand_ins()
    kv = pa["cache_dtype"]
    for enum in _get_backend_priorities(pa["use_mla"], cap, kv_cache_dtype=kv, head_size=pa["head_size"]):
        try:
            cls = enum.get_class()
        except ImportError:
            cls = stand_ins.get(enum.name)
            if cls is None:
                continue
        if (cls.is_mla() == pa["use_mla"] and not cls.is_sparse() and cls.supports_dtype(pa["model_dtype"])
                and (not cls.supported_kv_cache_dtypes or kv in cls.supported_kv_cache_dtypes)
                and cls.supports_head_size(pa["head_size"]) and cls.supports_compute_capability(cap)):
            return cls
    raise Refused(ValueError(
        f"No valid attention backend found for cuda with head_size={pa['head_size']}, dtype={pa['model_dtype']}, "
        f"kv_cache_dtype={kv}, use_mla={pa['use_mla']} (default platform: {DEFAULT_PLATFORM})."), "platform_alignment")


def _kernel_sizes_json(sizes: list) -> list:
    return [{"MultipleOf": s.base} if isinstance(s, MultipleOf) else s for s in sizes]


# ---------------------------------------------------------------------------------------------------
# Stand-ins (each one is documented in docs/conformance.md)
# ---------------------------------------------------------------------------------------------------

ARCH = "KvproofGeometryModel"


class ModelConfigStandIn:
    """Stand-in for ``vllm.config.ModelConfig`` (a real one needs an HF config from a hub).

    Only the attributes the planning code reads are present; a missing attribute raises
    AttributeError, which the oracle reports instead of guessing.
    """

    def __init__(self, g: dict):
        pa = g["platform_alignment"] or {}
        self.max_model_len = g["max_model_len"]
        # -1 asks get_kv_cache_configs for auto-fit (kv_cache_planning.py:1337-1410); max_model_len
        # is then the model's derived maximum.
        self.original_max_model_len = g["original_max_model_len"]
        self.supports_kv_cache_grouping = False  # no SupportsKVCacheGrouping model
        self.architecture = ARCH
        self.architectures = [ARCH]
        self.model = ARCH
        self.model_impl = "auto"
        self.convert_type = "none"
        self.runner_type = "generate"
        self.multimodal_config = None
        self.use_mla = pa.get("use_mla", False)
        self.dtype = pa.get("model_dtype", torch.bfloat16)
        self._num_kv_heads = pa.get("num_kv_heads")
        self._head_size = pa.get("head_size")
        has_mamba = any(issubclass(l["cls"], MambaSpec) for l in g["layers"])
        has_attention = any(issubclass(l["cls"], kvi.AttentionSpec) for l in g["layers"])
        # IsHybrid models carry attention and Mamba layers (model_executor/models/interfaces.py).
        self.is_hybrid = has_mamba and has_attention

    def get_num_kv_heads(self, parallel_config) -> int:  # per-rank value, as given
        return self._num_kv_heads

    def get_head_size(self) -> int:
        return self._head_size


def _make_speculative_config(spec: dict, num_speculative_tokens: int) -> SpeculativeConfig:
    """A SpeculativeConfig whose own methods (use_eagle, use_eagle_block_drop,
    use_multi_module_mtp, ...) run unchanged; a real one needs a draft model from a hub."""
    cfg = SpeculativeConfig.__new__(SpeculativeConfig)
    n = num_speculative_tokens
    values = {
        "method": spec["method"],
        "num_speculative_tokens": n,
        "disable_eagle_block_drop": not spec["eagle_block_drop"],
        "disable_lookahead_block_hashes": False,
        "num_speculative_tokens_per_batch_size": None,
        "disable_padded_drafter_batch": False,
        "parallel_drafting": False,
        # use_multi_module_mtp: min(num_nextn_predict_layers, n) > 1 (config/speculative.py:2188-2194);
        # a multi-module MTP draft has a module for every speculative token.
        "draft_model_config": types.SimpleNamespace(
            hf_config=types.SimpleNamespace(
                num_nextn_predict_layers=max(n, 2) if spec["multi_module_mtp"] else 1,
                model_type="kvproof_geometry_draft"),
            architectures=[]),
    }
    for key, value in values.items():
        object.__setattr__(cfg, key, value)
    return cfg


class GeometryMambaLayer(MambaBase):
    """A Mamba layer whose state is the geometry's; ``MambaBase.get_kv_cache_spec``
    (model_executor/layers/mamba/abstract.py:72-91) builds its MambaSpec."""

    def __init__(self, fields: dict, checkpoint_alignment: int | None, num_speculative_blocks: int | None,
                 ring: dict | None = None):
        self._fields = fields
        # ReplaySSM's rings, appended as MambaMixer2 appends them (mamba_mixer2.py:1120-1155)
        self._ring = ring if self.mamba_type == MambaAttentionBackendEnum.MAMBA2 else None
        self._checkpoint_alignment = checkpoint_alignment
        # The geometry's top-level num_speculative_tokens without a speculative block: vLLM's
        # num_speculative_tokens (config/vllm.py:611-623) has no other source here.
        self._num_speculative_blocks = num_speculative_blocks

    def get_state_shape(self):
        if self._ring is None:
            return self._fields["shapes"]
        r = self._ring
        return MambaStateShapeCalculator.append_replayssm_ring(
            tuple(map(tuple, self._fields["shapes"])), r["n_groups"], r["tp_world_size"], r["logical_window"],
            r["backend"], r["num_speculative_tokens"])

    def get_state_dtype(self):
        if self._ring is None:
            return self._fields["dtypes"]
        return MambaStateDtypeCalculator.append_replayssm_ring(tuple(self._fields["dtypes"]), self._ring["model_dtype"])

    @property
    def mamba_type(self):
        return self._fields.get("mamba_type", MambaAttentionBackendEnum.MAMBA2)

    @property
    def is_kv_cache_tp_replicated(self) -> bool:
        return self._fields.get("tp_replicated", False)

    def get_prefill_checkpoint_alignment(self) -> int | None:
        return self._checkpoint_alignment

    def get_attn_backend(self):
        return self.mamba_type.get_class()

    def get_kv_cache_spec(self, vllm_config):
        spec = super().get_kv_cache_spec(vllm_config)
        # Fields a layer class sets itself (e.g. MambaMixer2.get_kv_cache_spec sets the checkpoint
        # blocks, mamba_mixer2.py:1108-1118); a field stated in the geometry wins over the default.
        extra = {k: v for k, v in self._fields.items()
                 if k not in ("shapes", "dtypes", "mamba_type", "tp_replicated")}
        if self._num_speculative_blocks is not None and "num_speculative_blocks" not in extra:
            extra["num_speculative_blocks"] = self._num_speculative_blocks
        return dataclasses.replace(spec, **extra) if extra else spec


def _stand_in_backend(name: str, kernel_sizes: list, layouts: tuple | None = None) -> type:
    """An AttentionBackend declaring only what a geometry states (kernel block sizes, layouts).

    Everything else is AttentionBackend's default (customize_spec = identity,
    supports_block_size, get_preferred_block_size, is_ssm False: v1/attention/backend.py).
    """

    class _Builder:
        requires_block_table_width = False

        def __init__(self, *args, **kwargs):
            pass

    sizes = list(kernel_sizes)
    attrs = {
        "get_supported_kernel_block_sizes": staticmethod(lambda kv_cache_spec=None: list(sizes)),
        "get_name": staticmethod(lambda: name),
        "get_builder_cls": staticmethod(lambda: _Builder),
        "get_impl_cls": staticmethod(lambda: None),
        "supported_kv_cache_layouts": classmethod(lambda cls: layouts),
    }
    # A class name of its own: vLLM tells backends apart by module and qualified name
    # (AttentionBackend.full_cls_name, gpu_model_runner.py:6658-6680).
    cls_name = f"GeometryBackend{next(_BACKEND_IDS)}_{re.sub(r'[^0-9A-Za-z]', '_', name)}"
    return type(cls_name, (AttentionBackend,), attrs)


_BACKEND_IDS = itertools.count(1)


class GeometryPlatform(Platform):
    """The generic (CUDA) ``Platform`` whose attention layers are the geometry's backends.

    ``update_block_size_for_backend`` and ``_align_hybrid_block_size`` run as written in
    platforms/interface.py:749-1137; only ``_find_non_ssm_backends`` (which reads the attention
    layers of a loaded model, interface.py:679-697) is answered from the geometry.
    """

    _enum = PlatformEnum.CUDA
    device_type = "cuda"
    backends: list = []

    @classmethod
    def _find_non_ssm_backends(cls, vllm_config):
        return list(cls.backends)


def _register_stand_in_model(mamba_layers: list[GeometryMambaLayer], vllm_config) -> None:
    """Register a model class whose Mamba state is the geometry's (IsHybrid classmethods,
    as used by interface.py:1045-1061). Re-registered per geometry."""
    import torch.nn as nn

    shapes = {tuple(map(tuple, l.get_state_shape())) for l in mamba_layers}
    dtypes = {tuple(l.get_state_dtype()) for l in mamba_layers}
    attrs: dict[str, Any] = {"is_hybrid": True}
    if len(shapes) == 1 and len(dtypes) == 1:
        shape, dtype = next(iter(shapes)), next(iter(dtypes))
        attrs["get_mamba_state_shape_from_config"] = classmethod(lambda cls, cfg: shape)
        attrs["get_mamba_state_dtype_from_config"] = classmethod(lambda cls, cfg: dtype)
    else:  # several Mamba state layouts: Qwen4Exp-style (interface.py:1047-1052)
        attrs["get_mamba_specs_from_config"] = classmethod(
            lambda cls, cfg: [l.get_kv_cache_spec(cfg) for l in mamba_layers])
    model_cls = type(ARCH, (nn.Module,), attrs)
    ModelRegistry.register_model(ARCH, model_cls)


# ---------------------------------------------------------------------------------------------------
# The start-up pipeline
# ---------------------------------------------------------------------------------------------------

class Refused(Exception):
    """vLLM refused to start; ``stage`` names the pipeline step."""

    def __init__(self, exc: BaseException, stage: str):
        super().__init__(str(exc))
        self.exc = exc
        self.stage = stage


class OracleBug(Exception):
    pass


@contextlib.contextmanager
def stage(name: str):
    """Run a pipeline step; an exception raised inside vLLM's code is a start-up refusal."""
    try:
        yield
    except (Refused, BadInput):
        raise
    except Exception as exc:  # noqa: BLE001 - classified below
        frames = traceback.extract_tb(exc.__traceback__)
        innermost = frames[-1].filename if frames else ""
        # vLLM reading something a stand-in lacks is the oracle's fault, not a refusal.
        stand_in_gap = isinstance(exc, AttributeError) and isinstance(
            getattr(exc, "obj", None), (ModelConfigStandIn, SpeculativeConfig, types.SimpleNamespace,
                                        GeometryMambaLayer))
        if (VLLM_SOURCE_MARKER in innermost or "pydantic" in innermost) and not stand_in_gap:
            raise Refused(exc, name) from exc
        raise OracleBug(f"{name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc


def _spec_page(spec) -> int:
    return spec.page_size_bytes


def _blocks_per_request(vllm_config, spec) -> int:
    # The concurrency denominator term (kv_cache_utils.py:1061-1093).
    return cdiv(spec.max_memory_usage_bytes(vllm_config), spec.page_size_bytes)


def _group_json(vllm_config, group) -> dict:
    spec = group.kv_cache_spec
    return {
        "layers": list(group.layer_names),
        "spec": type(spec).__name__,
        "block_size": spec.block_size,
        "page_size_bytes": _spec_page(spec),
        "blocks_per_request_at_max_model_len": _blocks_per_request(vllm_config, spec),
        "is_eagle_group": group.is_eagle_group,
    }


def _tensor_json(tensor) -> dict:
    return {
        "size": tensor.size,
        "layers": list(tensor.layers),
        "offset": tensor.offset,
        "block_stride": tensor.block_stride,
        "layer_stride": tensor.layer_stride,
    }


def _state_backend(doc: dict, g: dict) -> dict | None:
    block = doc.get("state_backend")
    if block is None:
        return None
    block = _check_keys(block, STATE_BACKEND_KEYS, "$.state_backend")
    if block.get("vllm_revision", "0.33.0") != "0.33.0":
        raise BadInput("the oracle runs vLLM 0.33.0 only", "$.state_backend.vllm_revision")
    out = {
        "architecture": _str(block.get("architecture"), "$.state_backend.architecture"),
        "mamba_backend": block.get("mamba_backend", "triton"),
        "replayssm_buffer_len": _int(block.get("replayssm_buffer_len", 16), "$.state_backend.replayssm_buffer_len",
                                     minimum=1),
        "use_v2_model_runner": _bool(block.get("use_v2_model_runner"), "$.state_backend.use_v2_model_runner",
                                     optional=True),
        "kv_connector": _bool(block.get("kv_connector", False), "$.state_backend.kv_connector"),
        "stochastic_rounding": _bool(block.get("stochastic_rounding", False), "$.state_backend.stochastic_rounding"),
        "n_groups": _int(block.get("n_groups"), "$.state_backend.n_groups", minimum=1, optional=True),
    }
    if out["mamba_backend"] not in ("triton", "flashinfer", "cpu"):
        raise BadInput("unknown mamba_backend", "$.state_backend.mamba_backend")
    rings = [l for l in g["layers"] if issubclass(l["cls"], MambaSpec)
             and l["fields"].get("mamba_type", MambaAttentionBackendEnum.MAMBA2) == MambaAttentionBackendEnum.MAMBA2]
    if g["use_replayssm"] and rings and out["n_groups"] is None:
        raise BadInput("n_groups is required with use_replayssm and a Mamba2 layer", "$.state_backend.n_groups")
    if g["use_replayssm"] and any(len(l["fields"]["shapes"]) != 2 or len(l["fields"]["shapes"][1]) != 3 for l in rings):
        raise BadInput("a Mamba2 layer with ReplaySSM rings states its (conv, ssm) shapes", "$.layers")
    return out


def _num_speculative_tokens(g: dict) -> int:
    """VllmConfig.num_speculative_tokens (config/vllm.py:611-623); the top-level field stands for it
    without a speculative block (see plan())."""
    return g["speculative"]["num_speculative_tokens"] if g["speculative"] else (g["num_speculative_tokens"] or 0)


def build_vllm_config(g: dict) -> VllmConfig:
    cache_config = CacheConfig(block_size=g["block_size"])  # None -> default 16, not user-specified
    vllm_config = VllmConfig(cache_config=cache_config)
    cc, sc, pc = vllm_config.cache_config, vllm_config.scheduler_config, vllm_config.parallel_config
    # The planning inputs, set after VllmConfig.__post_init__ so no platform default survives.
    cc.enable_prefix_caching = g["enable_prefix_caching"]
    cc.mamba_cache_mode = g["mamba_cache_mode"] or "none"  # CacheConfig default (config/cache.py)
    cc.mamba_block_size = g["mamba_block_size"]
    cc.mamba_page_size_padded = g["mamba_page_size_padded"]
    cc.prefix_match_unit = g["prefix_match_unit"]
    cc.num_gpu_blocks_override = g["num_gpu_blocks_override"]
    cc.prefix_cache_retention_interval = g["prefix_cache_retention_interval"]
    cc.use_replayssm = g["use_replayssm"]
    cc.cache_dtype = (g["platform_alignment"] or {}).get("cache_dtype", "auto")
    cc.kv_cache_dtype_skip_layers = []
    cc.kv_cache_layout = g["kv_cache_layout"]
    pc.pipeline_parallel_size = len(g["workers"])
    sc.max_num_batched_tokens = g["max_num_batched_tokens"]
    # Derived from it in SchedulerConfig.__post_init__ (config/scheduler.py:306-307); cross-attention
    # specs size themselves by max_num_encoder_input_tokens.
    sc.max_num_encoder_input_tokens = g["max_num_batched_tokens"]
    sc.encoder_cache_size = g["max_num_batched_tokens"]
    sc.max_num_seqs = g["max_num_seqs"] or 256
    sc.enable_chunked_prefill = True
    sc.disable_chunked_mm_input = False
    sc.watermark = 0.0
    # The model runner: V2 (the GPU default) unless vLLM's own list of V2-unsupported features is
    # non-empty (config/vllm.py:757-767, 3053-3087: suffix / custom_class drafting); the environment
    # variable carries the decision to VllmConfig.use_v2_model_runner (vllm.py:747-749).
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
    if g["speculative"] is not None:
        vllm_config.speculative_config = _make_speculative_config(
            g["speculative"], g["speculative"]["num_speculative_tokens"])
        if vllm_config._get_v2_model_runner_unsupported_features():
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    if g["state_backend"] is not None and g["state_backend"]["use_v2_model_runner"] is not None:
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if g["state_backend"]["use_v2_model_runner"] else "0"
    # async_scheduling None resolves to True on a GPU with the default executor unless the V1 runner
    # has an incompatibility (config/vllm.py:1651-1664, 1685-1719): a speculative method other than
    # EAGLE-type / ngram_gpu / draft_model / dspark / dflash, or pipeline parallelism.
    if g["async_scheduling"] is None:
        v1_incompatible = not vllm_config.use_v2_model_runner and (
            (g["speculative"] is not None and g["speculative"]["method"] not in (
                *typing.get_args(EagleModelTypes), *typing.get_args(NgramGPUTypes),
                "draft_model", "dspark", "dflash"))
            or len(g["workers"]) > 1)
        sc.async_scheduling = not v1_incompatible
    else:
        sc.async_scheduling = g["async_scheduling"]
    # HMA: the geometry decides (config/vllm.py:2223-2294 would consult the platform).
    sc.disable_hybrid_kv_cache_manager = g["disable_hybrid_kv_cache_manager"]
    pc.tensor_parallel_size = g["tp"]
    pc.decode_context_parallel_size = g["dcp"]
    pc.prefill_context_parallel_size = 1
    vllm_config.model_config = ModelConfigStandIn(g)
    # (The speculative config is set above; vLLM's num_speculative_tokens is the speculative
    # config's, config/vllm.py:611-623; the top-level field stands for it only without a
    # speculative block, see plan().)
    vllm_config.compilation_config.static_forward_context = {}
    return vllm_config


def plan(g: dict) -> dict:
    layers = g["layers"]
    vllm_config = build_vllm_config(g)
    cc = vllm_config.cache_config
    has_mamba = any(issubclass(l["cls"], MambaSpec) for l in layers)
    pa = g["platform_alignment"]

    # What vLLM does with these settings while it builds its configs: tp divisible by dcp
    # (config/parallel.py:594-607); when the geometry states max_num_seqs, the scheduler's budget
    # checks (config/scheduler.py:317-360); the Mamba mode / block-size defaults of Mamba and hybrid
    # models (MambaModelConfig.verify_and_update_config, model_executor/models/config.py:750-787);
    # the --mamba-block-size validator (config/vllm.py:3441-3452).
    with stage("config"):
        type(vllm_config.parallel_config)._validate_parallel_config(vllm_config.parallel_config)
        if g["max_num_seqs"] is not None:
            vllm_config.scheduler_config.verify_max_model_len(g["max_model_len"])
        if has_mamba:
            MambaModelConfig.verify_and_update_config(vllm_config)
        VllmConfig.validate_mamba_block_size(vllm_config)
        if g["state_backend"] is not None:  # the next model validator (config/vllm.py:3454-3553)
            from oracle_state_support import _stand_in

            b = g["state_backend"]
            VllmConfig.validate_mamba_cached_kernel(_stand_in({
                **b, "use_replayssm": g["use_replayssm"], "use_v2_model_runner": vllm_config.use_v2_model_runner,
                "mamba_cache_mode": cc.mamba_cache_mode, "num_speculative_tokens": _num_speculative_tokens(g),
                "pipeline_parallel_size": len(g["workers"])}))

    standalone_k = None
    if g["speculative"] is None and g["num_speculative_tokens"] is not None:
        # MambaBase.get_kv_cache_spec: 0 with ReplaySSM, else num_speculative_tokens (abstract.py:87-90)
        standalone_k = 0 if g["use_replayssm"] else g["num_speculative_tokens"]
    ring = None
    if g["use_replayssm"] and g["state_backend"] is not None and g["state_backend"]["n_groups"] is not None:
        b = g["state_backend"]
        ring = {"n_groups": b["n_groups"], "tp_world_size": g["tp"], "logical_window": b["replayssm_buffer_len"],
                "backend": MambaBackendEnum(b["mamba_backend"]), "num_speculative_tokens": _num_speculative_tokens(g),
                "model_dtype": vllm_config.model_config.dtype}
    mamba_layers = {
        l["name"]: GeometryMambaLayer(l["fields"], pa["mamba_prefill_checkpoint_alignment"] if pa else None,
                                      standalone_k, ring)
        for l in layers if issubclass(l["cls"], MambaSpec)
    }
    # The model's layers as the model runner would register them (only Mamba layers are read:
    # get_mamba_prefill_checkpoint_alignment, mamba/abstract.py:98-113).
    vllm_config.compilation_config.static_forward_context = dict(mamba_layers)

    # Platform.update_block_size_for_backend (platforms/interface.py:749-794): phase 1 when the
    # geometry gives no block_size, the hybrid alignment (940-1137), the final backend check.
    platform_alignment_out = None
    default_out = None
    if pa is not None:
        backends = []
        has_attention = any(issubclass(l["cls"], kvi.AttentionSpec) for l in layers)
        if "default_from_layer" in pa:  # no platform_alignment block: the default platform's backend
            backend = _select_default_backend(pa)
            backends = [backend]
            with set_current_vllm_config(vllm_config):
                sizes = backend.get_supported_kernel_block_sizes()
            default_out = {
                "platform": DEFAULT_PLATFORM, "backend": backend.get_name(),
                "backend_kernel_block_sizes": _kernel_sizes_json(sizes), "from_layer": pa["default_from_layer"],
                "num_kv_heads": pa["num_kv_heads"], "head_size": pa["head_size"],
                "model_dtype": str(pa["model_dtype"]).removeprefix("torch."), "cache_dtype": pa["cache_dtype"],
                "use_mla": pa["use_mla"], "mamba_prefill_checkpoint_alignment": pa["mamba_prefill_checkpoint_alignment"],
            }
        elif has_attention:
            declared = [pa["backend_kernel_block_sizes"], *pa["other_backend_kernel_block_sizes"]]
            names = pa["backend_names"] + [
                f"geometry_backend_{i}" for i in range(len(pa["backend_names"]), len(declared))]
            backends = [_stand_in_backend(n, sizes) for n, sizes in zip(names, declared)]
        GeometryPlatform.backends = backends
        with stage("platform_alignment"):
            if vllm_config.model_config.is_hybrid and mamba_layers:
                _register_stand_in_model(list(mamba_layers.values()), vllm_config)
            GeometryPlatform.update_block_size_for_backend(vllm_config)
        platform_alignment_out = {
            "block_size": cc.block_size,
            "mamba_block_size": cc.mamba_block_size,
            "mamba_page_size_padded": cc.mamba_page_size_padded,
        }
        if default_out is not None:
            platform_alignment_out["default"] = default_out

    # Worker get_kv_cache_spec (v1/worker/gpu_model_runner.py:7081-7118): one spec per layer, in
    # registration order. Attention specs take cache_config.block_size unless the layer states one.
    specs: dict[str, kvi.KVCacheSpec] = {}
    with stage("kv_cache_spec"):
        for l in layers:
            cls, fields = l["cls"], dict(l["fields"])
            if issubclass(cls, MambaSpec):
                specs[l["name"]] = mamba_layers[l["name"]].get_kv_cache_spec(vllm_config)
                continue
            if "block_size" not in fields:
                if issubclass(cls, kvi.CircularBufferSpec):
                    raise BadInput("a CircularBufferSpec states its ring block_size", f"{l['path']}.block_size")
                fields["block_size"] = cc.block_size
            missing = [f.name for f in dataclasses.fields(cls)
                       if f.init and f.name not in fields
                       and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            if missing:
                raise BadInput(f"{cls.__name__} needs {missing[0]!r}", f"{l['path']}.{missing[0]}")
            specs[l["name"]] = cls(**fields)
    worker_specs = [{name: specs[name] for name in w} for w in g["workers"]]

    with stage("register_kv_cache_specs"):
        register_all_kvcache_specs(vllm_config)  # core.py:255

    # Non-causal layers turn off chunked prefill and prefix caching (core.py:266-280).
    if any(getattr(s, "non_causal", False) for s in specs.values()):
        vllm_config.scheduler_config.enable_chunked_prefill = False
        cc.enable_prefix_caching = False

    # resolve_kv_cache_layout (v1/attention/backends/utils.py:293-383), as core.py:285-289 calls it.
    with stage("kv_cache_layout"):
        declared = g["supported_kv_cache_layouts"]
        layout_backends = [
            _stand_in_backend(f"layouts_{i}", [MultipleOf(1)], d) for i, d in enumerate(declared or [])
        ]
        names = [layout.name for layout in get_supported_kv_cache_layouts(layout_backends)]
        layout = resolve_kv_cache_layout(
            vllm_config, [names] * len(worker_specs), [s for w in worker_specs for s in w.values()])

    with stage("kv_cache_groups"):
        global_groups = planning.get_global_kv_cache_groups(vllm_config, worker_specs)
        vllm_config.adjust_dcp_kv_cache_interleave_size(global_groups)

    # Profiling is replaced by the geometry's available memory (core.py:303-318).
    available = list(g["available_memory"]) if any(worker_specs) else [0] * len(worker_specs)
    builder = get_kv_cache_config_builder(vllm_config)
    projected = [planning._project_kv_cache_groups_to_worker(global_groups, w) for w in worker_specs]
    with stage("kv_cache_configs"):
        kv_cache_configs = planning.get_kv_cache_configs(vllm_config, worker_specs, available, global_groups)
        for cfg in kv_cache_configs:
            cfg.kv_cache_layout = cc.kv_cache_layout

    with stage("scheduler_kv_cache_config"):
        sched_cfg = generate_scheduler_kv_cache_config(kv_cache_configs)
        cc.num_gpu_blocks = sched_cfg.num_blocks
        groups = sched_cfg.kv_cache_groups
        if groups:
            participating = [gr.kv_cache_spec.block_size for gr in groups if gr.kv_cache_spec.prefix_cacheable]
            cc.block_size = min(participating if participating else [gr.kv_cache_spec.block_size for gr in groups])
            update_kv_cache_capacity(vllm_config, sched_cfg)
        vllm_config.validate_block_size()
    with stage("block_sizes"):
        scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(sched_cfg, vllm_config)
        alignment = resolve_cache_hit_alignment_tokens(sched_cfg, vllm_config, scheduler_block_size, hash_block_size)
        for cfg in (*kv_cache_configs, sched_cfg):
            cfg.hash_block_size = hash_block_size
            cfg.cache_hit_alignment_tokens = alignment

    # The workers' KV cache (model_executor.initialize_from_config, core.py:372), before the
    # scheduler exists.
    views_out = None
    if g["views"] is not None:
        views_out = worker_views(g, vllm_config, builder, projected[0], layout)

    # The scheduler's KV cache manager (v1/core/sched/scheduler.py:288-370): the coordinator and the
    # per-group managers refuse some configurations at construction (kv_cache_coordinator.py:33-62,
    # 113-159, 573-575, 663-689; single_type_kv_cache_manager.py:1442-1444).
    with stage("kv_cache_manager"):
        if groups:
            spec_cfg = vllm_config.speculative_config
            use_eagle_block_drop = bool(spec_cfg and spec_cfg.use_eagle_block_drop())
            if vllm_config.num_hash_lookahead_tokens:
                use_eagle_block_drop = False
            KVCacheManager(
                kv_cache_config=sched_cfg,
                max_model_len=vllm_config.model_config.max_model_len,
                max_in_flight_tokens=vllm_config.max_in_flight_tokens,
                enable_caching=cc.enable_prefix_caching,
                use_eagle=use_eagle_block_drop,
                num_hash_lookahead_tokens=vllm_config.num_hash_lookahead_tokens,
                num_prefill_lookahead=vllm_config.num_prefill_lookahead_tokens,
                log_stats=False,
                enable_kv_cache_events=False,
                dcp_world_size=vllm_config.parallel_config.decode_context_parallel_size,
                pcp_world_size=1,
                scheduler_block_size=scheduler_block_size,
                hash_block_size=hash_block_size,
                metrics_collector=None,
                watermark=vllm_config.scheduler_config.watermark,
                enable_mamba_shared_prefix_checkpoint=cc.enable_mamba_shared_prefix_checkpoint,
            )

    worker0 = kv_cache_configs[0]
    workers_out = []
    for wi, (wgroups, wcfg, mem) in enumerate(zip(projected, kv_cache_configs, available)):
        with stage("worker_report"):
            bpb = planning._pool_bytes_per_block_from_builder(builder, vllm_config, wgroups)
            needed = planning._max_memory_usage_bytes_from_groups(builder, vllm_config, wgroups)
        workers_out.append({
            "layers": list(g["workers"][wi]),
            "available_memory_bytes": mem,
            "bytes_per_block": bpb,
            "memory_needed_for_one_max_len_request_bytes": needed,
            "num_blocks": wcfg.num_blocks,
            "kv_tp_replicas": wcfg.kv_tp_replicas,
        })

    max_concurrency = None
    kv_cache_size_tokens = None
    per_group = []
    if groups:
        max_concurrency = cc.kv_cache_max_concurrency
        kv_cache_size_tokens = cc.kv_cache_size_tokens
        per_group = [_blocks_per_request(vllm_config, gr.kv_cache_spec) for gr in groups]
        assert max_concurrency == get_max_concurrency_for_kv_cache_config(vllm_config, sched_cfg)

    out: dict[str, Any] = {
        "status": "ok",
        "groups": [_group_json(vllm_config, gr) for gr in global_groups],
        "bytes_per_block": workers_out[0]["bytes_per_block"],
        "memory_needed_for_one_max_len_request_bytes":
            workers_out[0]["memory_needed_for_one_max_len_request_bytes"],
        "num_blocks": sched_cfg.num_blocks,
        "num_usable_blocks": sched_cfg.num_blocks - 1,
        "kv_cache_tensors": [_tensor_json(t) for t in worker0.kv_cache_tensors],
        "max_concurrency": max_concurrency,
        "kv_cache_size_tokens": kv_cache_size_tokens,
        "per_group_blocks_per_request": per_group,
        "engine_cache_config_block_size": cc.block_size,
        "scheduler_block_size": scheduler_block_size,
        "hash_block_size": hash_block_size,
        "cache_hit_alignment_tokens": alignment,
        "platform_alignment": platform_alignment_out,
        "kv_cache_layout": layout.name,
        "mamba_cache_mode": cc.mamba_cache_mode if has_mamba else None,
        "enable_prefix_caching": cc.enable_prefix_caching,
        "max_in_flight_tokens": vllm_config.max_in_flight_tokens,
        "max_model_len": vllm_config.model_config.max_model_len,  # after auto-fit
        "kv_tp_replicas": worker0.kv_tp_replicas,
        "workers": workers_out,
    }
    if views_out is not None:
        out["worker_views"] = views_out
    return out


def worker_views(g: dict, vllm_config, builder, groups, layout) -> list[dict]:
    """Kernel-block views of worker 0 (``GPUModelRunner.initialize_kv_cache``,
    v1/worker/gpu_model_runner.py:6990-7040), on a ``views.num_blocks``-block allocation on the CPU."""
    views = g["views"]
    num_blocks = views["num_blocks"]
    backends_by_match = [
        (b["match"], _stand_in_backend(b["name"] or b["match"], b["kernel_block_sizes"]))
        for b in views["backends"]
    ]
    default_backend = _stand_in_backend("default", [MultipleOf(1)])

    def backend_for(layer_name: str):
        for match, backend in backends_by_match:
            if match in layer_name:
                return backend
        return default_backend

    out: list[dict] = []
    with stage("worker_views"):
        # The stand-in pool has views.num_blocks blocks (stand-in 8): num_gpu_blocks_override is
        # suppressed as vLLM's own one-block probe does (kv_cache_planning.py:286-293); it would
        # otherwise size this CPU allocation (may_override_num_blocks, 242-248) to the override.
        saved_override = vllm_config.cache_config.num_gpu_blocks_override
        vllm_config.cache_config.num_gpu_blocks_override = None
        try:
            cfg = builder.get_kv_cache_config_from_groups(vllm_config, groups, num_blocks)
        finally:
            vllm_config.cache_config.num_gpu_blocks_override = saved_override
        # initialize_attn_backend: one AttentionGroup per (backend, layer spec) in each cache group
        # (gpu_model_runner.py:6648-6726).
        attn_groups: list[list[AttentionGroup]] = []
        for gid, group in enumerate(cfg.kv_cache_groups):
            keyed: dict[tuple, list[str]] = {}
            key_objs: dict[tuple, tuple] = {}
            for name in group.layer_names:
                spec = group.kv_cache_spec
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    spec = spec.kv_cache_specs[name]
                backend = backend_for(name)
                key = (backend.full_cls_name(), spec, 0)
                key_objs[key] = (backend, spec)
                keyed.setdefault(key, []).append(name)
            attn_groups.append([
                AttentionGroup(key_objs[k][0], names, key_objs[k][1], gid) for k, names in keyed.items()
            ])
        kernel_block_sizes = prepare_kernel_block_sizes(cfg, attn_groups)
        for gid, groups_of_gid in enumerate(attn_groups):
            for ag in groups_of_gid:
                ag.create_metadata_builders(
                    vllm_config, torch.device("cpu"),
                    kernel_block_sizes[gid] if gid < len(kernel_block_sizes) else None)
        kv_caches = allocate_kv_cache(cfg, torch.device("cpu"), layout, kernel_block_sizes)
        flat_groups = [ag for gs in attn_groups for ag in gs]
        mapped = map_kv_caches_to_kernel_blocks(kv_caches, flat_groups)
        base_ptr = None
        for ag in flat_groups:
            first = ag.layer_names[0]
            view = mapped[first]
            if base_ptr is None:
                base_ptr = kv_caches[first].untyped_storage().data_ptr()
            # Kernel block ids of manager blocks 0..2, one block per call: a block table row can be
            # narrower than 3 blocks (max_model_len / block_size), the ids of a block do not depend on
            # its column (AttentionGroup.map_to_kernel_block_table, v1/worker/utils.py:380-395).
            kernel_ids: list[int] = []
            for block in range(min(3, num_blocks)):
                row = torch.tensor([[block]], dtype=torch.int32)
                kernel_ids += ag.map_to_kernel_block_table(row)[0].tolist()
            out.append({
                "kv_cache_group": ag.kv_cache_group_id,
                "backend": ag.backend.get_name(),
                "layers": list(ag.layer_names),
                "spec": type(ag.kv_cache_spec).__name__,
                "kernel_block_size": kernel_block_sizes[ag.kv_cache_group_id]
                if ag.kernel_block_size is None else ag.kernel_block_size,
                "kernel_block_stride": ag.kernel_block_stride,
                "dtype": str(view.dtype).replace("torch.", ""),
                "shape": list(view.shape),
                "strides": list(view.stride()),
                "storage_offset_bytes": view.storage_offset() * view.element_size(),
                "kernel_block_table": kernel_ids,
            })
    return out


def run_geometry(doc: Any) -> dict:
    """Plan one geometry; never raises for a refusal or a bad document."""
    name = doc.get("name") if isinstance(doc, dict) else None
    head: dict[str, Any] = {"name": name} if name is not None else {}
    try:
        g = parse_geometry(doc)
        with contextlib.redirect_stdout(sys.stderr):
            result = plan(g)
        return {**head, **result}
    except BadInput as exc:
        return {**head, "status": "bad_input", "error": {"message": str(exc), "type": "BadInput"}}
    except Refused as exc:
        return {**head, "status": "refused",
                "error": {"message": str(exc.exc), "type": type(exc.exc).__name__, "stage": exc.stage}}
    except OracleBug as exc:
        return {**head, "status": "oracle_error", "error": {"message": str(exc), "type": "OracleBug"}}


def _read_documents(path: str) -> tuple[list, bool]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return (doc, True) if isinstance(doc, list) else ([doc], False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("geometry", nargs="?", help="a JSON file (one geometry or a list)")
    parser.add_argument("--jsonl", action="store_true",
                        help="read one geometry per line from stdin, answer one line each (flushed)")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print (file mode)")
    parser.add_argument("--write-expected", nargs="+", metavar="GEOMETRY",
                        help="write each geometry's answer to <stem>.expected.json beside it")
    args = parser.parse_args(argv)
    out = _REAL_STDOUT
    if args.write_expected:
        for path in args.write_expected:
            if path.endswith(".expected.json"):
                continue
            docs, is_list = _read_documents(path)
            results = [run_geometry(d) for d in docs]
            target = re.sub(r"\.json$", "", path) + ".expected.json"
            with open(target, "w", encoding="utf-8") as fh:
                json.dump(results if is_list else results[0], fh, indent=1)
                fh.write("\n")
            out.write(f"{target}: {', '.join(r['status'] for r in results)}\n")
        return 0
    if args.jsonl or args.geometry in (None, "-"):
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                result = {"status": "bad_input", "error": {"message": f"invalid JSON: {exc}", "type": "BadInput"}}
            else:
                result = run_geometry(doc)
            out.write(json.dumps(result) + "\n")
            out.flush()
        return 0
    docs, is_list = _read_documents(args.geometry)
    results = [run_geometry(d) for d in docs]
    payload = results if is_list else results[0]
    out.write(json.dumps(payload, indent=args.indent) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
