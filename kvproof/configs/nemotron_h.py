"""Nemotron-H (``NemotronHForCausalLM``): Mamba-2 mixers, attention, MLP and MoE layers in the order
of ``hybrid_override_pattern``.

vLLM 0.33.0 (vllm/model_executor/models/nemotron_h.py):

* one layer per character of ``hybrid_override_pattern`` (nemotron_h.py:548-615): ``M`` a
  ``MambaMixer2`` (``model.layers.{i}.mixer``), ``*`` an ``Attention``
  (``model.layers.{i}.mixer.attn``), ``-`` an MLP and ``E`` a MoE, which hold no cache;
* the mixer (nemotron_h.py:377-406): ``intermediate_size = mamba_num_heads * mamba_head_dim``,
  ``n_groups``, ``ssm_state_size``, ``conv_kernel``; its state is
  ``mamba2_state_shape`` / ``mamba2_state_dtype`` (the class methods
  ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``,
  nemotron_h.py:761-821, compute the same), and its spec carries
  ``num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1``
  (layers/mamba/mamba_mixer2.py:1107-1118);
* the temporal state's dtype: ``NemotronHForCausalLMConfig`` sets ``mamba_ssm_cache_dtype`` to
  the config's ``mamba_ssm_cache_dtype``, float32 when absent (model_executor/models/config.py:
  812-840);
* the attention (nemotron_h.py:426-490): GQA KV heads per rank, head size ``head_dim`` or
  ``hidden_size // num_attention_heads``, the config's ``sliding_window`` for every attention layer
  when set.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import CONFIG_FIELD, ConfigError, HFConfig
from .mamba import mamba2_state, mamba_layer, state_dtypes

__all__ = ["ARCHITECTURES"]

#: ``ALL_DECODER_LAYER_TYPES`` (nemotron_h.py:548-553).
LAYER_KINDS = "M-*E"


def nemotron_h(config: HFConfig, parallel: Parallel) -> list[Layer]:
    pattern = config.str("hybrid_override_pattern")
    for i, kind in enumerate(pattern):
        if kind not in LAYER_KINDS:
            raise ConfigError(CONFIG_FIELD, config.key_path("hybrid_override_pattern"),
                              f"Unsupported layer type {kind!r} at layer {i}", config.file)  # nemotron_h.py:598-601
    dtype = config.model_dtype()
    layers: list[Layer] = []
    # vLLM checks the attention heads first, for every model (config/model.py:1557-1564)
    attention_heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, attention_heads, "num_attention_heads", parallel.tp)
    if "M" in pattern:
        heads = config.int("mamba_num_heads", minimum=1)
        head_dim = config.int("mamba_head_dim", minimum=1)
        shapes = mamba2_state(config, parallel.tp, intermediate_size=heads * head_dim,
                              n_groups=config.int("n_groups", minimum=1), num_heads=heads, head_dim=head_dim,
                              state_size=config.int("ssm_state_size", minimum=1),
                              conv_kernel=config.int("conv_kernel", minimum=1),
                              heads_key="mamba_num_heads", groups_key="n_groups")
        ssm_dtype = config.str("mamba_ssm_cache_dtype", "float32")
        dtypes = state_dtypes(dtype, ssm_dtype)
    if "*" in pattern:
        kv_heads = kv_heads_per_rank(config, config.int("num_key_value_heads", minimum=1), "num_key_value_heads",
                                     parallel.tp)
        head_size = config.int("head_dim", None, minimum=1) or config.int("hidden_size", minimum=1) // attention_heads
        window = config.int("sliding_window", None, minimum=1)
    for i, kind in enumerate(pattern):
        if kind == "M":
            layers.append(mamba_layer("model.layers.{i}.mixer", i, shapes, dtypes,
                                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1))
        elif kind == "*":
            fields = {"num_kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
            spec = "FullAttentionSpec"
            if window is not None:
                fields["sliding_window"], spec = window, "SlidingWindowSpec"
            layers.append(Layer("model.layers.{i}.mixer.attn", i, spec, tuple(fields.items())))
    return layers


ARCHITECTURES = {"NemotronHForCausalLM": nemotron_h}
