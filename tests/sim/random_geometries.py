"""Random (mostly valid) geometries for differential runs against the vLLM-driven oracle.

Not a Hypothesis strategy (the public strategies live in ``kvproof.fuzz.strategies``): a seeded
generator that mixes every spec class the geometry format knows with the engine settings that
change the plan, used by ``test_oracle_parity.py`` and by hand::

    python tests/sim/random_geometries.py SEED COUNT > geometries.jsonl
"""

import json
import random
import sys

DT = ["bfloat16", "float16", "float32", "uint8", "bf16", "fp8"]

def attn_fields(r, heads=None):
    f = {"num_kv_heads": heads or r.choice([1, 2, 4, 8]), "head_size": r.choice([64, 128, 256, 576]),
         "dtype": r.choice(DT)}
    if r.random() < 0.1: f["head_size_v"] = r.choice([0, 64])
    if r.random() < 0.1: f["block_stride_alignment"] = r.choice([1, 512, 1000, {"MultipleOf": 16}, {"MultipleOf": 1}])
    if r.random() < 0.05: f["tokens_per_state"] = r.choice([2, 4, "1/2"])
    if r.random() < 0.05: f["max_tp_shards"] = 1
    return f

def layer(r, kind, name, idx, base_fields):
    e = {"name": name + ".{i}", "indices": idx, "spec": kind}
    e.update(base_fields)
    return e

def gen(r, n):
    layers = []
    total = r.randint(2, 24)
    kinds = r.choice([
        ["FullAttentionSpec"], ["FullAttentionSpec", "SlidingWindowSpec"], ["MLAAttentionSpec"],
        ["FullAttentionSpec", "MambaSpec"], ["MambaSpec", "FullAttentionSpec", "SlidingWindowSpec"],
        ["MLAAttentionSpec", "SlidingWindowSpec"], ["MLAAttentionSpec", "MambaSpec", "CircularBufferSpec"],
        ["FullAttentionSpec", "ChunkedLocalAttentionSpec"], ["SlidingWindowSpec"], ["FullAttentionSpec", "HiddenStateCacheSpec"],
        ["FullAttentionSpec", "CrossAttentionSpec"], ["FullAttentionSpec", "RSWASpec"], ["SlidingWindowMLASpec", "MLAAttentionSpec"],
        ["MambaSpec"], ["FullAttentionSpec", "FullAttentionSpec"], ["FullAttentionSpec", "SinkFullAttentionSpec"],
        ["FullAttentionSpec", "EncoderOnlyAttentionSpec"],
    ])
    indices = list(range(total))
    r.shuffle(indices)
    cuts = sorted(r.sample(range(1, total), min(len(kinds) - 1, total - 1))) if len(kinds) > 1 else []
    parts = [sorted(indices[a:b]) for a, b in zip([0] + cuts, cuts + [total])]
    shared = attn_fields(r)
    for k, (kind, idx) in enumerate(zip(kinds, parts)):
        if not idx:
            continue
        name = f"model.layers.k{k}"
        if kind == "MambaSpec":
            f = {"shapes": r.choice([[[3, 8448], [128, 64, 128]], [[4, 1024], [8, 64, 64]], [[2, 256]], [[3, 3072], [8, 128, 128]]]),
                 "mamba_type": r.choice(["MAMBA2", "GDN_ATTN", "MAMBA1"])}
            f["dtypes"] = [r.choice(["bfloat16", "float32"]) for _ in f["shapes"]]
            if r.random() < 0.5: f["num_prefill_checkpoint_blocks"] = 1; f["prefill_checkpoint_alignment"] = r.choice([1, 16])
        else:
            f = dict(shared) if r.random() < 0.7 else attn_fields(r)
            if kind in ("MLAAttentionSpec", "HiddenStateCacheSpec", "SlidingWindowMLASpec"):
                f["num_kv_heads"] = 1; f.pop("head_size_v", None)
                if kind == "MLAAttentionSpec" and r.random() < 0.2: f["cache_role"] = "indexer"; f["tokens_per_state"] = 4
            if kind in ("SlidingWindowSpec", "SlidingWindowMLASpec"):
                f["sliding_window"] = r.choice([128, 512, 1024, 4096])
            if kind == "FullAttentionSpec" and r.random() < 0.2:
                f["sliding_window"] = r.choice([128, 1024])
            if kind == "ChunkedLocalAttentionSpec":
                f["attention_chunk_size"] = r.choice([1024, 8192])
            if kind == "RSWASpec":
                f["rswa_window"] = 256
            if kind == "SinkFullAttentionSpec":
                f["sink_len"] = 16
            if kind == "CircularBufferSpec":
                f["block_size"] = 4; f["dcp_sharded"] = False
            if r.random() < 0.05 and kind != "CircularBufferSpec":
                f["block_size"] = r.choice([16, 32, 64])
            if r.random() < 0.05:
                f["page_size_padded"] = 1 << 22
            if r.random() < 0.05:
                f["is_draft"] = True
        layers.append(layer(r, kind, name, idx, f))
    doc = {"name": f"random-{n}", "layers": layers, "max_model_len": r.choice([2048, 8192, 32768, 131072])}
    if r.random() < 0.85: doc["block_size"] = r.choice([16, 16, 32, 64, 128, 528])
    doc["available_memory_bytes"] = r.choice([1 << 28, 1 << 30, 4 << 30, 20 << 30, 80 << 30])
    if r.random() < 0.7: doc["enable_prefix_caching"] = r.random() < 0.7
    if r.random() < 0.3: doc["kv_cache_layout"] = r.choice(["LBNHC", "LBHNC", "BLHNC", "BLNHC", "LHBNC", "BHLNC"])
    elif r.random() < 0.3: doc["supported_kv_cache_layouts"] = r.choice([["BLHNC"], ["LBHNC", "BLHNC"], [["BLHNC", "LBNHC"], ["LBNHC", "BLHNC"]], [None, ["BLNHC"]]])
    if r.random() < 0.15: doc["disable_hybrid_kv_cache_manager"] = True
    if r.random() < 0.15: doc["prefix_match_unit"] = r.choice([1, 4, 8, 16, 32])
    if r.random() < 0.1: doc["num_gpu_blocks_override"] = r.choice([100, 1000, 5000])
    if r.random() < 0.1: doc["prefix_cache_retention_interval"] = r.choice([0, 16, 64, 1000, -16])
    if r.random() < 0.2: doc["max_num_batched_tokens"] = r.choice([2048, 4096, 16384])
    if r.random() < 0.2: doc["async_scheduling"] = r.random() < 0.5
    if r.random() < 0.15:
        doc["speculative"] = {"method": r.choice(["eagle", "mtp", "eagle3", "ngram", "dflash"]), "num_speculative_tokens": r.choice([1, 2, 3])}
        if r.random() < 0.3: doc["speculative"]["multi_module_mtp"] = True
        if r.random() < 0.2: doc["speculative"]["eagle_block_drop"] = False
    if r.random() < 0.1: doc["dcp"] = r.choice([2, 4])
    if r.random() < 0.2: doc["tp"] = r.choice([2, 8])
    if r.random() < 0.1: doc["use_replayssm"] = True
    if r.random() < 0.4:
        pa = {"num_kv_heads": shared["num_kv_heads"], "head_size": shared["head_size"],
              "backend_kernel_block_sizes": r.choice([[{"MultipleOf": 16}], [16, 32, 64], [64], [128, 256]])}
        if r.random() < 0.5: pa["use_mla"] = any(l["spec"].startswith("MLA") for l in layers)
        if r.random() < 0.3: pa["other_backend_kernel_block_sizes"] = [[{"MultipleOf": 32}]]
        if r.random() < 0.5: pa["mamba_prefill_checkpoint_alignment"] = r.choice([None, 1, 16])
        if r.random() < 0.5: pa["model_dtype"] = r.choice(["bfloat16", "float16"])
        doc["platform_alignment"] = pa
    if r.random() < 0.3:
        doc["views"] = {"num_blocks": r.choice([1, 2, 3]), "backends": [
            {"match": "k0", "kernel_block_sizes": r.choice([[16], [{"MultipleOf": 16}], [32, 64], [128, 256]])}]}
    if r.random() < 0.15:
        names = []
        for e in layers:
            names += [e["name"].replace("{i}", str(i)) for i in e["indices"]]
        idx_sorted = sorted(range(len(names)), key=lambda i: int(names[i].split(".")[-1]))
        ordered = [names[i] for i in idx_sorted]
        cut = len(ordered) // 2
        if cut:
            doc["workers"] = [ordered[:cut], ordered[cut:]]
            doc["available_memory_bytes"] = [doc["available_memory_bytes"], doc["available_memory_bytes"] // 2]
    # (Views with num_gpu_blocks_override and cross attention with any max_num_batched_tokens are fine:
    # both sides build views on views.num_blocks blocks and size cross attention by the scheduler's
    # encoder budget, config/scheduler.py:306.)
    return doc

if __name__ == "__main__":
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    r = random.Random(seed)
    for n in range(count):
        print(json.dumps(gen(r, f"{seed}-{n}")))
