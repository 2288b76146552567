"""``KVCacheManager.decode_event`` (the decode runs' one-token decode) against the real
``allocate_slots(request, 1, num_lookahead_tokens=L)`` + ``decode_quiet_steps``: twin managers driven
through the same admissions, decodes and frees end every call with the same result, rows, cached
blocks, free queue order and cache keys."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvproof.sim.requests.kv_manager import KVCacheManager, SchedulerKVCacheConfig, SchedulerKVCacheGroup
from kvproof.sim.requests.request import RequestStatus
from kvproof.sim.startup.specs import FullAttentionSpec, SlidingWindowSpec


def _spec(kind: str, block_size: int):
    if kind == "swa":
        return SlidingWindowSpec(block_size=block_size, num_kv_heads=8, head_size=128, dtype="bfloat16",
                                 sliding_window=64)
    return FullAttentionSpec(block_size=block_size, num_kv_heads=8, head_size=128, dtype="bfloat16")


def _manager(case: dict) -> KVCacheManager:
    groups = [SchedulerKVCacheGroup(_spec(kind, bs)) for kind, bs in case["groups"]]
    hbs = case["groups"][0][1] if len(groups) == 1 else case["hbs"]  # (one group: its block size)
    config = SchedulerKVCacheConfig(num_blocks=case["num_blocks"], kv_cache_groups=groups)
    return KVCacheManager(config, max_model_len=case["max_model_len"],
                          scheduler_block_size=max(bs for _, bs in case["groups"]), hash_block_size=hbs,
                          enable_caching=case["caching"], num_prefill_lookahead=case["prefill_lookahead"])


def _state(m: KVCacheManager) -> tuple:
    managers = m.coordinator.single_type_managers
    pool = m.block_pool
    cache = {key: sorted(v.block_id for v in (blocks.values() if isinstance(blocks, dict) else [blocks]))
             for key, blocks in pool.cached_block_hash_to_block._cache.items()}
    return (
        [{rid: [b.block_id for b in row] for rid, row in mgr.req_to_blocks.items()} for mgr in managers],
        [dict(mgr.num_cached_block) for mgr in managers],
        [list(mgr.new_block_ids) for mgr in managers],
        pool.free_block_queue.get_all_free_block_ids(),
        cache,
        {b.block_id: (b.ref_cnt, b.block_hash) for b in pool._blocks},
    )


cases = st.fixed_dictionaries({
    "groups": st.sampled_from([
        [("full", 16)], [("full", 16), ("full", 16)], [("full", 16), ("full", 32)], [("full", 32)],
        [("full", 16), ("swa", 16)],
    ]),
    "hbs": st.sampled_from([16, 16, 16, 8]),
    "num_blocks": st.integers(12, 160),
    "max_model_len": st.sampled_from([256, 512]),
    "caching": st.booleans(),
    "prefill_lookahead": st.sampled_from([0, 0, 2]),
    "lookahead": st.integers(0, 3),
    "seed": st.integers(0, 2**32 - 1),
})


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cases)
def test_decode_event_is_allocate_slots(case: dict) -> None:
    rng = random.Random(case["seed"])
    twins = (_manager(case), _manager(case))
    plain = twins[0]._plain_decode_groups is not None
    L = case["lookahead"]
    prefixes = [[1_000_000 * (k + 1) + i for i in range(rng.choice([16, 40, 64]))] for k in range(2)]
    running: list[tuple] = []  # (request of twin 0, request of twin 1)
    made = 0
    decodes = 0
    for _ in range(120):
        action = rng.random()
        if action < 0.2 or not running:
            tokens = (rng.choice(prefixes) if rng.random() < 0.7 else []) + \
                [50_000_000 + 1000 * made + i for i in range(rng.randint(1, 60))]
            tokens = tokens[: case["max_model_len"] - 40]
            pair = tuple(m.make_request(f"r{made}", tokens, 50) for m in twins)
            made += 1
            answers = []
            for m, r in zip(twins, pair):
                blocks, hit, _ = m.get_computed_blocks(r)
                answers.append((hit, m.allocate_slots(r, r.num_tokens - hit, hit, blocks) is not None))
            assert answers[0] == answers[1]
            hit, admitted = answers[0]
            if admitted:
                for r in pair:
                    r.status = RequestStatus.RUNNING
                    r.num_computed_tokens = r.num_tokens
                running.append(pair)
        elif action < 0.85:
            pair = rng.choice(running)
            if pair[0].num_tokens + 1 + L >= case["max_model_len"]:
                continue
            for r in pair:  # the sampled token of the last step, then a one-token decode
                r.append_output_token_ids(2_000_000_000 + 1000 * int(r.request_id[1:]) + r.num_output_tokens)
                r.num_computed_tokens = r.num_tokens - 1
            c = pair[0].num_computed_tokens
            got = twins[0].decode_event(pair[0], c, L)
            ref = twins[1].allocate_slots(pair[1], 1, num_lookahead_tokens=L)
            if ref is not None:
                ref = twins[1].decode_quiet_steps(pair[1], c + 1, L)
            assert got == ref
            decodes += 1
            if got is None:  # the row did not fit: free it, as a preemption would
                running.remove(pair)
                for m, r in zip(twins, pair):
                    m.free(r)
            else:
                for r in pair:
                    r.num_computed_tokens = c + 1
        else:
            pair = running.pop(rng.randrange(len(running)))
            for m, r in zip(twins, pair):
                m.free(r)
        assert _state(twins[0]) == _state(twins[1])
    assert decodes or not plain
