"""DeepSeek V2 / V3 (and the models that reuse ``DeepseekV3ForCausalLM``, such as Kimi K2):
multi-head latent attention; DeepSeek V3.2 (``DeepseekV32ForCausalLM``, or any DeepSeek config
with ``index_topk``): sparse MLA with a lightning-indexer cache.

vLLM 0.33.0 builds ``DeepseekV2MLAAttention`` for every decoder layer unless the config has no
``qk_nope_head_dim``/``qk_rope_head_dim`` (then ``DeepseekV2Attention``, not mapped here;
vllm/model_executor/models/deepseek_v2.py:1276-1291). Its ``MLAAttention`` caches the latent
vector and the RoPE key of one head: ``head_size = kv_lora_rank + qk_rope_head_dim``
(layers/attention/mla_attention.py:480), and reports
``MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, head_size, dtype, cache_dtype_str)``
(mla_attention.py:1371-1403), the same on every tensor-parallel rank. The MTP layers
(``num_nextn_predict_layers``) exist only with a speculative config, which a geometry from a
config does not set.

Sparse MLA (the CUDA model class, vllm/models/deepseek_v32/__init__.py:17-21, nvidia/model.py;
the generic ``deepseek_v2.py:1138-1192`` path of a V3 config with ``index_topk`` builds the same
layers): every decoder layer whose top-k is not skipped (``index_topk_freq`` /
``index_topk_pattern`` / ``index_skip_topk_offset``, models/deepseek_v32/attention.py:166-190) first
registers its indexer cache ``model.layers.{i}.self_attn.indexer.k_cache``,
``MLAAttentionSpec(num_kv_heads=1, max_tp_shards=1, head_size = index_head_dim + index_head_dim //
128 * 4, dtype=uint8, cache_role=INDEXER)`` (attention.py:95-100, model_executor/models/
deepseek_v2.py:655-666), then its attention ``model.layers.{i}.self_attn.attn``, whose spec adds
``topk_buffer_width = index_topk`` (the shared top-k buffer's width, nvidia/model.py:192-197,
mla_attention.py:567-569) and ``is_index_group_leader`` (the layer has an indexer,
mla_attention.py:1398). On the default platform (CUDA SM90, bfloat16/float16 model, cache dtype
``auto``) the sparse backend is ``FLASH_ATTN_MLA_SPARSE`` (platforms/cuda.py:139-154: first of the
sparse tail for a head size other than 512), which keeps the cache dtype
(``_canonicalize_sparse_mla_kv_cache_dtype``, mla_attention.py:359-376) and whose
``customize_spec`` sets ``block_stride_alignment`` to one row, ``head_size * dtype size`` bytes
(``align_blocks_to_rows``, v1/attention/backends/mla/sparse_utils.py:44-47); the indexer's backend
(``DEEPSEEK_V32_INDEXER``, kernel block size 64 on CUDA, v1/attention/backends/mla/indexer.py:
284-286) gets ``block_stride_alignment = MultipleOf(64)`` (``customize_attention_spec``,
v1/worker/utils.py:476-484). kvproof's default platform has no sparse backend table, so the
geometry states those two backends in ``platform_alignment``.
"""

from __future__ import annotations

from ..formulas.dtypes import dtype_size
from ..models.geometry import MultipleOf
from .common import Layer, Model, Parallel, check_attention_heads
from .hf import CONFIG_ARCH, CONFIG_FIELD, CONFIG_PARALLEL, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]

#: The indexer quantizes its key in blocks of 128 values, each with a 4-byte scale
#: (``quant_block_size``, models/deepseek_v32/attention.py:91-100).
INDEXER_QUANT_BLOCK = 128
#: ``DeepseekV32IndexerBackend.get_supported_kernel_block_sizes`` on CUDA (indexer.py:284-286).
INDEXER_KERNEL_BLOCK = 64
#: ``FlashAttnMLASparseBackend.get_supported_kernel_block_sizes`` (flashattn_mla_sparse.py:49-51).
SPARSE_KERNEL_BLOCK = {"MultipleOf": 64}


def _skips_topk(config: HFConfig, layer: int) -> bool:
    """``skip_topk`` of ``DeepseekV32Attention`` (models/deepseek_v32/attention.py:166-177)."""
    pattern = config.raw("index_topk_pattern")
    if pattern is None:
        freq = config.int("index_topk_freq", 1, minimum=1)
        offset = config.int("index_skip_topk_offset", 2)
        return max(layer - offset + 1, 0) % freq != 0
    if not isinstance(pattern, (str, list)) or not all(isinstance(p, str) for p in pattern):
        raise ConfigError(CONFIG_FIELD, config.key_path("index_topk_pattern"),
                          "expected a string or an array of strings ('S' skips the layer's top-k)", config.file)
    return layer < len(pattern) and pattern[layer] == "S"


def _sparse_layers(config: HFConfig, num_layers: int, head_size: int, dtype: str) -> Model:
    topk = config.int("index_topk", minimum=1)
    index_head = config.int("index_head_dim", minimum=1)
    if head_size == 512:  # platforms/cuda.py:144-146: FLASHINFER_MLA_SPARSE_SM90 comes first
        raise ConfigError(CONFIG_ARCH, "$.kv_lora_rank", (
            "a sparse MLA head size of 512 runs FLASHINFER_MLA_SPARSE_SM90 on the default platform "
            "(platforms/cuda.py:144-146), whose spec customisation kvproof does not map"), config.file)
    if dtype not in ("bfloat16", "float16"):  # flashattn_mla_sparse.py:42
        raise ConfigError(CONFIG_FIELD, config.key_path("dtype" if config.has("dtype") else "torch_dtype"),
                          f"FLASH_ATTN_MLA_SPARSE serves float16/bfloat16 models only, not {dtype}", config.file)
    indexer = (("num_kv_heads", 1), ("head_size", index_head + index_head // INDEXER_QUANT_BLOCK * 4),
               ("dtype", "uint8"), ("max_tp_shards", 1), ("cache_role", "indexer"),
               ("block_stride_alignment", MultipleOf(INDEXER_KERNEL_BLOCK)))
    attention = (("num_kv_heads", 1), ("head_size", head_size), ("dtype", dtype), ("max_tp_shards", 1),
                 ("cache_dtype_str", "auto"), ("topk_buffer_width", topk),
                 ("block_stride_alignment", head_size * dtype_size(dtype)))
    layers = []
    for i in range(num_layers):
        leader = not _skips_topk(config, i)
        if leader:
            layers.append(Layer("model.layers.{i}.self_attn.indexer.k_cache", i, "MLAAttentionSpec", indexer))
        layers.append(Layer("model.layers.{i}.self_attn.attn", i, "MLAAttentionSpec",
                            attention + ((("is_index_group_leader", True),) if leader else ())))
    # The non-SSM backends in registration order (_find_non_ssm_backends, interface.py:680-697).
    names = ["FLASH_ATTN_MLA_SPARSE"]
    if any(layer.name.endswith("k_cache") for layer in layers):
        names.insert(0 if layers[0].name.endswith("k_cache") else 1, "DEEPSEEK_V32_INDEXER")
    sizes = {"DEEPSEEK_V32_INDEXER": [INDEXER_KERNEL_BLOCK], "FLASH_ATTN_MLA_SPARSE": [SPARSE_KERNEL_BLOCK]}
    platform = {
        "num_kv_heads": 1, "head_size": head_size, "backend_kernel_block_sizes": sizes[names[0]],
        "model_dtype": dtype, "use_mla": True, "cache_dtype": "auto", "backend_names": names,
    }
    if len(names) > 1:
        platform["other_backend_kernel_block_sizes"] = [sizes[name] for name in names[1:]]
    return Model(layers, {"platform_alignment": platform})


def _check_mlp_shards(config: HFConfig, num_layers: int, tp: int) -> None:
    """vLLM's shard assertions on the MLPs, which refuse a TP the cache never sees: a dense MLP's
    ``intermediate_size`` (``MergedColumnParallelLinear``, layers/linear.py:731) on the layers
    before ``first_k_dense_replace`` or off ``moe_layer_freq``, else the routed experts'
    ``moe_intermediate_size`` (``FusedMoEConfig``, layers/fused_moe/config.py:1352) and the
    shared experts' ``moe_intermediate_size * n_shared_experts`` (deepseek_v2.py:359-369);
    which layers are MoE: deepseek_v2.py:1293-1297."""
    routed = config.raw("n_routed_experts")
    first_dense = config.int("first_k_dense_replace", 0)
    freq = config.int("moe_layer_freq", 1, minimum=1)
    moe = [routed is not None and i >= first_dense and i % freq == 0 for i in range(num_layers)]
    sizes = []
    if not all(moe):
        sizes.append(("intermediate_size", config.int("intermediate_size", minimum=1), "layers/linear.py:731"))
    if any(moe):
        experts = config.int("moe_intermediate_size", minimum=1)
        if config.has("n_shared_experts"):
            sizes.append(("n_shared_experts", experts * config.int("n_shared_experts", minimum=1),
                          "layers/linear.py:731"))
        sizes.append(("moe_intermediate_size", experts, "layers/fused_moe/config.py:1352"))
    for key, size, where in sizes:
        if size % tp != 0:
            raise ConfigError(CONFIG_PARALLEL, config.key_path(key),
                              f"an MLP of intermediate size {size} cannot be sharded over tensor parallel size "
                              f"{tp} (vLLM 0.33.0 asserts it, {where})", config.file)


def deepseek_mla(config: HFConfig, parallel: Parallel) -> list[Layer] | Model:
    num_layers = config.int("num_hidden_layers", minimum=1)
    heads = config.int("num_attention_heads", minimum=1)
    rope = config.int("qk_rope_head_dim", 0)
    nope = config.int("qk_nope_head_dim", 0)
    if rope == 0 and nope == 0 or config.raw("model_type") == "deepseek":
        raise ConfigError(CONFIG_ARCH, "$.qk_rope_head_dim",
                          "a DeepSeek config without MLA head sizes runs DeepseekAttention (multi-head "
                          "attention, deepseek_v2.py:1280-1288), which kvproof does not map", config.file)
    kv_lora_rank = config.int("kv_lora_rank", minimum=1)
    check_attention_heads(config, heads, "num_attention_heads", parallel.tp)
    _check_mlp_shards(config, num_layers, parallel.tp)
    dtype = config.model_dtype()
    if "index_topk" in config.tree:  # vLLM makes every such layer sparse (deepseek_v2.py:1138)
        return _sparse_layers(config, num_layers, kv_lora_rank + rope, dtype)
    fields = (("num_kv_heads", 1), ("head_size", kv_lora_rank + rope), ("dtype", dtype),
              ("max_tp_shards", 1), ("cache_dtype_str", "auto"))
    return [Layer("model.layers.{i}.self_attn.attn", i, "MLAAttentionSpec", fields) for i in range(num_layers)]


ARCHITECTURES = {
    "DeepseekV2ForCausalLM": deepseek_mla,
    "DeepseekV3ForCausalLM": deepseek_mla,
    "DeepseekV32ForCausalLM": deepseek_mla,
}
