"""Jamba (``JambaForCausalLM``): Mamba-1 mixers with an attention layer every ``attn_layer_period``
layers.

vLLM 0.33.0 (vllm/model_executor/models/jamba.py):

* the layer kinds are ``JambaConfig.layers_block_type``: ``attention`` where
  ``i % attn_layer_period == attn_layer_offset``, else ``mamba`` (jamba.py:322; transformers
  5.20.2 configuration_jamba.py:79-103, defaults period 8, offset 4);
* a mamba layer is a ``MambaMixer`` (``model.layers.{i}.mixer``, jamba.py:127-141,
  ``MAMBA1``, layers/mamba/mamba_mixer.py:418-428) of ``mamba1_state_shape`` /
  ``mamba1_state_dtype`` with ``intermediate_size = mamba_expand * hidden_size``, ``mamba_d_state``,
  ``mamba_d_conv`` (the class methods, jamba.py:458-484, compute the same); no prefill checkpoint
  fields (``MambaBase.get_kv_cache_spec``, layers/mamba/abstract.py:72-91);
* an attention layer (``model.layers.{i}.attn``: the decoder layer's ``.attn``, jamba.py:195-240): GQA KV heads per
  rank, head size ``hidden_size // num_attention_heads``.

Defaults (``JambaConfig``): ``num_key_value_heads`` 8, ``mamba_d_state`` 16, ``mamba_d_conv`` 4,
``mamba_expand`` 2.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import HFConfig
from .mamba import mamba1_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]


def jamba(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    hidden = config.int("hidden_size", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    period = config.int("attn_layer_period", 8, minimum=1)
    offset = config.int("attn_layer_offset", 4)
    dtype = config.model_dtype()
    shapes = mamba1_state(config, parallel.tp, intermediate_size=config.int("mamba_expand", 2, minimum=1) * hidden,
                          state_size=config.int("mamba_d_state", 16, minimum=1),
                          conv_kernel=config.int("mamba_d_conv", 4, minimum=1), key="mamba_expand")
    kv_heads = kv_heads_per_rank(config, config.int("num_key_value_heads", 8, minimum=1), "num_key_value_heads",
                                 parallel.tp)
    attention = (("num_kv_heads", kv_heads), ("head_size", hidden // heads), ("dtype", dtype))
    layers = []
    for i in range(num_layers):
        if i % period == offset:
            layers.append(Layer("model.layers.{i}.attn", i, "FullAttentionSpec", attention))
        else:
            layers.append(mamba_layer("model.layers.{i}.mixer", i, shapes, state_dtypes(dtype), "MAMBA1"))
    return layers


ARCHITECTURES = {"JambaForCausalLM": jamba}
