"""gpt-oss (``GptOssForCausalLM``): grouped-query attention with attention sinks, a sliding window on
every other layer.

vLLM 0.33.0 (vllm/model_executor/models/gpt_oss.py):

* ``OAIAttention`` (gpt_oss.py:92-188) builds one ``Attention`` per decoder layer named
  ``model.layers.{i}.attn.attn`` (``TransformerBlock`` prefix ``.attn``, gpt_oss.py:441-446, then
  ``.attn``, gpt_oss.py:185), head size ``head_dim``, KV heads ``num_key_value_heads // tp``
  (gpt_oss.py:156: a plain floor division, without the replication of the GQA decoders);
* ``per_layer_sliding_window = sliding_window if layer_idx % 2 == 0 else None``
  (gpt_oss.py:175): even layers slide whatever ``layer_types`` says;
* the sinks (``make_attention_sink``, gpt_oss.py:131) are a learned per-head logit: they change
  the kernel, not the cache, so the spec is the plain ``SlidingWindowSpec`` / ``FullAttentionSpec``
  of ``Attention.get_kv_cache_spec`` (layers/attention/attention.py:611-680).
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads
from .hf import CONFIG_PARALLEL, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def gpt_oss(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    total_kv = config.int("num_key_value_heads", minimum=1)
    head_size = config.int("head_dim", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    kv_heads = total_kv // parallel.tp
    if kv_heads == 0:
        raise ConfigError(CONFIG_PARALLEL, "$.num_key_value_heads", (
            f"{total_kv} KV heads over tensor parallel size {parallel.tp} leave 0 per rank "
            "(vLLM 0.33.0's gpt-oss divides without replicating, gpt_oss.py:156)"), config.file)
    window = config.int("sliding_window", None, minimum=1)
    dtype = config.model_dtype()
    layers = []
    for i in range(num_layers):
        fields = {"num_kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
        if window is not None and i % 2 == 0:
            fields["sliding_window"] = window
            layers.append(Layer("model.layers.{i}.attn.attn", i, "SlidingWindowSpec", tuple(fields.items())))
        else:
            layers.append(Layer("model.layers.{i}.attn.attn", i, "FullAttentionSpec", tuple(fields.items())))
    return layers


ARCHITECTURES = {"GptOssForCausalLM": gpt_oss}
