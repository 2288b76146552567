"""Llama 4 (``Llama4ForConditionalGeneration``, ``Llama4ForCausalLM``): chunked local attention on
the RoPE layers, full attention on the NoPE layers.

vLLM 0.33.0 (vllm/model_executor/models/llama4.py, mllama4.py):

* ``Llama4Attention`` (llama4.py:167-268): a layer is NoPE when ``no_rope_layers[i] == 0``
  (llama4.py:184-185); a RoPE layer with a truthy ``attention_chunk_size`` is a
  ``ChunkedLocalAttention`` (llama4.py:251-266), whose spec is
  ``ChunkedLocalAttentionSpec(attention_chunk_size)``
  (layers/attention/chunked_local_attention.py:119-128); the others are ``Attention``
  (``FullAttentionSpec``);
* heads ``num_attention_heads``, KV heads partitioned or replicated over TP
  (llama4.py:187-200), head size ``head_dim`` (llama4.py:201);
* the text model's keys live in ``text_config`` for ``Llama4ForConditionalGeneration``, whose
  language model is built under the prefix ``language_model`` (mllama4.py:780-785).

``Llama4TextConfig`` defaults (transformers 5.20.2, models/llama4/configuration_llama4.py:147-184):
``head_dim`` 128 (null: ``hidden_size // num_attention_heads``), ``attention_chunk_size`` 8192,
``no_rope_layers`` (absent or empty) ``[int((i + 1) % no_rope_layer_interval != 0)]`` with
``no_rope_layer_interval`` 4.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import CONFIG_FIELD, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def _no_rope_layers(text: HFConfig, num_layers: int) -> list[int]:
    value = text.raw("no_rope_layers")
    if not value:
        interval = text.int("no_rope_layer_interval", 4, minimum=1)
        return [int((i + 1) % interval != 0) for i in range(num_layers)]
    if type(value) is not list or not all(type(v) is int for v in value) or len(value) < num_layers:
        raise ConfigError(CONFIG_FIELD, text.key_path("no_rope_layers"),
                          f"expected an array of {num_layers} integers (0 marks a NoPE layer)", text.file)
    return value


def _llama4(config: HFConfig, parallel: Parallel, prefix: str) -> list[Layer]:
    text = config.text()
    num_layers = text.int("num_hidden_layers", minimum=1)
    heads = text.int("num_attention_heads", minimum=1)
    total_kv = text.int("num_key_value_heads", minimum=1)
    head_size = text.int("head_dim", None, minimum=1) or text.int("hidden_size", minimum=1) // heads
    # absent: the class default 8192; null or 0: no chunking (full attention everywhere)
    chunk = 8192 if "attention_chunk_size" not in text.tree else text.int("attention_chunk_size", None, minimum=0)
    check_attention_heads(text, heads, "num_attention_heads", parallel.tp)
    kv_heads = kv_heads_per_rank(text, total_kv, "num_key_value_heads", parallel.tp)
    dtype = config.model_dtype()
    name = prefix + "model.layers.{i}.self_attn.attn"
    layers = []
    for i, rope in enumerate(_no_rope_layers(text, num_layers)[:num_layers]):
        fields = {"num_kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
        if rope != 0 and chunk:
            fields["attention_chunk_size"] = chunk
            layers.append(Layer(name, i, "ChunkedLocalAttentionSpec", tuple(fields.items())))
        else:
            layers.append(Layer(name, i, "FullAttentionSpec", tuple(fields.items())))
    return layers


def llama4_conditional(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _llama4(config, parallel, "language_model.")


def llama4_causal(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _llama4(config, parallel, "")


ARCHITECTURES = {
    "Llama4ForConditionalGeneration": llama4_conditional,
    "Llama4ForCausalLM": llama4_causal,
}
