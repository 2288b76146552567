"""Differential driver for ``tests/sim/test_request_trace.py::test_manager_matches_vllm_on_random_sequences``.

Drives a ``KVCacheManager`` -- vLLM 0.33.0's own (``python kv_manager_diff_driver.py vllm``, run with
``.venv-vllm/bin/python``) or kvproof's port (``... kvproof``) -- through the same seeded random
sequence of multi-request calls (admissions with prefix hits and the admission gate, chunked prefill,
decode with lookahead slots, preemption, aborts, frees) on small pools, and prints one JSON object:
per case, the log of every call's result (hit tokens, shared-prefix boundary, new block ids per group
or None, free blocks). The two logs must be equal.
"""
import contextlib
import json
import os
import random
import sys

IMPL = sys.argv[1]  # "vllm" or "kvproof"
CASES = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None

if IMPL == "vllm":
    with contextlib.redirect_stdout(sys.stderr):
        import torch
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.kv_cache_interface import (
            ChunkedLocalAttentionSpec,
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
            SlidingWindowSpec,
        )
        from vllm.v1.request import Request, RequestStatus
        fn = get_hash_fn_by_name("sha256"); init_none_hash(fn)
    DT = torch.bfloat16
    def spec(kind, bs, **kw):
        cls = {"full": FullAttentionSpec, "swa": SlidingWindowSpec, "chunked": ChunkedLocalAttentionSpec}[kind]
        return cls(block_size=bs, num_kv_heads=8, head_size=128, dtype=DT, **kw)
    def build(case):
        groups = [KVCacheGroupSpec([f"l{i}"], spec(g["kind"], g["bs"], **g.get("kw", {}))) for i, g in enumerate(case["groups"])]
        cfg = KVCacheConfig(num_blocks=case["num_blocks"], kv_cache_tensors=[], kv_cache_groups=groups,
                            prefix_cache_retention_interval=case.get("retention", 0))
        m = KVCacheManager(kv_cache_config=cfg, max_model_len=case["L"], scheduler_block_size=case["sbs"],
                           hash_block_size=case["hbs"], max_in_flight_tokens=case["inflight"], enable_caching=case["pc"],
                           use_eagle=case.get("eagle", False), num_prefill_lookahead=case.get("prefill_lookahead", 0))
        hasher = get_request_block_hasher(case["hbs"], fn, 0) if case["pc"] else None
        def mk(rid, toks, mt):
            return Request(request_id=rid, prompt_token_ids=list(toks), sampling_params=SamplingParams(max_tokens=mt),
                           pooling_params=None, arrival_time=0.0, block_hasher=hasher)
        return m, mk
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from kvproof.sim.requests.kv_manager import (
        KVCacheManager,
        SchedulerKVCacheConfig,
        SchedulerKVCacheGroup,
    )
    from kvproof.sim.requests.request import RequestStatus
    from kvproof.sim.startup.specs import (
        ChunkedLocalAttentionSpec,
        FullAttentionSpec,
        SlidingWindowSpec,
    )
    def spec(kind, bs, **kw):
        cls = {"full": FullAttentionSpec, "swa": SlidingWindowSpec, "chunked": ChunkedLocalAttentionSpec}[kind]
        return cls(block_size=bs, num_kv_heads=8, head_size=128, dtype="bfloat16", **kw)
    def build(case):
        groups = [SchedulerKVCacheGroup(spec(g["kind"], g["bs"], **g.get("kw", {}))) for g in case["groups"]]
        cfg = SchedulerKVCacheConfig(num_blocks=case["num_blocks"], kv_cache_groups=groups,
                                     prefix_cache_retention_interval=case.get("retention", 0))
        m = KVCacheManager(cfg, max_model_len=case["L"], scheduler_block_size=case["sbs"], hash_block_size=case["hbs"],
                           max_in_flight_tokens=case["inflight"], enable_caching=case["pc"],
                           use_eagle=case.get("eagle", False), num_prefill_lookahead=case.get("prefill_lookahead", 0))
        return m, lambda rid, toks, mt: m.make_request(rid, toks, mt)


def ids(kvb):
    if kvb is None:
        return None
    return [[b.block_id for b in g] for g in kvb.blocks]


def run_case(case):
    m, mk = build(case)
    r = random.Random(case["seed"])
    prefixes = [[10_000_000 * (k + 1) + i for i in range(r.choice([16, 40, 64, 100, 200]))] for k in range(3)]
    waiting, running, log = [], [], []
    nreq = 0
    for step in range(case["steps"]):
        x = r.random()
        if x < 0.25 or (not waiting and not running):
            toks = list(r.choice(prefixes))[: r.randint(0, 200)] if r.random() < 0.8 else []
            toks += [10_000_000 * (100 + nreq) + i for i in range(r.randint(1, 150))]
            toks = toks[: case["L"] - 20]
            req = mk(f"r{nreq}", toks, r.randint(1, 30)); nreq += 1
            waiting.append(req)
            continue
        if x < 0.45 and waiting:
            req = waiting.pop(0)
            blocks, hit, spb = m.get_computed_blocks(req)
            req.shared_prefix_boundary = spb
            n = min(r.choice([16, 50, 1000]), req.num_tokens - hit)
            if n <= 0:
                n = 1
            nb = m.allocate_slots(req, n, hit, blocks, full_sequence_must_fit=r.random() < 0.7,
                                  has_scheduled_reqs=bool(running))
            log.append(["admit", req.request_id, hit, spb, n, ids(nb), m.block_pool.get_num_free_blocks()])
            if nb is None:
                waiting.insert(0, req)
            else:
                req.status = RequestStatus.RUNNING
                req.num_computed_tokens = hit + n
                running.append(req)
            continue
        if x < 0.85 and running:
            req = r.choice(running)
            if req.num_computed_tokens >= req.num_tokens:
                req.append_output_token_ids(2_000_000_000 + int(req.request_id[1:]) * 1000 + req.num_output_tokens)
            n = min(r.choice([1, 1, 16, 64]), req.num_tokens - req.num_computed_tokens)
            n = max(n, 1)
            if req.num_computed_tokens + n > case["L"] - 1 or req.num_output_tokens >= req.max_tokens:
                m.free(req); running.remove(req)
                log.append(["finish", req.request_id, m.block_pool.get_num_free_blocks()])
                continue
            nb = m.allocate_slots(req, n, num_lookahead_tokens=case.get("lookahead", 0))
            log.append(["step", req.request_id, n, ids(nb), m.block_pool.get_num_free_blocks()])
            if nb is None:
                # preempt it (recompute style)
                m.free(req); running.remove(req)
                req.status = RequestStatus.PREEMPTED; req.num_computed_tokens = 0
                waiting.insert(0, req)
                log.append(["preempt", req.request_id, m.block_pool.get_num_free_blocks()])
            else:
                req.num_computed_tokens += n
            continue
        if running:
            req = running.pop(r.randrange(len(running)))
            m.free(req)
            log.append(["abort", req.request_id, m.block_pool.get_num_free_blocks()])
    return log


CASES_DEF = []
for seed in range(6):
    CASES_DEF += [
        {"name": f"full{seed}", "groups": [{"kind": "full", "bs": 16}], "num_blocks": 60, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 1024, "pc": True, "seed": seed, "steps": 600},
        {"name": f"full_nopc{seed}", "groups": [{"kind": "full", "bs": 16}], "num_blocks": 60, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 1024, "pc": False, "seed": seed, "steps": 400},
        {"name": f"swa{seed}", "groups": [{"kind": "swa", "bs": 16, "kw": {"sliding_window": 40}}], "num_blocks": 40, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 256, "pc": True, "seed": seed, "steps": 600, "retention": None},
        {"name": f"hyb{seed}", "groups": [{"kind": "full", "bs": 16}, {"kind": "swa", "bs": 16, "kw": {"sliding_window": 40}}], "num_blocks": 120, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 256, "pc": True, "seed": seed, "steps": 600, "retention": [None, 0, 64][seed % 3]},
        {"name": f"hyb32_{seed}", "groups": [{"kind": "full", "bs": 16}, {"kind": "swa", "bs": 32, "kw": {"sliding_window": 70}}], "num_blocks": 120, "L": 1024, "sbs": 32, "hbs": 16, "inflight": 256, "pc": True, "seed": seed, "steps": 600, "retention": [None, 0][seed % 2], "lookahead": seed % 3},
        {"name": f"eagle_full{seed}", "groups": [{"kind": "full", "bs": 16}], "num_blocks": 60, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 1024, "pc": True, "seed": seed, "steps": 500, "eagle": True, "prefill_lookahead": 1 + seed % 2, "lookahead": 1 + seed % 3},
        {"name": f"eagle_hyb{seed}", "groups": [{"kind": "full", "bs": 16}, {"kind": "swa", "bs": 16, "kw": {"sliding_window": 40}}], "num_blocks": 120, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 256, "pc": True, "seed": seed, "steps": 500, "retention": [None, 0, 64][seed % 3], "eagle": True, "prefill_lookahead": 1, "lookahead": 2},
        {"name": f"chunk{seed}", "groups": [{"kind": "full", "bs": 16}, {"kind": "chunked", "bs": 16, "kw": {"attention_chunk_size": 64}}], "num_blocks": 120, "L": 1024, "sbs": 16, "hbs": 16, "inflight": 256, "pc": True, "seed": seed, "steps": 600},
    ]
out = {}
for case in CASES_DEF:
    try:
        out[case["name"]] = run_case(case)
    except Exception as e:  # noqa: BLE001 - the log records vLLM's and the port's exceptions alike
        out[case["name"]] = f"ERROR {type(e).__name__}: {e}"
print(json.dumps(out))
