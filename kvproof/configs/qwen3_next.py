"""Qwen3-Next (``Qwen3NextForCausalLM``): Gated DeltaNet linear attention and full attention layers
in the order of ``layer_types``.

vLLM 0.33.0 (vllm/model_executor/models/qwen3_next.py, layers/mamba/gdn/qwen_gdn_linear_attn.py):

* ``Qwen3NextDecoderLayer`` (qwen3_next.py:500-518): ``linear_attention`` builds a
  ``QwenGatedDeltaNetAttention`` (``model.layers.{i}.linear_attn``), ``full_attention`` a
  ``Qwen3NextAttention`` (``model.layers.{i}.self_attn.attn``); ``Qwen3NextConfig`` fills an absent
  ``layer_types`` with full attention every ``full_attention_interval`` (4) layers (transformers
  5.20.2, configuration_qwen3_next.py:130-135);
* the GDN state: ``gated_delta_net_state_shape`` / ``gated_delta_net_state_dtype`` of
  ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``,
  ``linear_value_head_dim``, ``linear_conv_kernel_dim`` (qwen_gdn_linear_attn.py:545-556; the
  class methods, qwen3_next.py:881-912, compute the same), ``mamba_type`` ``GDN_ATTN``;
* the attention (qwen3_next.py:280-345): GQA KV heads per rank, head size ``head_dim`` or
  ``hidden_size // (num_attention_heads / tp)`` (qwen3_next.py:308).

In ``align`` mode (prefix caching on) the default platform (CUDA SM90) runs the GDN prefill on
FlashInfer (``_resolve_gdn_prefill_backend``, qwen_gdn_linear_attn.py:236-260), so each GDN layer
exports prefill checkpoints: the layer's own alignment is 64 (``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``,
v1/attention/backends/gdn_attn.py:34; qwen_gdn_linear_attn.py:689-700), which the platform's block
alignment reads (``get_mamba_prefill_checkpoint_alignment``, layers/mamba/abstract.py:98-113,
platforms/interface.py:1086-1091), and its spec carries ``num_prefill_checkpoint_blocks = 1`` and
``prefill_checkpoint_alignment`` = the prefix-cache grid: ``lcm(prefix_match_unit, 64)``, else the
final ``mamba_block_size`` (``get_mamba_prefill_checkpoint_grid``, abstract.py:116-129;
qwen_gdn_linear_attn.py:736-750). The two differ, so the geometry states the layer's alignment in
``platform_alignment`` (the default platform's, with ``mamba_prefill_checkpoint_alignment = 64``)
and the grid in the spec, read from the plan's aligned ``mamba_block_size``.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from .common import Layer, Model, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import CONFIG_FIELD, CONFIG_PARALLEL, ConfigError, HFConfig
from .mamba import gated_delta_net_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]

LAYER_TYPES = ("linear_attention", "full_attention")
#: ``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`` (v1/attention/backends/gdn_attn.py:34).
GDN_CHECKPOINT_ALIGNMENT = 64
#: Memory for the plan that only settles the block sizes (the alignment does not read memory).
_ALIGNMENT_PROBE_MEMORY = 1 << 50


def _layer_types(config: HFConfig, num_layers: int) -> list[str]:
    value = config.str_list("layer_types", num_layers)
    if value is None:
        interval = config.int("full_attention_interval", 4, minimum=1)
        return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(num_layers)]
    for i, kind in enumerate(value[:num_layers]):
        if kind not in LAYER_TYPES:
            raise ConfigError(CONFIG_FIELD, config.key_path(f"layer_types[{i}]"),
                              f"Invalid layer_type {kind}", config.file)  # qwen3_next.py:517-518
    return value[:num_layers]


def qwen3_next(config: HFConfig, parallel: Parallel) -> list[Layer] | Model:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    kinds = _layer_types(config, num_layers)
    dtype = config.model_dtype()
    shapes = gated_delta_net_state(
        config, parallel.tp, num_k_heads=config.int("linear_num_key_heads", minimum=1),
        num_v_heads=config.int("linear_num_value_heads", minimum=1),
        head_k_dim=config.int("linear_key_head_dim", minimum=1),
        head_v_dim=config.int("linear_value_head_dim", minimum=1),
        conv_kernel=config.int("linear_conv_kernel_dim", minimum=1))
    kv_heads = kv_heads_per_rank(config, config.int("num_key_value_heads", minimum=1), "num_key_value_heads",
                                 parallel.tp)
    head_size = config.int("head_dim", None, minimum=1) or config.int("hidden_size", minimum=1) // (heads // parallel.tp)
    align = parallel.mamba_cache_mode == "align"
    # In align mode the grid is a placeholder until _complete_align reads the plan's block size.
    checkpoints = {"num_prefill_checkpoint_blocks": 1, "prefill_checkpoint_alignment": GDN_CHECKPOINT_ALIGNMENT} \
        if align else {}
    layers = []
    for i, kind in enumerate(kinds):
        if kind == "linear_attention":
            layers.append(mamba_layer("model.layers.{i}.linear_attn", i, shapes, state_dtypes(dtype), "GDN_ATTN",
                                      **checkpoints))
        else:
            fields = (("num_kv_heads", kv_heads), ("head_size", head_size), ("dtype", dtype))
            layers.append(Layer("model.layers.{i}.self_attn.attn", i, "FullAttentionSpec", fields))
    return Model(layers, complete=_complete_align) if align else layers


def _complete_align(geometry: dict[str, Any]) -> dict[str, Any]:
    """The align-mode geometry: the default platform's ``platform_alignment`` with the GDN layers'
    checkpoint alignment (unless ``--set platform_alignment`` gives one), and each GDN spec's
    ``prefill_checkpoint_alignment`` = the prefix-cache grid (abstract.py:116-129)."""
    from ..models.codec import present, unstructure
    from ..models.geometry import expand_layers, load_geometry
    from ..sim import PlanRefusal, plan
    from ..sim.startup.platform import default_platform_alignment

    def probe():  # the geometry as far as the block sizes go (they do not read memory); LD002 if bad
        out = {key: value for key, value in geometry.items() if key not in ("num_gpu_blocks_override", "simulate")}
        return load_geometry(dict(out, available_memory_bytes=_ALIGNMENT_PROBE_MEMORY))

    geometry = dict(geometry)
    if "platform_alignment" not in geometry:
        default = default_platform_alignment(expand_layers(probe()))
        geometry["platform_alignment"] = unstructure(
            attrs.evolve(default.config, mamba_prefill_checkpoint_alignment=GDN_CHECKPOINT_ALIGNMENT))
    loaded = probe()
    if present(loaded.prefix_match_unit):
        grid = math.lcm(loaded.prefix_match_unit, GDN_CHECKPOINT_ALIGNMENT)
    else:  # the final mamba_block_size: the platform's alignment, which the spec's grid does not enter
        try:
            grid = plan(loaded).settings.mamba_block_size
        except PlanRefusal as refusal:
            raise ConfigError(CONFIG_PARALLEL, "$", f"vLLM refuses these settings: {refusal.message}") from None
    geometry["layers"] = [dict(entry, prefill_checkpoint_alignment=grid) if "prefill_checkpoint_alignment" in entry
                          else entry for entry in geometry["layers"]]
    return geometry


ARCHITECTURES = {"Qwen3NextForCausalLM": qwen3_next}
