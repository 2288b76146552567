"""Gemma 2 and Gemma 3 (``Gemma2ForCausalLM``, ``Gemma3ForCausalLM``,
``Gemma3ForConditionalGeneration``): grouped-query attention, sliding-window layers where
``layer_types`` says ``sliding_attention``.

vLLM 0.33.0 (vllm/model_executor/models/gemma2.py, gemma3.py, gemma3_mm.py):

* ``Gemma2Attention`` (gemma2.py:95-168) / ``Gemma3Attention`` (gemma3.py:96-186): KV heads
  partitioned or replicated over TP (gemma2.py:112-125, gemma3.py:115-126), head size
  ``head_dim``, ``per_layer_sliding_window = sliding_window`` where
  ``layer_types[i] == "sliding_attention"`` (gemma2.py:154-156, gemma3.py:153-155), named
  ``model.layers.{i}.self_attn.attn``; Gemma 3's multimodal class builds the text model under
  ``language_model`` (gemma3_mm.py:565-569) from ``text_config``;
* a Gemma 3 config with ``is_causal`` false builds ``EncoderOnlyAttention`` (gemma3.py:165-172),
  which keeps no cache: refused here.

Config defaults (transformers 5.20.2): ``Gemma2Config`` ``head_dim`` 256, ``sliding_window``
4096, absent ``layer_types`` alternate sliding/full from layer 0
(models/gemma2/configuration_gemma2.py:74-98); ``Gemma3TextConfig`` ``head_dim`` 256,
``sliding_window`` 4096 (halved plus one with ``use_bidirectional_attention``), absent
``layer_types`` full every ``sliding_window_pattern`` (6) layers
(models/gemma3/configuration_gemma3.py:80-112).
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, divide, kv_heads_per_rank
from .hf import CONFIG_ARCH, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def _layers(text: HFConfig, config: HFConfig, parallel: Parallel, prefix: str, layer_types: list[str],
            window: int | None) -> list[Layer]:
    heads = text.int("num_attention_heads", minimum=1)
    check_attention_heads(text, heads, "num_attention_heads", parallel.tp)
    kv_heads = kv_heads_per_rank(text, text.int("num_key_value_heads", minimum=1), "num_key_value_heads",
                                 parallel.tp)
    head_size = text.int("head_dim", 256, minimum=1)
    dtype = config.model_dtype()
    name = prefix + "model.layers.{i}.self_attn.attn"
    layers = []
    for i, kind in enumerate(layer_types):
        fields = {"num_kv_heads": kv_heads, "head_size": head_size, "dtype": dtype}
        if kind == "sliding_attention" and window is not None:
            fields["sliding_window"] = window
            layers.append(Layer(name, i, "SlidingWindowSpec", tuple(fields.items())))
        else:
            layers.append(Layer(name, i, "FullAttentionSpec", tuple(fields.items())))
    return layers


def _window(text: HFConfig) -> int | None:
    # absent: the class default 4096; null or 0: no window (model.py:814-821)
    return 4096 if "sliding_window" not in text.tree else (text.int("sliding_window", None, minimum=0) or None)


def gemma2(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    layer_types = config.str_list("layer_types", num_layers) or [
        "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)]
    return _layers(config, config, parallel, "", layer_types[:num_layers], _window(config))


def _gemma3(config: HFConfig, parallel: Parallel, prefix: str) -> list[Layer]:
    text = config.text()
    if text.raw("is_causal", True) is False:
        raise ConfigError(CONFIG_ARCH, text.key_path("is_causal"),
                          "a non-causal Gemma 3 runs EncoderOnlyAttention, which keeps no KV cache (gemma3.py:165-172)",
                          config.file)
    num_layers = text.int("num_hidden_layers", minimum=1)
    pattern = text.int("sliding_window_pattern", 6, minimum=1)
    layer_types = text.str_list("layer_types", num_layers) or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(num_layers)]
    window = _window(text)
    if window is not None and text.raw("use_bidirectional_attention", False) is True:
        window = window // 2 + 1  # configuration_gemma3.py:102-103
    return _layers(text, config, parallel, prefix, layer_types[:num_layers], window)


def gemma3_causal(config: HFConfig, parallel: Parallel) -> list[Layer]:
    return _gemma3(config, parallel, "")


def gemma3_conditional(config: HFConfig, parallel: Parallel) -> list[Layer]:
    layers = _gemma3(config, parallel, "language_model.")
    # The SigLIP vision tower splits its heads over TP too (siglip.py:374-377; transformers'
    # SiglipVisionConfig default 12 heads); it keeps no cache, but vLLM refuses the TP.
    vision = HFConfig(config.raw("vision_config", {}), config.file, config.key_path("vision_config"))
    divide(vision, vision.int("num_attention_heads", 12, minimum=1), parallel.tp, "num_attention_heads")
    return layers


ARCHITECTURES = {
    "Gemma2ForCausalLM": gemma2,
    "Gemma3ForCausalLM": gemma3_causal,
    "Gemma3ForConditionalGeneration": gemma3_conditional,
}
