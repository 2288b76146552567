"""Grouped-query attention decoders: Llama (2, 3, 3.x), Mistral, Qwen2, Qwen3 and their MoE
variants. Every layer is one ``Attention`` (vllm/model_executor/layers/attention/attention.py)
whose spec is ``FullAttentionSpec``, or ``SlidingWindowSpec`` for a layer with a per-layer
window (attention.py:611-680); the MoE variants differ only in their MLP, which holds no cache.

Per architecture (vLLM 0.33.0, vllm/model_executor/models/):

* ``LlamaForCausalLM`` / ``MistralForCausalLM`` (llama.py:125-220, mistral.py:77, 236): heads
  ``num_attention_heads``, KV heads ``num_key_value_heads`` (default: the heads, llama.py:288-291),
  head size ``head_dim`` or ``hidden_size // num_attention_heads`` (llama.py:158-159); a layer
  slides only when ``layer_types[i] == "sliding_attention"`` (llama.py:185-204). A model-level
  ``sliding_window`` without ``layer_types`` (Mistral 7B v0.1) reaches the layer only through
  ``cache_config.sliding_window``, which vLLM 0.33.0 leaves ``None`` (config/cache.py:254): full
  attention.
* ``Qwen2ForCausalLM`` (qwen2.py:140-150, 351-360) and ``Qwen2MoeForCausalLM`` (qwen2_moe.py:
  215-225): head size always ``hidden_size // num_attention_heads``; no layer slides.
* ``Qwen3ForCausalLM`` / ``Qwen3MoeForCausalLM`` (qwen3.py:90-100, qwen3_moe.py:267-277): head
  size ``head_dim`` or ``hidden_size // num_attention_heads``; no layer slides.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, kv_heads_per_rank
from .hf import VLLM_REFUSAL, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def _llama_windows(config: HFConfig, num_layers: int) -> list[int | None]:
    """Each layer's ``per_layer_sliding_window`` (llama.py:185-204): ``config.sliding_window``
    where ``layer_types`` says ``sliding_attention``."""
    layer_types = config.str_list("layer_types", num_layers)
    if layer_types is None:
        return [None] * num_layers
    window = config.int("sliding_window", None, minimum=0) or None  # 0 is no window (model.py:814-821)
    return [window if layer_types[i] == "sliding_attention" else None for i in range(num_layers)]


def _qwen2_windows(config: HFConfig, num_layers: int) -> list[int | None]:
    """Qwen2 attention takes no per-layer window (qwen2.py:118-200): every layer is full
    attention. A config whose ``layer_types`` mix kinds (as ``Qwen2Config`` builds them from
    ``use_sliding_window`` and ``max_window_layers``, configuration_qwen2.py:83-95) is refused
    unless ``max_window_layers == num_hidden_layers`` (qwen2.py:351-360)."""
    layer_types = config.str_list("layer_types", num_layers)
    max_window_layers = config.int("max_window_layers", 28)
    if layer_types is None:
        window = config.int("sliding_window", 4096, minimum=0) if config.raw("use_sliding_window", False) else None
        layer_types = ["sliding_attention" if window is not None and i >= max_window_layers else "full_attention"
                       for i in range(num_layers)]
    if len(set(layer_types)) > 1 and max_window_layers != num_layers:
        raise ConfigError(VLLM_REFUSAL, "$.max_window_layers", (
            "Sliding window for some but all layers is not supported. This model uses sliding window but "
            f"`max_window_layers` = {max_window_layers} is less than `num_hidden_layers` = {num_layers}. "
            "Please open an issue to discuss this feature."), config.file)
    return [None] * num_layers


def _full(config: HFConfig, num_layers: int) -> list[int | None]:
    """No per-layer window reaches the attention (qwen3.py:183-216 default None; qwen2_moe.py,
    qwen3_moe.py pass none) and ``cache_config.sliding_window`` is ``None``: full attention."""
    return [None] * num_layers


def _layers(config: HFConfig, parallel: Parallel, *, head_dim_key: bool, windows) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    kv_key = "num_key_value_heads" if config.has("num_key_value_heads") else "num_attention_heads"
    total_kv = config.int(kv_key, minimum=1)
    hidden = config.int("hidden_size", minimum=1)
    head_size = (config.int("head_dim", None, minimum=1) if head_dim_key else None) or hidden // heads
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    kv_heads = kv_heads_per_rank(config, total_kv, kv_key, parallel.tp)
    dtype = config.model_dtype()
    layers = []
    for i, window in enumerate(windows(config, num_layers)):
        fields = {"num_kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
        if window is None:
            layers.append(Layer("model.layers.{i}.self_attn.attn", i, "FullAttentionSpec", tuple(fields.items())))
        else:
            fields["sliding_window"] = window
            layers.append(Layer("model.layers.{i}.self_attn.attn", i, "SlidingWindowSpec", tuple(fields.items())))
    return layers


def llama(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _layers(config, parallel, head_dim_key=True, windows=_llama_windows)


def qwen2(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _layers(config, parallel, head_dim_key=False, windows=_qwen2_windows)


def qwen2_moe(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _layers(config, parallel, head_dim_key=False, windows=_full)


def qwen3(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _layers(config, parallel, head_dim_key=True, windows=_full)


ARCHITECTURES = {
    "LlamaForCausalLM": llama,
    "MistralForCausalLM": llama,
    "Qwen2ForCausalLM": qwen2,
    "Qwen2MoeForCausalLM": qwen2_moe,
    "Qwen3ForCausalLM": qwen3,
    "Qwen3MoeForCausalLM": qwen3,
}
