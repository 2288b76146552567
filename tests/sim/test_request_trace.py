"""The KV cache manager port (``kvproof.sim.requests.block_pool`` / ``managers`` / ``kv_manager`` /
``request`` / ``request_trace``) against numbers vLLM 0.33.0 itself produced.

Sources of the expected numbers:

* ``geometry-format.md`` worked example 1 and ``vllm033-invariants.md`` C.1 / C.2 / C.4 (ex.01, ex.02,
  ex.06);
* runs of ``tests/conformance/oracle_requests.py`` (vLLM's own ``Scheduler`` / ``KVCacheManager`` on
  CPU, ``.venv-vllm``) on the geometries written out below; each test names the run. The opt-in
  ``test_oracle_agrees`` at the end repeats a sample of them live (``-m conformance``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from kvproof.models.geometry import load_geometry
from kvproof.sim.requests.block_pool import BlockPool, KVCacheBlock
from kvproof.sim.requests.kv_manager import (
    KVCacheManager,
    SchedulerKVCacheConfig,
    SchedulerKVCacheGroup,
)
from kvproof.sim.requests.managers import (
    CircularBufferManager,
    FullAttentionManager,
    SingleTypeKVCacheManager,
    SlidingWindowManager,
)
from kvproof.sim.requests.manager_registry import get_manager_for_kv_cache_spec
from kvproof.sim.startup.plan import plan
from kvproof.sim.requests.request import Request, RequestStatus, get_request_block_hasher
from kvproof.sim.requests.request_trace import simulate_request, single_request_token_ids
from kvproof.sim.startup.specs import FullAttentionSpec, SlidingWindowSpec

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Geometries (the same dicts were given to vLLM's oracle)
# ---------------------------------------------------------------------------------------------


def _layer(spec="FullAttentionSpec", **fields):
    d = {"name": "model.layers.{i}.self_attn.attn", "spec": spec, "num_kv_heads": 8, "head_size": 128,
         "dtype": "bfloat16"}
    d.update(fields)
    return d


def full_32(**settings):
    """geometry-format.md worked example 1: 32 full-attention layers, 16-token blocks, 20 GiB."""
    doc = {"layers": [_layer(range=[0, 32])], "block_size": 16, "max_model_len": 8192,
           "available_memory_bytes": 20 * 2**30, "enable_prefix_caching": True}
    doc.update(settings)
    return doc


def swa_w128():
    """``tests/conformance/requests/swa_w128_chunked.json``: 8 SWA (W=128) layers, 4 GiB."""
    return {"layers": [_layer("SlidingWindowSpec", range=[0, 8], sliding_window=128)], "block_size": 16,
            "max_model_len": 32768, "max_num_batched_tokens": 8192, "available_memory_bytes": 4 * 2**30,
            "enable_prefix_caching": True}


def swa_only_w48(pool: int):
    """4 SWA (W=48) layers on a pool of ``pool`` blocks (async default: in-flight 1024 tokens)."""
    return {"layers": [{"name": "l.{i}", "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16",
                        "range": [0, 4], "spec": "SlidingWindowSpec", "sliding_window": 48}],
            "block_size": 16, "max_model_len": 4096, "available_memory_bytes": 2**30, "max_num_batched_tokens": 512,
            "enable_prefix_caching": True, "num_gpu_blocks_override": pool}


def hybrid_full_swa64(pool: int):
    """2 full + 2 SWA (W=64) layers on a pool of ``pool`` blocks."""
    lay = lambda idx, **kw: {"name": "l.{i}", "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16",
                             "indices": idx, **kw}
    return {"layers": [lay([0, 2], spec="FullAttentionSpec"), lay([1, 3], spec="SlidingWindowSpec", sliding_window=64)],
            "block_size": 16, "max_model_len": 2048, "available_memory_bytes": 2**30, "max_num_batched_tokens": 256,
            "enable_prefix_caching": True, "num_gpu_blocks_override": pool}


def mla_ring():
    """4 MLA layers (block 64) + 4 indexer tail rings (``CircularBufferSpec``, block 4)."""
    return {"layers": [
        {"name": "model.layers.{i}.self_attn.attn", "range": [0, 4], "spec": "MLAAttentionSpec", "num_kv_heads": 1,
         "head_size": 576, "dtype": "bfloat16"},
        {"name": "model.layers.{i}.self_attn.indexer.tail_cache", "range": [0, 4], "spec": "CircularBufferSpec",
         "block_size": 4, "num_kv_heads": 2, "head_size": 128, "head_size_v": 0, "dtype": "bfloat16",
         "dcp_sharded": False}],
        "block_size": 64, "max_model_len": 8192, "available_memory_bytes": 2**30, "enable_prefix_caching": True}


def run(doc: dict, simulate: dict, *, dense_retention: bool = False) -> dict:
    doc = dict(doc, simulate=simulate)
    geometry = load_geometry(doc)
    p = plan(geometry)
    if dense_retention:
        # vLLM's CacheConfig.prefix_cache_retention_interval = None (dense checkpoints). The oracle runs
        # below gave the geometry "prefix_cache_retention_interval": null; kvproof's settings currently
        # resolve that null to 0 (settings.py), so the test sets the resolved value directly.
        p = attrs.evolve(p, settings=attrs.evolve(p.settings, prefix_cache_retention_interval=None))
    return simulate_request(p, geometry.simulate)


def rows(result: dict) -> list[tuple]:
    return [(s["num_computed_tokens"], s["num_new_tokens"], s["blocks_held"], s["row_length"], s["free_blocks"])
            for s in result["simulation"] if s["phase"] != "prefix_hit_probe"]


# ---------------------------------------------------------------------------------------------
# Worked examples and invariants (vLLM's numbers)
# ---------------------------------------------------------------------------------------------


def test_worked_example_1_probe_hits_992_tokens():
    result = run(full_32(), {"prompt_tokens": 1000, "decode_tokens": 3, "prefix_hit_probe": True})
    probe = {"phase": "prefix_hit_probe", "prompt_tokens": 1000, "hit_tokens": 992, "hit_blocks": [62]}
    assert result["prefix_hit_probe"] == probe
    assert result["simulation"][-1] == probe
    # oracle_requests.py on tests/conformance/requests/full_32_probe.json: 10,240 blocks, 63 held.
    assert rows(result) == [(0, 1000, [63], [63], 10176), (1000, 1, [63], [63], 10176), (1001, 1, [63], [63], 10176)]
    assert [s["phase"] for s in result["simulation"]] == ["prefill", "decode", "decode", "prefix_hit_probe"]
    assert [s["step"] for s in result["simulation"][:-1]] == [0, 1, 2]


def test_1030_tokens_hold_65_full_attention_blocks():
    # vllm033-invariants.md C.1 [oracle ex.01]: 1030 tokens -> cdiv(1030, 16) = 65.
    result = run(full_32(), {"prompt_tokens": 1030})
    assert rows(result) == [(0, 1030, [65], [65], 10240 - 1 - 65)]
    assert result["prefix_hit_probe"] is None
    # A prompt that is a whole number of blocks leaves its last block to recompute (hit cap num_tokens - 1).
    assert run(full_32(), {"prompt_tokens": 1024, "prefix_hit_probe": True})["prefix_hit_probe"]["hit_tokens"] == 1008


def test_sliding_window_chunked_prefill_ex02():
    # vllm033-invariants.md C.2 [oracle ex.02]; free blocks from oracle_requests.py on swa_w128_chunked.json.
    result = run(swa_w128(), {"prompt_tokens": 20000, "decode_tokens": 40, "chunk_tokens": 8192,
                              "prefix_hit_probe": True})
    steps = rows(result)
    assert steps[:4] == [
        (0, 8192, [512], [512], 7679),
        (8192, 8192, [520], [1024], 7671),
        (16384, 3616, [234], [1250], 7957),
        (20000, 1, [9], [1251], 8182),
    ]
    # Decode holds 9 blocks, 8 on the steps whose new token opens a block after the window moved on.
    assert [held[0] for _, _, held, _, _ in steps[3:]] == [9] * 15 + [8] + [9] * 15 + [8] + [9] * 7
    assert steps[-1] == (20038, 1, [9], [1253], 8182)
    assert len(steps) == 3 + 39
    assert result["prefix_hit_probe"] == {"phase": "prefix_hit_probe", "prompt_tokens": 20000, "hit_tokens": 19984,
                                          "hit_blocks": [8]}


def test_circular_buffer_holds_one_block():
    # vllm033-invariants.md C.4 [oracle ex.06]: one ring block, never cached, no hits.
    result = run(mla_ring(), {"prompt_tokens": 1000, "decode_tokens": 5, "chunk_tokens": 300,
                              "prefix_hit_probe": True})
    steps = rows(result)
    assert steps[:3] == [(0, 300, [5, 1], [5, 1], 3633), (300, 300, [10, 1], [10, 1], 3628),
                         (600, 300, [15, 1], [15, 1], 3623)]
    assert all(held[1] == 1 and row[1] == 1 for _, _, held, row, _ in steps)
    # oracle: scheduler block 576 = lcm(64, 144); the hit is rounded down to it.
    assert result["prefix_hit_probe"]["hit_tokens"] == 576
    assert result["prefix_hit_probe"]["hit_blocks"] == [9, 0]


# ---------------------------------------------------------------------------------------------
# Eviction order (oracle_requests.py runs; retention dense so every full SWA block is cached)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pool, hit", [(70, 0), (100, 0), (300, 1984)])
def test_swa_prefix_hit_depends_on_eviction_order(pool, hit):
    # A 2,000-token prompt and 2,000 decode tokens: the decode blocks recycle the LRU head of the free
    # queue; with 69 or 99 usable blocks the prompt's last window is evicted before the probe.
    result = run(swa_only_w48(pool), {"prompt_tokens": 2000, "decode_tokens": 2000, "chunk_tokens": 100,
                                      "prefix_hit_probe": True}, dense_retention=True)
    steps = rows(result)
    assert len(steps) == 2019
    if pool == 70:
        assert steps[:4] == [(0, 100, [7], [7], 62), (100, 100, [10], [13], 59), (200, 100, [10], [19], 59),
                             (300, 100, [10], [25], 59)]
        assert steps[-1] == (3998, 1, [4], [250], 65)
    assert result["prefix_hit_probe"]["hit_tokens"] == hit
    assert result["prefix_hit_probe"]["hit_blocks"] == [3 if hit else 0]


def test_hybrid_full_attention_blocks_evicted_by_sliding_window_decode():
    result = run(hybrid_full_swa64(167), {"prompt_tokens": 100, "decode_tokens": 1900, "chunk_tokens": 256,
                                          "prefix_hit_probe": True}, dense_retention=True)
    steps = rows(result)
    assert steps[:2] == [(0, 100, [7, 7], [7, 7], 152), (100, 1, [7, 5], [7, 7], 154)]
    assert steps[-1] == (1998, 1, [125, 5], [125, 125], 36)
    assert result["prefix_hit_probe"]["hit_tokens"] == 0
    # With the default sparse retention (0) only the replay boundary's window is cached: nothing to evict.
    sparse = run(hybrid_full_swa64(167), {"prompt_tokens": 100, "decode_tokens": 1900, "chunk_tokens": 256,
                                          "prefix_hit_probe": True})
    assert sparse["prefix_hit_probe"]["hit_tokens"] == 96
    assert sparse["prefix_hit_probe"]["hit_blocks"] == [6, 4]


# ---------------------------------------------------------------------------------------------
# Other managers and settings (oracle_requests.py runs)
# ---------------------------------------------------------------------------------------------


def test_multi_module_mtp_lookahead_and_reprefillable_tail():
    # MTP k=2 multi-module: lookahead 2 slots (cdiv(63 + 2, 16) = 5), the last token stays uncached and
    # the EAGLE drop takes one more block off the hit.
    result = run(full_32(available_memory_bytes=4 * 2**30, speculative={
        "method": "mtp", "num_speculative_tokens": 2, "multi_module_mtp": True}),
        {"prompt_tokens": 63, "decode_tokens": 4, "prefix_hit_probe": True})
    assert [(h, r) for _, _, h, r, _ in rows(result)] == [([5], [5])] * 4
    assert result["prefix_hit_probe"]["hit_tokens"] == 48


def test_chunked_local_only_model_counts_out_of_chunk_tokens_as_computed():
    # vLLM quirk reproduced: on a chunked-local-only model the first lookup returns nulls for every
    # block before the last chunk start (999 // 128 * 128 = 896 tokens), even on an empty pool.
    doc = {"layers": [_layer("ChunkedLocalAttentionSpec", range=[0, 4], attention_chunk_size=128)], "block_size": 16,
           "max_model_len": 4096, "available_memory_bytes": 2**30, "max_num_batched_tokens": 512,
           "enable_prefix_caching": True, "num_gpu_blocks_override": 100}
    result = run(doc, {"prompt_tokens": 1000, "decode_tokens": 300, "chunk_tokens": 100, "prefix_hit_probe": True})
    steps = rows(result)
    assert steps[:3] == [(896, 100, [7], [63], 92), (996, 4, [7], [63], 92), (1000, 1, [7], [63], 92)]
    assert steps[-1] == (1298, 1, [2], [82], 97)
    assert result["prefix_hit_probe"]["hit_tokens"] == 992 and result["prefix_hit_probe"]["hit_blocks"] == [6]


def test_rswa_frees_the_gap_between_prompt_and_window():
    doc = full_32(available_memory_bytes=4 * 2**30, max_model_len=4096)
    doc["layers"] = [_layer("RSWASpec", range=[0, 4], rswa_window=256)]
    result = run(doc, {"prompt_tokens": 300, "decode_tokens": 100, "prefix_hit_probe": True})
    steps = rows(result)
    assert steps[0] == (0, 300, [19], [19], 16364)
    assert steps[-1] == (398, 1, [25], [25], 16358)


def test_eagle_hybrid_sliding_window():
    doc = {"layers": [_layer(indices=[0, 2]), _layer("SlidingWindowSpec", indices=[1, 3], sliding_window=128)],
           "block_size": 16, "max_model_len": 16384, "available_memory_bytes": 4 * 2**30,
           "enable_prefix_caching": True, "speculative": {"method": "eagle", "num_speculative_tokens": 3}}
    result = run(doc, {"prompt_tokens": 777, "decode_tokens": 5, "chunk_tokens": 100, "prefix_hit_probe": True})
    steps = rows(result)
    assert steps[:4] == [(0, 100, [7, 7], [7, 7], 32753), (100, 100, [13, 13], [13, 13], 32741),
                         (200, 100, [19, 15], [19, 19], 32733), (300, 100, [26, 16], [26, 26], 32725)]
    assert steps[-1] == (780, 1, [49, 9], [49, 49], 32709)
    assert result["prefix_hit_probe"]["hit_tokens"] == 768
    assert result["prefix_hit_probe"]["hit_blocks"] == [48, 8]


def test_prefix_caching_off_never_hits():
    doc = full_32(available_memory_bytes=4 * 2**30, enable_prefix_caching=False)
    doc["layers"] = [_layer(range=[0, 4])]
    result = run(doc, {"prompt_tokens": 64, "prefix_hit_probe": True})
    assert rows(result) == [(0, 64, [4], [4], 16379)]
    assert result["prefix_hit_probe"] == {"phase": "prefix_hit_probe", "prompt_tokens": 64, "hit_tokens": 0,
                                          "hit_blocks": [0]}


def test_decode_stops_at_max_model_len():
    # check_stop: num_tokens >= max_model_len ends the request before decode_tokens are sampled.
    result = run(full_32(max_model_len=1024), {"prompt_tokens": 1000, "decode_tokens": 100})
    steps = rows(result)
    assert len(steps) == 1 + 23  # the prefill samples token 1001; 23 decode steps reach 1024 tokens
    assert steps[-1][0] == 1022


def test_prefill_only_request_samples_nothing():
    result = run(full_32(), {"prompt_tokens": 32, "chunk_tokens": 16, "prefix_hit_probe": True})
    assert rows(result) == [(0, 16, [1], [1], 10238), (16, 16, [2], [2], 10237)]
    assert result["prefix_hit_probe"]["hit_tokens"] == 16


def cross_full(enable_prefix_caching: bool):
    return {"layers": [_layer(indices=[0]), _layer("CrossAttentionSpec", indices=[1])], "block_size": 16,
            "max_model_len": 4096, "available_memory_bytes": 2**30, "enable_prefix_caching": enable_prefix_caching}


def test_cross_attention_lookup_raises_as_vllm_does():
    # oracle_requests.py: vLLM raises from CrossAttentionManager.find_longest_cache_hit at the first
    # lookup (single_type_kv_cache_manager.py:2173-2196); the port raises the same.
    with pytest.raises(NotImplementedError, match="CrossAttentionManager does not support caching"):
        run(cross_full(True), {"prompt_tokens": 100, "prefix_hit_probe": True})
    # Without prefix caching the cross-attention group gets cdiv(num_encoder_tokens = 0, bs) = 0 blocks.
    result = run(cross_full(False), {"prompt_tokens": 100, "decode_tokens": 2, "prefix_hit_probe": True})
    assert rows(result) == [(0, 100, [7, 0], [7, 0], 16376), (100, 1, [7, 0], [7, 0], 16376)]


def test_stalled_request_is_reported():
    p = plan(load_geometry(full_32()))
    tiny = KVCacheManager(
        SchedulerKVCacheConfig(num_blocks=10, kv_cache_groups=[SchedulerKVCacheGroup(p.groups[0].scheduler_spec)]),
        max_model_len=8192, scheduler_block_size=16, hash_block_size=16)
    result = simulate_request(p, {"prompt_tokens": 1000, "prefix_hit_probe": True}, kv_cache_manager=tiny)
    assert result == {"simulation": [], "prefix_hit_probe": None, "simulation_stalled": True}


def test_no_single_request_without_prompt_tokens():
    p = plan(load_geometry(full_32()))
    assert simulate_request(p, {"requests": []}) == {"simulation": None, "prefix_hit_probe": None}


# ---------------------------------------------------------------------------------------------
# Block pool: vLLM's free-queue order, lazily
# ---------------------------------------------------------------------------------------------


class EagerQueue:
    """vLLM's FreeKVCacheBlockQueue order as a plain list of ids (reference for the lazy pool)."""

    def __init__(self, n: int):
        self.ids = list(range(1, n))  # block 0 popped as the null block

    def popleft_n(self, k):
        out, self.ids = self.ids[:k], self.ids[k:]
        return out


def test_free_queue_order_matches_an_eager_reference():
    rng = random.Random(7)
    pool = BlockPool(64, enable_caching=True, hash_block_size=1)
    ref = EagerQueue(64)
    held: list[KVCacheBlock] = []
    counter = 0
    for _ in range(2000):
        op = rng.random()
        if op < 0.45 and pool.get_num_free_blocks():
            k = rng.randint(1, min(5, pool.get_num_free_blocks()))
            got = pool.get_new_blocks(k)
            assert [b.block_id for b in got] == ref.popleft_n(k)
            for b in got:
                ref_hashed = b.block_hash is not None
                assert not ref_hashed  # a reused cached block loses its hash
            held += got
        elif op < 0.6 and held:
            blk = rng.choice(held)
            if blk.block_hash is None:
                counter += 1
                key = (counter.to_bytes(8, "little"), 0)
                pool._insert_block_hash(key, blk, num_tokens=1)
        elif held:
            k = rng.randint(1, len(held))
            rng.shuffle(held)
            freeing, held = held[:k], held[k:]
            pool.free_blocks(freeing)
            first = [b.block_id for b in freeing if b.block_hash is None]
            last = [b.block_id for b in freeing if b.block_hash is not None]
            ref.ids = first + ref.ids + last  # block_pool.py:816-849: prepend unhashed, append hashed
        assert pool.get_num_free_blocks() == len(ref.ids)
        assert pool.free_block_queue.get_all_free_block_ids() == ref.ids


def test_touch_takes_a_cached_block_out_of_the_queue():
    pool = BlockPool(8, enable_caching=True, hash_block_size=16)
    a, b, c = pool.get_new_blocks(3)
    pool._insert_block_hash((b"x", 0), b, num_tokens=16)
    pool.free_blocks([c, b, a])  # c, a unhashed -> front (in that order); b hashed -> back
    assert pool.free_block_queue.get_all_free_block_ids() == [3, 1, 4, 5, 6, 7, 2]
    assert pool.get_cached_block(b"x", [0]) == [b]
    pool.touch([b])
    assert b.ref_cnt == 1 and pool.get_num_free_blocks() == 6
    assert 2 not in pool.free_block_queue.get_all_free_block_ids()
    pool.free_blocks([b])
    assert pool.free_block_queue.get_all_free_block_ids()[-1] == 2
    # Reusing the cached block evicts its hash.
    assert [x.block_id for x in pool.get_new_blocks(7)][-1] == 2
    assert pool.get_cached_block(b"x", [0]) is None and b.block_hash is None
    assert pool.get_usage() == 1.0
    with pytest.raises(ValueError, match="Cannot get 1 free blocks"):
        pool.get_new_blocks(1)


def test_a_billion_block_pool_is_cheap():
    pool = BlockPool(10**9, enable_caching=True, hash_block_size=16)
    blocks = pool.get_new_blocks(1000)
    assert [b.block_id for b in blocks[:3]] == [1, 2, 3]
    pool.free_blocks(reversed(blocks))
    assert pool.get_num_free_blocks() == 10**9 - 1
    assert len(pool._blocks) == 1001  # the null block and the 1,000 handed out
    # Freed in reverse (the tail first), unhashed blocks go to the front: LIFO reuse.
    assert [b.block_id for b in pool.get_new_blocks(2)] == [1000, 999]


# ---------------------------------------------------------------------------------------------
# Request and manager API (what the scheduler port calls)
# ---------------------------------------------------------------------------------------------


def test_request_block_hashes_follow_appended_tokens():
    hasher = get_request_block_hasher(4)
    r = Request("r", [1, 2, 3, 4, 5, 6], max_tokens=4, block_hasher=hasher)
    assert len(r.block_hashes) == 1 and r.num_tokens == 6 and r.status == RequestStatus.WAITING
    r.append_output_token_ids(7)
    assert len(r.block_hashes) == 1
    r.append_output_token_ids([8, 9])
    assert len(r.block_hashes) == 2 and r.num_output_tokens == 3 and r.output_token_ids == [7, 8, 9]
    same = Request("s", [1, 2, 3, 4, 5, 6, 7, 8, 0], block_hasher=hasher)
    assert same.block_hashes == r.block_hashes  # chained over equal prefixes
    other = Request("t", [1, 2, 3, 5, 5, 6, 7, 8], block_hasher=hasher)
    assert other.block_hashes[0] != r.block_hashes[0] and other.block_hashes[1] != r.block_hashes[1]
    # With lookahead hashes a block's hash waits for the next token and covers it.
    la = Request("u", [1, 2, 3, 4], block_hasher=get_request_block_hasher(4, 1))
    assert la.block_hashes == []
    la.append_output_token_ids(9)
    assert len(la.block_hashes) == 1 and la.block_hashes[0] != r.block_hashes[0]


def test_manager_classes_and_admission_cap():
    pool = BlockPool(100, enable_caching=True, hash_block_size=16)
    swa = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16", sliding_window=128)
    m = get_manager_for_kv_cache_spec(swa, max_in_flight_tokens=8192, max_model_len=32768, block_pool=pool,
                                      enable_caching=True, kv_cache_group_id=0, scheduler_block_size=16)
    assert type(m) is SlidingWindowManager and isinstance(m, SingleTypeKVCacheManager)
    assert m.max_admission_blocks_per_request == swa.max_admission_blocks_per_request(8192, 32768)
    assert m.get_num_skipped_tokens(8192) == 8192 - 127
    full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    f = get_manager_for_kv_cache_spec(full, max_in_flight_tokens=8192, max_model_len=32768, block_pool=pool,
                                      enable_caching=True, kv_cache_group_id=0, scheduler_block_size=16)
    assert type(f) is FullAttentionManager and f.max_admission_blocks_per_request is None
    assert issubclass(CircularBufferManager, FullAttentionManager)


def test_kv_cache_manager_interface_for_the_scheduler():
    p = plan(load_geometry(full_32()))
    manager = KVCacheManager.from_plan(p)
    assert manager.block_pool.get_num_free_blocks() == p.num_blocks - 1
    a = manager.make_request("a", single_request_token_ids(100), max_tokens=2)
    blocks, hit, boundary = manager.get_computed_blocks(a)
    assert (hit, boundary) == (0, 0) and blocks is manager.empty_kv_cache_blocks
    new = manager.allocate_slots(a, 100, hit, blocks, full_sequence_must_fit=True, has_scheduled_reqs=False)
    assert [len(g) for g in new.blocks] == [7]
    a.num_computed_tokens = 100
    assert manager.get_block_ids("a") == ([b.block_id for b in new.blocks[0]],)
    b = manager.make_request("b", single_request_token_ids(100), max_tokens=2)
    blocks, hit, _ = manager.get_computed_blocks(b)
    assert hit == 96 and len(blocks.blocks[0]) == 6
    assert manager.allocate_slots(b, 4, hit, blocks) is not None
    assert [blk.ref_cnt for blk in manager.get_blocks("b").blocks[0][:6]] == [2] * 6
    manager.free(a)
    manager.free(b)
    assert manager.block_pool.get_num_free_blocks() == p.num_blocks - 1
    assert manager.usage == 0.0


# ---------------------------------------------------------------------------------------------
# Live differential run (opt-in)
# ---------------------------------------------------------------------------------------------

ORACLE = ROOT / "tests" / "conformance" / "oracle_requests.py"
PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.mark.conformance
@pytest.mark.skipif(not (ORACLE.exists() and PYTHON.exists()), reason="needs .venv-vllm and oracle_requests.py")
def test_oracle_agrees():
    sims = [{"prompt_tokens": 1000, "decode_tokens": 3, "prefix_hit_probe": True},
            {"prompt_tokens": 3000, "decode_tokens": 20, "chunk_tokens": 1024, "prefix_hit_probe": True}]
    docs = []
    for base in (full_32(), swa_w128(), mla_ring(), hybrid_full_swa64(200), swa_only_w48(70), cross_full(False)):
        for s in sims:
            if s["prompt_tokens"] + s["decode_tokens"] < base["max_model_len"]:
                docs.append(dict(base, simulate=s))
    proc = subprocess.run([str(PYTHON), str(ORACLE), "--jsonl", "-"],
                          input="".join(json.dumps(d) + "\n" for d in docs), check=False, capture_output=True, text=True,
                          cwd=ROOT, timeout=3600)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(answers) == len(docs), proc.stderr[-2000:]
    for doc, theirs in zip(docs, answers):
        assert theirs["status"] == "ok", theirs
        geometry = load_geometry(doc)
        ours = simulate_request(plan(geometry), geometry.simulate)
        assert ours["simulation"] == theirs["simulation"]
        assert ours["prefix_hit_probe"] == theirs["prefix_hit_probe"]


DRIVER = ROOT / "tests" / "sim" / "kv_manager_diff_driver.py"


@pytest.mark.conformance
@pytest.mark.skipif(not PYTHON.exists(), reason="needs .venv-vllm")
def test_manager_matches_vllm_on_random_sequences():
    """48 seeded multi-request call sequences (full attention with and without prefix caching, SWA,
    full + SWA with 16/32-token blocks and lookahead, EAGLE full and full + SWA with prefill lookahead,
    chunked-local + full; small pools, so hits, evictions and preemptions happen) give the same log
    on vLLM's KVCacheManager and on the port."""
    theirs = subprocess.run([str(PYTHON), str(DRIVER), "vllm"], check=False, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    ours = subprocess.run([sys.executable, str(DRIVER), "kvproof"], check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert ours.returncode == 0, ours.stderr[-2000:]
    theirs_log, ours_log = json.loads(theirs.stdout), json.loads(ours.stdout)
    assert theirs_log.keys() == ours_log.keys()
    for name, log in theirs_log.items():
        assert not isinstance(log, str), (name, log)
        assert ours_log[name] == log, name
