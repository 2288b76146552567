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

In ``align`` mode the GDN spec depends on the engine beyond the config: on the default platform
(CUDA SM90) the prefill backend is FlashInfer (``_resolve_gdn_prefill_backend``,
qwen_gdn_linear_attn.py:148-267), so each GDN layer exports prefill checkpoints with alignment 64
and its spec carries ``prefill_checkpoint_alignment`` = the prefix-cache grid
(``get_mamba_prefill_checkpoint_grid``, layers/mamba/abstract.py:116-129: the engine's final
``mamba_block_size`` or ``lcm(prefix_match_unit, 64)``, qwen_gdn_linear_attn.py:689-750). A
geometry's ``prefill_checkpoint_alignment`` is both the layer's alignment and the spec's grid,
which here differ, so kvproof maps Qwen3-Next in ``none`` mode only and refuses ``align``.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import CONFIG_ARCH, CONFIG_FIELD, ConfigError, HFConfig
from .mamba import gated_delta_net_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]

LAYER_TYPES = ("linear_attention", "full_attention")


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


def qwen3_next(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    if parallel.mamba_cache_mode == "align":
        raise ConfigError(CONFIG_ARCH, "$.architectures[0]", (
            "Qwen3NextForCausalLM is mapped for mamba_cache_mode none only: in align mode its GDN spec's "
            "prefill_checkpoint_alignment is the engine's prefix-cache grid (qwen_gdn_linear_attn.py:736-750), "
            "which a geometry cannot state yet; give --set enable_prefix_caching=false or "
            "--set mamba_cache_mode=none"), config.file)
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
    layers = []
    for i, kind in enumerate(kinds):
        if kind == "linear_attention":
            layers.append(mamba_layer("model.layers.{i}.linear_attn", i, shapes, state_dtypes(dtype), "GDN_ATTN"))
        else:
            fields = (("num_kv_heads", kv_heads), ("head_size", head_size), ("dtype", dtype))
            layers.append(Layer("model.layers.{i}.self_attn.attn", i, "FullAttentionSpec", fields))
    return layers


ARCHITECTURES = {"Qwen3NextForCausalLM": qwen3_next}
