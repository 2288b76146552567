"""Falcon-H1 (``FalconH1ForCausalLM``): every decoder layer runs attention and a Mamba-2 mixer side
by side.

vLLM 0.33.0 (vllm/model_executor/models/falcon_h1.py):

* ``FalconH1ParallelHybrid`` (falcon_h1.py:322-355) builds, for decoder layer ``i`` of ``N``, an
  attention branch (``model.layers.{i}.attn``, falcon_h1.py:215-281: GQA KV heads per rank, head
  size ``head_dim`` or ``hidden_size // num_attention_heads``) and a Mamba branch numbered apart,
  ``model.{N + i}.mixer`` (``ssm_prefix``, falcon_h1.py:343-345), registered in that order;
* the mixer (falcon_h1.py:100-135): ``MambaMixer2`` with ``intermediate_size = mamba_d_ssm`` (null:
  ``mamba_expand * hidden_size``), ``mamba_n_groups``, ``mamba_n_heads``, ``mamba_d_head``,
  ``mamba_d_state``, ``mamba_d_conv``: ``mamba2_state_shape`` / ``mamba2_state_dtype`` (the class
  methods, falcon_h1.py:540-575, compute the same), checkpoint fields 1 and 1
  (mamba_mixer2.py:1107-1118).

``FalconH1Config`` defaults (transformers 5.20.2, configuration_falcon_h1.py:66-131):
``num_key_value_heads`` 8 (null: the heads), ``mamba_d_ssm`` 1024, ``mamba_n_heads`` 128,
``mamba_d_head`` ``auto`` (= intermediate // heads), ``mamba_n_groups`` 1, ``mamba_d_state`` 256,
``mamba_d_conv`` 4, ``mamba_expand`` 2; its validation texts are kept.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import HFConfig
from .mamba import mamba2_heads_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]


def falcon_h1(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    hidden = config.int("hidden_size", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    dtype = config.model_dtype()
    if "mamba_d_ssm" not in config.tree:
        intermediate = 1024
    else:
        intermediate = config.int("mamba_d_ssm", None, minimum=1) or int(config.int("mamba_expand", 2) * hidden)
    shapes = mamba2_heads_state(config, parallel.tp, intermediate)
    if "num_key_value_heads" in config.tree and not config.has("num_key_value_heads"):
        kv_key = "num_attention_heads"  # null: the heads (configuration_falcon_h1.py:105-106)
    else:
        kv_key = "num_key_value_heads"
    total_kv = config.int(kv_key, 8, minimum=1)
    kv_heads = kv_heads_per_rank(config, total_kv, kv_key, parallel.tp)
    head_size = config.int("head_dim", None, minimum=1) or hidden // heads
    attention = (("num_kv_heads", kv_heads), ("head_size", head_size), ("dtype", dtype))
    layers = []
    for i in range(num_layers):
        layers.append(Layer("model.layers.{i}.attn", i, "FullAttentionSpec", attention))
        layers.append(mamba_layer("model.{i}.mixer", num_layers + i, shapes, state_dtypes(dtype), decoder_index=i,
                                  num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1))
    return layers


ARCHITECTURES = {"FalconH1ForCausalLM": falcon_h1}
