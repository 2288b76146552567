"""Kimi-Linear (``KimiLinearForCausalLM``): Kimi Delta Attention (KDA) linear-attention layers and
multi-head latent attention (MLA) layers, chosen per layer by ``linear_attn_config``.

vLLM 0.33.0 registers the class from ``vllm.models.kimi_k3`` (model_executor/models/registry.py:
148-151; the CUDA build, models/kimi_k3/__init__.py:32-34) and reads the file through its own
``KimiLinearConfig`` (transformers_utils/config.py:142, transformers_utils/configs/kimi_linear.py):

* ``KimiDecoderLayer`` (models/kimi_k3/nvidia/model.py:715-760): layer ``i`` is a KDA layer iff
  ``i + 1`` is in ``linear_attn_config["kda_layers"]`` (1-based; ``is_kda_layer``,
  configs/kimi_linear.py:157-161; without ``linear_attn_config`` every layer is MLA), else MLA.
  Both register as ``model.layers.{i}.self_attn``;
* a KDA layer (``KimiGatedDeltaNetAttention``, layers/mamba/gdn/kimi_gdn_linear_attn.py:156-190;
  ``use_full_rank_gate`` selects Kimi-K3's private ``KimiK3DeltaAttention`` instead, not mapped):
  ``num_heads`` and ``head_dim`` of ``linear_attn_config``, asserted ``num_heads % tp == 0``
  (:189); its ``MambaSpec`` (layers/mamba/abstract.py:72-91) has ``mamba_type`` ``GDN_ATTN``
  (gdn/base.py:49-51), the shapes of ``kda_state_shape`` (mamba_utils.py:296-319): conv
  ``(short_conv_kernel_size - 1, 3 * num_heads * head_dim / tp)`` (queries, keys and values in one
  packed state), recurrent ``(num_heads / tp, head_dim, head_dim)``; and the dtypes of
  ``kda_state_dtype`` (mamba_utils.py:133-148), which the layer calls without the SSM cache dtype
  (kimi_gdn_linear_attn.py:157-164): the conv state in the model dtype, the recurrent state in
  float32. It exports no prefill checkpoints (``MambaBase.get_prefill_checkpoint_alignment``,
  abstract.py:65-70);
* an MLA layer (``MultiHeadLatentAttention``, models/kimi_k3/nvidia/mla.py:127-431; vLLM asserts
  the MLA sizes and ``mla_use_nope``, model.py:735-744) caches the latent vector and the RoPE key
  of one head, ``head_size = kv_lora_rank + qk_rope_head_dim`` (mla.py:160), and reports
  ``MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, head_size, dtype, cache_dtype_str)``
  (mla.py:421-437), the same on every tensor-parallel rank. MTP layers
  (``num_nextn_predict_layers``) exist only with a speculative config, which a geometry from a
  config does not set.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, divide
from .hf import CONFIG_ARCH, CONFIG_FIELD, ConfigError, HFConfig
from .mamba import mamba_layer

__all__ = ["ARCHITECTURES"]

#: The Mamba-like state type of a KDA layer (``GatedDeltaNetAttention.mamba_type``, gdn/base.py:49-51).
KDA_MAMBA_TYPE = "GDN_ATTN"
#: ``kda_state_dtype``'s recurrent state for the ``auto`` SSM cache dtype (mamba_utils.py:140-141).
KDA_RECURRENT_DTYPE = "float32"
#: The MLA sizes vLLM asserts for a non-KDA layer (model.py:735-743).
MLA_KEYS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


def _kda_config(config: HFConfig) -> HFConfig | None:
    """``linear_attn_config`` (configs/kimi_linear.py:117-121: its ``kda_layers`` and
    ``full_attn_layers`` must be present), or None without one."""
    if not config.has("linear_attn_config"):
        return None
    kda = HFConfig(config.tree["linear_attn_config"], config.file, config.key_path("linear_attn_config"))
    for key in ("kda_layers", "full_attn_layers"):
        value = kda.raw(key)
        if type(value) is not list or not all(type(item) is int for item in value):
            raise ConfigError(CONFIG_FIELD, kda.key_path(key), "expected an array of layer numbers (1-based)",
                              config.file)
    if kda.raw("use_full_rank_gate", False) is not False:
        raise ConfigError(CONFIG_ARCH, kda.key_path("use_full_rank_gate"),
                          "a full-rank KDA gate runs Kimi-K3's KimiK3DeltaAttention (models/kimi_k3/nvidia/"
                          "model.py:720-726), which kvproof does not map", config.file)
    return kda


def kimi_linear(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    dtype = config.model_dtype()
    kda = _kda_config(config)
    kda_layers = set(kda.raw("kda_layers")) if kda is not None else set()
    is_kda = [i + 1 in kda_layers for i in range(num_layers)]
    shapes = None
    if any(is_kda):
        kda_heads = kda.int("num_heads", minimum=1)
        head_dim = kda.int("head_dim", minimum=1)
        local_heads = divide(kda, kda_heads, parallel.tp, "num_heads")  # kimi_gdn_linear_attn.py:189
        conv = [kda.int("short_conv_kernel_size", minimum=1) - 1, 3 * local_heads * head_dim]
        shapes = [conv, [local_heads, head_dim, head_dim]]
    mla = None
    if not all(is_kda):
        if config.raw("mla_use_nope") is not True:
            raise ConfigError(CONFIG_FIELD, config.key_path("mla_use_nope"),
                              "Kimi-K3 MLA (MultiHeadLatentAttention) is NoPE-only", config.file)  # model.py:744
        sizes = {key: config.int(key, minimum=0) for key in MLA_KEYS}
        mla = (("num_kv_heads", 1), ("head_size", sizes["kv_lora_rank"] + sizes["qk_rope_head_dim"]),
               ("dtype", dtype), ("max_tp_shards", 1), ("cache_dtype_str", "auto"))
    layers = []
    for i in range(num_layers):
        if is_kda[i]:
            layers.append(mamba_layer("model.layers.{i}.self_attn", i, shapes, [dtype, KDA_RECURRENT_DTYPE],
                                      KDA_MAMBA_TYPE))
        else:
            layers.append(Layer("model.layers.{i}.self_attn", i, "MLAAttentionSpec", mla))
    return layers


ARCHITECTURES = {"KimiLinearForCausalLM": kimi_linear}
