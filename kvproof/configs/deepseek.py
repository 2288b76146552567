"""DeepSeek V2 / V3 (and the models that reuse ``DeepseekV3ForCausalLM``, such as Kimi K2):
multi-head latent attention.

vLLM 0.33.0 builds ``DeepseekV2MLAAttention`` for every decoder layer unless the config has no
``qk_nope_head_dim``/``qk_rope_head_dim`` (then ``DeepseekV2Attention``, not mapped here;
vllm/model_executor/models/deepseek_v2.py:1276-1291). Its ``MLAAttention`` caches the latent
vector and the RoPE key of one head: ``head_size = kv_lora_rank + qk_rope_head_dim``
(layers/attention/mla_attention.py:480), and reports
``MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, head_size, dtype, cache_dtype_str)``
(mla_attention.py:1371-1403), the same on every tensor-parallel rank. The MTP layers
(``num_nextn_predict_layers``) exist only with a speculative config, which a geometry from a
config does not set.
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads
from .hf import CONFIG_ARCH, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def deepseek_mla(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    rope = config.int("qk_rope_head_dim", 0)
    nope = config.int("qk_nope_head_dim", 0)
    if rope == 0 and nope == 0 or config.raw("model_type") == "deepseek":
        raise ConfigError(CONFIG_ARCH, "$.qk_rope_head_dim",
                          "a DeepSeek config without MLA head sizes runs DeepseekAttention (multi-head "
                          "attention, deepseek_v2.py:1280-1288), which kvproof does not map", config.file)
    if "index_topk" in config.tree:
        # vLLM makes every such layer sparse (DeepSeek V3.2 attention with an indexer cache,
        # deepseek_v2.py:1138-1168), whatever the architecture name says.
        raise ConfigError(CONFIG_ARCH, "$.index_topk",
                          "a DeepSeek config with index_topk runs sparse MLA with an indexer cache "
                          "(deepseek_v2.py:1138-1168), which kvproof does not map yet", config.file)
    kv_lora_rank = config.int("kv_lora_rank", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    fields = (("num_kv_heads", 1), ("head_size", kv_lora_rank + rope), ("dtype", config.model_dtype()),
              ("max_tp_shards", 1), ("cache_dtype_str", "auto"))
    return [Layer("model.layers.{i}.self_attn.attn", i, "MLAAttentionSpec", fields) for i in range(num_layers)]


ARCHITECTURES = {
    "DeepseekV2ForCausalLM": deepseek_mla,
    "DeepseekV3ForCausalLM": deepseek_mla,
}
