"""Write the example records and profiles under examples/ (run: python scripts/make_examples.py).

Two deployments, with every number derived below from vLLM 0.33.0's arithmetic:

* GLM-5.3-Flash at TP 4 (seed 001's live probe shape): 34 KDA layers in 4 packed groups of
  9/9/8/8, one attention group of 11 indexer + 11 MLA layers, one group of 11 four-token tail
  rings; block 2,176 tokens; layout BLHNC; 13,697 pool blocks of 13,516,800 bytes.
  The attention group page is 11 * (1,114,112 + 71,808) = 13,045,120 B, rounded up to the lcm
  of the block-stride alignments (MLA: 32-token kernel pages of 16,384 B; indexer: 128-token
  kernel pages of 4,224 B; lcm 540,672) = 13,516,800 B (kv_cache_planning.py:574-605).
  A request at 1,048,576 tokens needs 482 + 1 + 4 * 3 = 495 blocks at start-up
  (concurrency 13,697 / 495) and holds 482 + 5 = 487 blocks between block boundaries.
* MiniMax-M2.7 at TP 4 (plain): 62 full-attention layers, 16-token blocks, layout LBHNC,
  203,368 blocks, concurrency 203,368 / 512 = 397.203125 at max_model_len 8,192.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvproof.logic import cdiv  # noqa: E402
from kvproof.models import record as r  # noqa: E402
from kvproof.models.codec import dumps, unstructure  # noqa: E402
from kvproof.models.profile import CacheGroup, Profile, Resources, RuntimeMemory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "examples"
VERSION = r.Runtime("vllm", "0.33.0")


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(unstructure(obj)), encoding="utf-8")


# ------------------------------------------------------------------------------------------
# GLM-5.3-Flash


def glm() -> None:
    block, ring, max_len, num_blocks = 2176, 4, 1_048_576, 13_697
    bytes_per_block = 13_516_800
    storage_size = num_blocks * bytes_per_block
    mla_layers = list(range(3, 45, 4))  # 11 MLA layers; the other 34 are KDA
    kda_layers = [i for i in range(45) if i not in mla_layers]
    kda = [f"model.layers.{i}.linear_attn" for i in kda_layers]
    kda_groups = [kda[g::4] for g in range(4)]  # vLLM's strided split: 9, 9, 8, 8
    attention = []
    for i in mla_layers:  # static_forward_context order: the indexer cache before the MLA latent
        attention += [f"model.layers.{i}.self_attn.indexer.k_cache", f"model.layers.{i}.self_attn.attn"]
    tails = [f"model.layers.{i}.self_attn.indexer.tail_cache" for i in mla_layers]

    kda_shapes = [[3, 2048], [3, 2048], [3, 2048], [16, 128, 128]]
    kda_dtypes = ["bfloat16", "bfloat16", "bfloat16", "float32"]
    kda_real = 3 * 3 * 2048 * 2 + 16 * 128 * 128 * 4  # 1,085,440 B of state
    kda_page = block * 512  # padded to the attention page of one block (platform alignment)
    mla_page, idx_page, ring_page = block * 512, (block // 4) * 132, 2 * ring * 128 * 2

    def kda_spec(mode="align"):
        return r.LayerSpec(
            spec_type="MambaSpec", block_size=block, page_size_bytes=kda_page, page_size_padded=kda_page,
            shapes=kda_shapes, dtypes=kda_dtypes, mamba_type="GDN_ATTN", mamba_cache_mode=mode,
            num_speculative_blocks=0, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16,
        )

    def mla_spec():
        return r.LayerSpec(
            spec_type="MLAAttentionSpec", block_size=block, page_size_bytes=mla_page, num_kv_heads=1,
            head_size=512, head_size_v=0, dtype="uint8", cache_dtype_str="fp8", cache_role="sparse",
            dcp_sharded=True, block_stride_alignment_bytes=32 * 512,
        )

    def idx_spec():
        return r.LayerSpec(
            spec_type="MLAAttentionSpec", block_size=block, page_size_bytes=idx_page, num_kv_heads=1,
            head_size=132, head_size_v=0, dtype="uint8", tokens_per_state=4, cache_role="indexer",
            dcp_sharded=True, block_stride_alignment_bytes=(128 // 4) * 132,
        )

    def ring_spec():
        return r.LayerSpec(
            spec_type="CircularBufferSpec", block_size=ring, page_size_bytes=ring_page, num_kv_heads=2,
            head_size=128, head_size_v=0, dtype="bfloat16", dcp_sharded=False,
        )

    def spec_of(name):
        if name.endswith("linear_attn"):
            return kda_spec()
        if name.endswith("k_cache"):
            return idx_spec()
        if name.endswith("tail_cache"):
            return ring_spec()
        return mla_spec()

    groups: list[r.WorkerGroup] = []
    for layers in kda_groups:
        groups.append(r.WorkerGroup(
            layer_names=layers, spec_type="UniformTypeKVCacheSpecs", block_size_tokens=block,
            page_size_bytes=len(layers) * kda_page, kind="state",
            layer_specs={name: kda_spec() for name in layers},
            state=r.StateEvidence(blocks_per_request=1, mamba_cache_mode="align", num_speculative_blocks=0,
                                  num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16),
        ))
    groups.append(r.WorkerGroup(
        layer_names=attention, spec_type="UniformTypeKVCacheSpecs", block_size_tokens=block,
        page_size_bytes=11 * (mla_page + idx_page), kind="attention",
        layer_specs={name: spec_of(name) for name in attention},
    ))
    groups.append(r.WorkerGroup(
        layer_names=tails, spec_type="UniformTypeKVCacheSpecs", block_size_tokens=ring,
        page_size_bytes=11 * ring_page, kind="state", layer_specs={name: ring_spec() for name in tails},
        state=r.StateEvidence(blocks_per_request=1),
    ))

    # Block-outermost placement: every group starts at byte 0 of each block; one tensor per group
    # and page size, layers side by side (kv_cache_planning.py:642-741).
    indexers = [n for n in attention if n.endswith("k_cache")]
    mlas = [n for n in attention if n.endswith("attn")]
    tensors = [(layers, 0, kda_page) for layers in kda_groups]
    tensors += [(indexers, 0, idx_page), (mlas, len(indexers) * idx_page, mla_page), (tails, 0, ring_page)]
    allocations = [
        r.TensorAllocation(storage_id="storage-0", size=storage_size, layers=layers, offset=offset,
                           block_stride=bytes_per_block, layer_stride=stride)
        for layers, offset, stride in tensors
    ]

    views: dict[str, list[r.LayerView]] = {}
    for layers, offset, stride in tensors:
        for position, name in enumerate(layers):
            base = offset + position * stride
            if name.endswith("linear_attn"):
                inner, out = 0, []
                for shape, dtype in zip(kda_shapes, kda_dtypes):
                    item = 4 if dtype == "float32" else 2
                    strides = [bytes_per_block] + _dense_strides(shape, item)
                    out.append(r.LayerView("storage-0", base + inner, [num_blocks, *shape], strides, item, 0, block, 0,
                                           role="conv" if len(shape) == 2 else "ssm"))
                    inner += item * _product(shape)
                views[name] = out
            elif name.endswith("k_cache"):
                # Bind-time split of a packed compressed cache (v1/worker/utils.py:397-430):
                # 128-token kernel blocks of 32 states x 132 B; stride(0) // page_stride = 3,200.
                page_stride = 32 * 132
                kernel_stride = bytes_per_block // page_stride
                pages = (num_blocks - 1) * kernel_stride + block // 128
                views[name] = [r.LayerView("storage-0", base, [pages, 32, 132], [page_stride, 132, 1], 1, 0, 128,
                                           kernel_stride, role="kv")]
            elif name.endswith("tail_cache"):
                views[name] = [r.LayerView("storage-0", base, [num_blocks, 2, ring, 128],
                                           [bytes_per_block, ring * 256, 256, 2], 2, 0, ring, 0, role="kv")]
            else:
                views[name] = [r.LayerView("storage-0", base, [num_blocks, block, 512], [bytes_per_block, 512, 1], 1, 0,
                                           block, 0, role="kv")]

    attention_groups = [
        r.AttentionGroup(kv_cache_group_id=g, layer_names=layers, kernel_block_size=block, kernel_block_stride=0,
                         backend="GDNAttentionBackend")
        for g, layers in enumerate(kda_groups)
    ] + [
        r.AttentionGroup(kv_cache_group_id=4, layer_names=indexers, kernel_block_size=128,
                         kernel_block_stride=bytes_per_block // (32 * 132), backend="DeepseekV32IndexerBackend"),
        r.AttentionGroup(kv_cache_group_id=4, layer_names=mlas, kernel_block_size=block, kernel_block_stride=0,
                         backend="FlashMLASparseBackend"),
        r.AttentionGroup(kv_cache_group_id=5, layer_names=tails, kernel_block_size=ring, kernel_block_stride=0,
                         backend="Glm5NextTailBackend"),
    ]

    def resolved(mamba_block_size):
        return r.ResolvedConfig(
            max_model_len=max_len, block_size=block, enable_prefix_caching=True, max_num_batched_tokens=16384,
            mamba_cache_mode="align", mamba_block_size=mamba_block_size, prefix_match_unit=None, max_num_seqs=256,
            async_scheduling=False, max_in_flight_tokens=16384, num_speculative_tokens=0, tensor_parallel_size=4,
            pipeline_parallel_size=1, decode_context_parallel_size=1,
        )

    evidence = r.PrefixCachingEvidence(enable_prefix_caching=True, mamba_cache_mode="align", hash_block_size=block,
                                       scheduler_block_size=block, prefix_match_unit=None)
    out = ROOT / "glm53flash-tp4"
    for tp in range(4):
        write(out / f"worker-dp0-tp{tp}-pp0.json", r.WorkerRecord(
            schema_version="kvproof/record/v1", kind="worker", dp_rank=0, tp_rank=tp, pp_rank=0, runtime=VERSION,
            resolved_config=resolved(block), phase="prefill", prefix_caching=evidence,
            cache=r.WorkerCache(
                num_blocks=num_blocks, groups=groups,
                storages=[r.Storage("storage-0", storage_size, device=f"cuda:{tp}")],
                tensor_allocations=allocations, layer_tensors=views, kv_cache_layout="BLHNC",
                attention_groups=attention_groups,
                model_runner=r.ModelRunner("vllm.v1.worker.gpu.model_runner.GPUModelRunner", [block] * 5 + [ring]),
            ),
        ))
    demand = cdiv(max_len, block) + 1 + 4 * (2 + 0 + 1)
    concurrency = num_blocks / demand
    write(out / "scheduler-dp0.json", r.SchedulerRecord(
        schema_version="kvproof/record/v1", kind="scheduler", dp_rank=0, runtime=VERSION,
        resolved_config=resolved(16), phase="prefill", prefix_caching=evidence,
        cache=r.SchedulerCache(
            num_blocks=num_blocks,
            groups=[
                r.SchedulerGroup(g.layer_names, g.layer_specs[g.layer_names[0]].spec_type, g.block_size_tokens,
                                 g.layer_specs[g.layer_names[0]].page_size_bytes, spec=g.layer_specs[g.layer_names[0]])
                for g in groups
            ],
            block_size=block, scheduler_block_size=block, hash_block_size=block, mamba_cache_mode="align",
            mamba_block_size=16, cache_hit_alignment_tokens=block, kv_cache_max_concurrency=concurrency,
            kv_cache_size_tokens=int(concurrency * max_len),
        ),
    ))
    write(out / "profile.json", Profile(
        schema_version="kvproof/profile/v1", model="zai-org/GLM-5.3-Flash",
        description="GLM-5.3-Flash at TP 4 on vLLM 0.33.0: 4 KDA state groups, 1 MLA+indexer group, 1 tail ring group",
        resources=Resources(
            cache_layout="grouped", max_num_tokens=16384, max_batch_size=256,
            provenance="kvproof example: imported from examples/glm53flash-tp4 records",
            cache_groups=[
                *[CacheGroup(f"runtime_group_{g}", "state", len(layers), block, bytes_per_block, blocks_per_request=1,
                             prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16)
                  for g, layers in enumerate(kda_groups)],
                CacheGroup("runtime_group_4", "attention", len(attention), block, bytes_per_block),
                CacheGroup("runtime_group_5", "state", len(tails), ring, bytes_per_block, blocks_per_request=1),
            ],
            runtime_memory=RuntimeMemory(
                kv_cache_bytes=(num_blocks - 1) * bytes_per_block, gpu_memory_utilization=0.9, max_model_len=max_len,
                provenance="runtime observation of examples/glm53flash-tp4", enable_prefix_caching=True,
                mamba_cache_mode="align", hash_block_size_tokens=block,
            ),
        ),
    ))
    assert kda_real <= kda_page


def _product(shape):
    out = 1
    for d in shape:
        out *= d
    return out


def _dense_strides(shape, item):
    strides, acc = [], item
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


# ------------------------------------------------------------------------------------------
# MiniMax-M2.7 (plain)


def minimax() -> None:
    block, max_len, num_blocks, layers = 16, 8192, 203_368, 62
    heads, head = 2, 128  # 8 KV heads at TP 4
    page = heads * block * 2 * head * 2  # K and V, bf16: 16,384 B
    names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
    bytes_per_block = layers * page
    size = num_blocks * bytes_per_block
    layer_stride = page * num_blocks  # layer-outermost LBHNC (kv_cache_interface.py:379-415)
    groups = [r.WorkerGroup(names, "FullAttentionSpec", block, page, kind="attention")]
    allocation = r.TensorAllocation("storage-0", size, names, 0, page, layer_stride)
    views = {
        name: [r.LayerView("storage-0", i * layer_stride, [num_blocks, 2, heads, block, head],
                           [page, page // 2, block * head * 2, head * 2, 2], 2, 0, block, 0, role="kv")]
        for i, name in enumerate(names)
    }
    def resolved():
        return r.ResolvedConfig(
            max_model_len=max_len, block_size=block, enable_prefix_caching=True, max_num_batched_tokens=8192,
            mamba_cache_mode=None, prefix_match_unit=None, max_num_seqs=256, async_scheduling=False,
            max_in_flight_tokens=8192, tensor_parallel_size=4, pipeline_parallel_size=1,
            decode_context_parallel_size=1,
        )

    evidence = r.PrefixCachingEvidence(enable_prefix_caching=True, mamba_cache_mode=None, hash_block_size=block,
                                       scheduler_block_size=block, prefix_match_unit=None)
    out = ROOT / "minimax-m27-tp4"
    for tp in range(4):
        write(out / f"worker-dp0-tp{tp}-pp0.json", r.WorkerRecord(
            schema_version="kvproof/record/v1", kind="worker", dp_rank=0, tp_rank=tp, pp_rank=0, runtime=VERSION,
            resolved_config=resolved(), phase="prefill", prefix_caching=evidence,
            cache=r.WorkerCache(num_blocks, groups, [r.Storage("storage-0", size, device=f"cuda:{tp}")], [allocation],
                                views, kv_cache_layout="LBHNC",
                                attention_groups=[r.AttentionGroup(0, names, block, 0, backend="FlashAttentionBackend")],
                                model_runner=r.ModelRunner("vllm.v1.worker.gpu.model_runner.GPUModelRunner", [block])),
        ))
    concurrency = num_blocks / cdiv(max_len, block)
    write(out / "scheduler-dp0.json", r.SchedulerRecord(
        schema_version="kvproof/record/v1", kind="scheduler", dp_rank=0, runtime=VERSION, resolved_config=resolved(),
        phase="prefill", prefix_caching=evidence,
        cache=r.SchedulerCache(num_blocks, [r.SchedulerGroup(names, "FullAttentionSpec", block, page)], block, block,
                               block, kv_cache_max_concurrency=concurrency,
                               kv_cache_size_tokens=int(concurrency * max_len), cache_hit_alignment_tokens=block),
    ))
    write(out / "profile.json", Profile(
        schema_version="kvproof/profile/v1", model="MiniMaxAI/MiniMax-M2.7",
        description="MiniMax-M2.7 at TP 4 on vLLM 0.33.0: one full-attention group",
        resources=Resources(
            cache_layout="grouped", max_num_tokens=8192, max_batch_size=256,
            provenance="kvproof example: imported from examples/minimax-m27-tp4 records",
            cache_groups=[CacheGroup("runtime_group_0", "attention", layers, block, bytes_per_block)],
            runtime_memory=RuntimeMemory(
                kv_cache_bytes=(num_blocks - 1) * bytes_per_block, gpu_memory_utilization=0.9, max_model_len=max_len,
                provenance="runtime observation of examples/minimax-m27-tp4", enable_prefix_caching=True,
                hash_block_size_tokens=block,
            ),
        ),
    ))


if __name__ == "__main__":
    glm()
    minimax()
    print(f"wrote examples under {ROOT}")
