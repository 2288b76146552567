"""Granite 4.0-H (``GraniteMoeHybridForCausalLM``): Mamba-2 and attention layers in the order of
``layer_types``.

vLLM 0.33.0 (vllm/model_executor/models/granitemoehybrid.py):

* ``ALL_DECODER_LAYER_TYPES`` (granitemoehybrid.py:321-324, 350): ``linear_attention`` a
  ``MambaMixer2`` (``model.layers.{i}.mixer``, granitemoehybrid.py:57-88) with
  ``intermediate_size = mamba_expand * hidden_size``, ``mamba_n_groups``, ``mamba_n_heads``,
  ``mamba_d_head``, ``mamba_d_state``, ``mamba_d_conv``; ``full_attention`` a
  ``GraniteMoeHybridAttention`` (``model.layers.{i}.self_attn.attn``,
  granitemoehybrid.py:225-295): GQA KV heads per rank, head size ``hidden_size //
  num_attention_heads``, no sliding window;
* the Mamba state is ``mamba2_state_shape`` / ``mamba2_state_dtype`` (the class methods,
  granitemoehybrid.py:600-646, compute the same), with the mixer's checkpoint fields
  ``num_prefill_checkpoint_blocks = prefill_checkpoint_alignment = 1`` (mamba_mixer2.py:1107-1118).

``GraniteMoeHybridConfig`` (transformers 5.20.2, configuration_granitemoehybrid.py:54-120):
``layers_block_type`` is an alias of ``layer_types`` (absent: all ``linear_attention``); defaults
``mamba_n_heads`` 128, ``mamba_n_groups`` 1, ``mamba_d_state`` 256, ``mamba_d_conv`` 4,
``mamba_expand`` 2, ``mamba_d_head`` ``auto`` = ``mamba_expand * hidden_size // mamba_n_heads``;
``num_key_value_heads`` null = the heads; its validation texts are kept.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import CONFIG_FIELD, ConfigError, HFConfig
from .mamba import mamba2_heads_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]

LAYER_TYPES = ("linear_attention", "full_attention")


def granite_hybrid(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    key = "layer_types" if config.has("layer_types") or not config.has("layers_block_type") else "layers_block_type"
    kinds = (config.str_list(key, num_layers) or ["linear_attention"] * num_layers)[:num_layers]
    for i, kind in enumerate(kinds):
        if kind not in LAYER_TYPES:
            raise ConfigError(CONFIG_FIELD, config.key_path(f"{key}[{i}]"),
                              f"expected one of {', '.join(LAYER_TYPES)} (granitemoehybrid.py:321-324), got {kind!r}",
                              config.file)
    hidden = config.int("hidden_size", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    dtype = config.model_dtype()
    intermediate = config.int("mamba_expand", 2, minimum=1) * hidden
    shapes = mamba2_heads_state(config, parallel.tp, intermediate)
    kv_key = "num_key_value_heads" if config.has("num_key_value_heads") else "num_attention_heads"
    kv_heads = kv_heads_per_rank(config, config.int(kv_key, minimum=1), kv_key, parallel.tp)
    layers = []
    for i, kind in enumerate(kinds):
        if kind == "linear_attention":
            layers.append(mamba_layer("model.layers.{i}.mixer", i, shapes, state_dtypes(dtype),
                                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1))
        else:
            fields = (("num_kv_heads", kv_heads), ("head_size", hidden // heads), ("dtype", dtype))
            layers.append(Layer("model.layers.{i}.self_attn.attn", i, "FullAttentionSpec", fields))
    return layers


ARCHITECTURES = {"GraniteMoeHybridForCausalLM": granite_hybrid}
