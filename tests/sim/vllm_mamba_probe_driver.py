"""An implementation-neutral driver for one Mamba KV cache group (tests of kvproof/sim/requests/mamba_manager.py).

The same code drives vLLM 0.33.0's own ``BlockPool`` + ``MambaManager`` (``vllm_mamba_probe.py``, run
with ``.venv-vllm/bin/python``) and kvproof's port (``test_mamba_manager.py``); both runs produce a JSON
trace, and the test compares kvproof's trace with the stored vLLM trace key by key.

It calls the manager exactly as vLLM 0.33.0's ``KVCacheManager`` / coordinator do for one group
(paths relative to the ``vllm/`` package):

* ``Scheduler.schedule`` calls ``kv_cache_manager.new_step_starts()`` first (``v1/core/sched/scheduler.py:746``);
* a waiting request first asks ``get_computed_blocks`` (``v1/core/kv_cache_manager.py:266-318``):
  ``find_longest_cache_hit(block_hashes, max_length=num_tokens - 1, [group], pool, spec,
  drop_eagle, alignment)`` (Unitary coordinator ``kv_cache_coordinator.py:583-600`` passes
  ``alignment = block_size``; the hybrid one passes its ``cache_hit_alignment_tokens``);
* ``allocate_slots`` (``kv_cache_manager.py:380-627``): the admission gate
  ``get_num_blocks_to_allocate(..., apply_admission_cap=True)`` for a waiting request
  (``scheduler_reserve_full_isl``, default True; ``scheduler.py:1449``), then
  ``remove_skipped_blocks(max(0, total_computed - num_in_flight))`` (synchronous: 0 in flight),
  ``get_num_blocks_to_allocate`` (coordinator 237-238: ``prefill_end = 0`` unless the retention
  interval is 0), ``add_local_computed_blocks`` for a new request with a hit (coordinator 287-310),
  ``allocate_new_blocks``, ``cache_blocks(min(total_computed + new, num_tokens))`` with the coordinator's
  ``get_num_cacheable_tokens`` (Unitary: unchanged; hybrid: rounded down to ``scheduler_block_size``
  unless partial hash hits are on, 777-804) and ``replay_boundaries`` (65-86);
* ``free`` when the request finishes;
* in align mode the chunk is cut by the scheduler's ``_mamba_block_aligned_split``
  (``v1/core/sched/scheduler.py:546-661``, ported below as ``aligned_split``), as ``Scheduler.schedule``
  does before ``allocate_slots`` (861, 1351): without it vLLM never reaches the numbers of ex.05.

Token ids follow docs/requests.md; block hashes are a sha256 chain over ``hash_block_size`` blocks of
the request's tokens (any collision-free chain serves: both implementations see the same bytes).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def chain_hashes(token_ids: list[int], hash_block_size: int) -> list[bytes]:
    out: list[bytes] = []
    parent = b""
    for start in range(0, len(token_ids) - hash_block_size + 1, hash_block_size):
        h = hashlib.sha256(parent + b"|" + array("q", token_ids[start:start + hash_block_size]).tobytes())
        parent = h.digest()
        out.append(parent)
    return out


class FakeRequest:
    """The attributes of ``vllm.v1.request.Request`` that a single-type manager and the block pool read."""

    def __init__(self, request_id: str, prompt_token_ids: list[int], hash_block_size: int):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.output_token_ids: list[int] = []
        self.hash_block_size = hash_block_size
        self.num_computed_tokens = 0
        self.num_in_flight_tokens = 0
        self.shared_prefix_boundary = 0
        self.mm_features: list = []
        self.lora_request = None
        self.session_id = None
        self.block_hashes: list[bytes] = chain_hashes(self.all_token_ids, hash_block_size)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def append_output_token(self, token_id: int) -> None:
        self.output_token_ids.append(token_id)
        # vLLM's block hasher extends block_hashes as full hash blocks appear.
        self.block_hashes = chain_hashes(self.all_token_ids, self.hash_block_size)


@dataclass
class Impl:
    """Factories of one implementation."""

    make_pool: Callable[..., Any]  # (num_gpu_blocks, enable_caching, hash_block_size) -> BlockPool
    make_spec: Callable[..., Any]  # (**mamba fields) -> MambaSpec
    manager_cls: Any


@dataclass
class Req:
    prompt: int
    decode: int = 0  # output tokens sampled (vLLM's max_tokens); 0 = prefill only
    chunk: int = 1 << 30  # long_prefill_token_threshold
    shared: int = 0  # leading prompt tokens shared with every other request (one prefix name)
    arrival: int = 0  # step before whose schedule() the request is added


@dataclass
class Scenario:
    name: str
    block_size: int
    mamba_cache_mode: str
    num_gpu_blocks: int = 64
    enable_caching: bool = True
    hash_block_size: int | None = None  # default: block_size
    scheduler_block_size: int | None = None  # default: block_size
    alignment_tokens: int | None = None  # manager.cache_hit_alignment_tokens; default scheduler_block_size
    hybrid: bool = False  # hybrid coordinator: alignment/cacheable rounding as HybridKVCacheCoordinator
    partial_hits: bool = False  # hybrid with fine-grained partial hash hits
    num_speculative_blocks: int = 0
    num_lookahead_tokens: int = 0
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None
    use_eagle: bool = False
    retention_interval: int | None = 0  # CacheConfig default 0 (config/cache.py:275)
    max_model_len: int = 1 << 20
    max_num_scheduled_tokens: int = 8192
    requests: dict = field(default_factory=dict)  # rid -> Req
    probes: tuple = ()  # rids whose prompt is probed after the run


def prompt_ids(rank: int, prompt_len: int, shared_len: int = 0) -> list[int]:
    shared = [10_000_000 * 1 + i for i in range(shared_len)]
    own = [10_000_000 * (1_000 + rank) + i for i in range(shared_len, prompt_len)]
    return shared + own


def _row(blocks) -> list[int]:
    return [0 if b.is_null else b.block_id for b in blocks]


def snapshot(mgr, pool, rids) -> dict:
    out: dict[str, Any] = {"free": pool.get_num_free_blocks(), "rows": {}, "cached_tokens": {}}
    for rid in rids:
        blocks = mgr.req_to_blocks.get(rid)
        if blocks is None:
            continue
        out["rows"][rid] = _row(blocks)
        out["cached_tokens"][rid] = [None if b.is_null else b.block_hash_num_tokens for b in blocks]
    if mgr.mamba_cache_mode == "align":
        out["last_state_block_idx"] = {r: mgr.last_state_block_idx[r] for r in sorted(mgr.last_state_block_idx)}
        out["retired"] = {r: mgr._num_retired_blocks[r] for r in sorted(mgr._num_retired_blocks)}
        out["checkpoints"] = {r: list(mgr._checkpoints[r]) for r in sorted(mgr._checkpoints)}
        out["allocated"] = sorted(mgr._allocated_block_reqs)
        out["pending_cow"] = [[s.block_id, d.block_id] for s, d in mgr._pending_cow_copies]
    out["partial_hit_reqs"] = {r: [i, b.block_id] for r, (i, b) in sorted(mgr._partial_hit_reqs.items())}
    out["num_cached_block"] = {r: mgr.num_cached_block[r] for r in sorted(mgr.num_cached_block)}
    out["cached_this_step"] = len(mgr.cached_blocks_this_step)
    return out


def replay_boundaries(num_prompt_tokens: int, scheduler_block_size: int, use_eagle: bool) -> tuple[int, ...]:
    """``replay_boundaries`` (``v1/core/kv_cache_coordinator.py:65-86``)."""
    if not use_eagle:
        return (num_prompt_tokens - 1,)
    block = scheduler_block_size
    resend = (num_prompt_tokens - 1) // block * block
    extension = num_prompt_tokens // block * block
    return tuple(sorted({max(resend - block, 0), max(extension - block, 0)}))


def checkpoint_position(num_tokens: int, hash_block_size: int, drop_eagle_block: bool, la: int = 0) -> int:
    """``get_mamba_prefill_checkpoint_position`` (``v1/kv_cache_interface.py:1169-1186``)."""
    limit = num_tokens if drop_eagle_block else num_tokens - max(1, la)
    pos = limit // hash_block_size * hash_block_size
    if drop_eagle_block:
        pos -= hash_block_size
    return max(pos, 0)


def checkpoint_valid(qs: int, qe: int, pos: int, hbs: int, mbs: int, align: int | None) -> bool:
    """``is_mamba_prefill_checkpoint_valid`` (``v1/kv_cache_interface.py:1189-1210``)."""
    if align is None:
        return False
    return (qs % hbs == 0 and cdiv(qe, mbs) - 2 > (qs - 1) // mbs and qs + hbs <= pos
            and qs < pos < qe and (pos - qs) % align == 0)


def aligned_split(sc: Scenario, req, num_new: int, num_new_local_computed: int, chunk: int) -> int:
    """``Scheduler._mamba_block_aligned_split`` (``v1/core/sched/scheduler.py:546-661``), align mode
    only (``need_mamba_block_aligned_split``, 432-434), no connector, no shared-prefix junction.
    ``cache_config.block_size`` is the Mamba block here (the min over prefix-cacheable groups)."""
    hbs = sc.hash_block_size or sc.block_size
    bs = sc.block_size
    start = req.num_computed_tokens + num_new_local_computed
    prefill_end = max(req.num_prompt_tokens, req.num_tokens - 1)
    if start >= prefill_end:
        return num_new
    partial = hbs < bs and sc.partial_hits  # mamba_partial_cache_hit (448-452)
    ckpt_bs = hbs if partial else bs
    last_cache_position = checkpoint_position(req.num_tokens, bs, sc.use_eagle)
    end = start + num_new
    pos = checkpoint_position(prefill_end, ckpt_bs, sc.use_eagle)
    use_internal = (sc.num_prefill_checkpoint_blocks > 0 and end >= prefill_end
                    and checkpoint_valid(start, end, pos, hbs, bs, sc.prefill_checkpoint_alignment))
    if use_internal:
        last_cache_position = 0
    if end < prefill_end:
        max_prefill = min(sc.max_num_scheduled_tokens, chunk)
        aligned_end = end // bs * bs
        if aligned_end > start or bs <= max_prefill:
            end = aligned_end
    next_block_boundary = (start // bs + 1) * bs
    tail_boundary = checkpoint_position(req.num_prompt_tokens, hbs, sc.use_eagle) if partial and not use_internal else 0
    stops = (
        next_block_boundary if start % bs != 0 and not use_internal else 0,
        last_cache_position,
        tail_boundary if last_cache_position < tail_boundary < req.num_prompt_tokens else 0,
    )
    end = min((s for s in stops if start < s < end), default=end)
    return max(end - start, 0)


def run(sc: Scenario, impl: Impl) -> list[dict]:
    hbs = sc.hash_block_size or sc.block_size
    sbs = sc.scheduler_block_size or sc.block_size
    pool = impl.make_pool(sc.num_gpu_blocks, sc.enable_caching, hbs)
    spec = impl.make_spec(
        block_size=sc.block_size, mamba_cache_mode=sc.mamba_cache_mode,
        num_speculative_blocks=sc.num_speculative_blocks,
        num_prefill_checkpoint_blocks=sc.num_prefill_checkpoint_blocks,
        prefill_checkpoint_alignment=sc.prefill_checkpoint_alignment,
    )
    mgr = impl.manager_cls(spec, block_pool=pool, enable_caching=sc.enable_caching, kv_cache_group_id=0,
                           scheduler_block_size=sbs)
    if sc.hybrid:
        # HybridKVCacheCoordinator.__init__ (kv_cache_coordinator.py:694-705)
        mgr.cache_hit_alignment_tokens = sc.alignment_tokens or sbs
    if sc.use_eagle:
        mgr.drop_eagle_checkpoint_block = True  # coordinator 177-181
        mgr.use_eagle = True
    lookup_alignment = mgr.cache_hit_alignment_tokens if sc.hybrid else mgr.block_size

    reqs: dict[str, FakeRequest] = {}
    for rank, (rid, r) in enumerate(sc.requests.items()):
        reqs[rid] = FakeRequest(rid, prompt_ids(rank, r.prompt, r.shared), hbs)
    ranks = {rid: i for i, rid in enumerate(reqs)}
    started: set[str] = set()
    finished: set[str] = set()
    trace: list[dict] = []

    def cacheable(n: int) -> int:
        if sc.hybrid and not sc.partial_hits:
            return n // sbs * sbs
        return n

    step_no = 0
    stop = False
    while len(finished) < len(reqs) and not stop:
        assert step_no < 10_000, sc.name
        mgr.new_step_starts()
        done_this_step: list[str] = []
        for rid, req in reqs.items():
            r = sc.requests[rid]
            if rid in finished or r.arrival > step_no:
                continue
            waiting = rid not in started
            ev: dict[str, Any] = {"step": step_no, "rid": rid}
            new_computed: list = []
            num_new_computed = 0
            if waiting and sc.enable_caching:
                hit_blocks, hit_len = impl.manager_cls.find_longest_cache_hit(
                    block_hashes=req.block_hashes, max_length=req.num_tokens - 1, kv_cache_group_ids=[0],
                    block_pool=pool, kv_cache_spec=spec, drop_eagle_block=False,
                    alignment_tokens=lookup_alignment)
                new_computed = list(hit_blocks[0])
                num_new_computed = hit_len
                ev["hit"] = [hit_len, _row(new_computed)]
            num_new = min(req.num_tokens - req.num_computed_tokens - num_new_computed, r.chunk,
                          sc.max_num_scheduled_tokens)
            if sc.mamba_cache_mode == "align":
                num_new = aligned_split(sc, req, num_new, num_new_computed, r.chunk)
            ev["num_new"] = num_new
            num_local = req.num_computed_tokens + num_new_computed
            total = min(num_local, sc.max_model_len)
            prefill_end = max(req.num_prompt_tokens, req.num_tokens - 1)
            if sc.retention_interval != 0:
                prefill_end = 0  # coordinator 237-238
            if waiting:
                full = min(req.num_tokens, sc.max_model_len)
                ev["admission"] = mgr.get_num_blocks_to_allocate(
                    rid, full, new_computed, total, num_local, full, apply_admission_cap=True,
                    prefill_end=prefill_end)
            main = total + num_new
            need = min(main + sc.num_lookahead_tokens, sc.max_model_len)
            mgr.remove_skipped_blocks(rid, max(0, total - req.num_in_flight_tokens), req.num_prompt_tokens)
            ev["after_remove"] = snapshot(mgr, pool, [rid])
            n = mgr.get_num_blocks_to_allocate(rid, need, new_computed, total, num_local, main,
                                               prefill_end=prefill_end)
            ev["to_allocate"] = n
            if n > pool.get_num_free_blocks() or (waiting and ev["admission"] > pool.get_num_free_blocks()):
                ev["refused"] = True
                trace.append(ev)
                if not waiting:
                    # A running request would be preempted (out of scope here): the run stops.
                    stop = True
                    break
                continue
            started.add(rid)
            if waiting and new_computed and rid not in mgr.num_cached_block:
                mgr.add_local_computed_blocks(rid, new_computed, num_local, 0)
            new_blocks = mgr.allocate_new_blocks(rid, need, main)
            ev["new_blocks"] = _row(new_blocks)
            if sc.enable_caching:
                mgr.cache_blocks(req, cacheable(min(total + num_new, req.num_tokens)),
                                 retention_interval=sc.retention_interval,
                                 replay_boundaries=replay_boundaries(req.num_prompt_tokens, sbs, sc.use_eagle))
            # update_from_output: the tokens are computed; a complete prefill samples a token.
            req.num_computed_tokens = total + num_new
            if req.num_computed_tokens >= req.num_tokens:
                if len(req.output_token_ids) < r.decode:
                    req.append_output_token(1_000_000_000 + 1_000_000 * ranks[rid] + len(req.output_token_ids))
                if len(req.output_token_ids) >= r.decode:
                    done_this_step.append(rid)
            ev["state"] = snapshot(mgr, pool, [rid])
            ev["held"] = sum(1 for b in mgr.req_to_blocks[rid] if not b.is_null)
            ev["row_length"] = len(mgr.req_to_blocks[rid])
            trace.append(ev)
        if stop:
            break
        for rid in done_this_step:
            mgr.free(rid)
            finished.add(rid)
            trace.append({"step": step_no, "free": rid, "state": snapshot(mgr, pool, [])})
        step_no += 1
    for rid in sc.probes:
        probe = FakeRequest(rid + "-probe", reqs[rid].prompt_token_ids, hbs)
        hit_blocks, hit_len = impl.manager_cls.find_longest_cache_hit(
            block_hashes=probe.block_hashes, max_length=probe.num_tokens - 1, kv_cache_group_ids=[0],
            block_pool=pool, kv_cache_spec=spec, drop_eagle_block=False, alignment_tokens=lookup_alignment)
        trace.append({"probe": rid, "hit_tokens": hit_len, "hit_row": _row(hit_blocks[0])})
    return trace


def scenarios() -> list[Scenario]:
    """The cases run through both implementations."""
    s: list[Scenario] = []
    # none mode (prefix caching off): 1 + k blocks for the whole request, block = max_model_len.
    for k in (0, 2):
        s.append(Scenario(f"none_k{k}", block_size=256, mamba_cache_mode="none", enable_caching=False,
                          num_speculative_blocks=k, num_lookahead_tokens=k, max_model_len=256,
                          requests={"a": Req(100, 6, 40)}))
    # none mode with c = 1 (every Mamba2 layer): c is ignored in none mode.
    s.append(Scenario("none_c1", block_size=256, mamba_cache_mode="none", enable_caching=False,
                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1, max_model_len=256,
                      requests={"a": Req(100, 3, 40)}))
    # align mode, one group (Unitary coordinator: hash = block = alignment).
    for c in (0, 1):
        for retention in (0, None):
            s.append(Scenario(f"align_c{c}_ret{retention}", block_size=16, mamba_cache_mode="align",
                              num_prefill_checkpoint_blocks=c, prefill_checkpoint_alignment=1 if c else None,
                              retention_interval=retention, requests={"a": Req(100, 20, 40)}, probes=("a",)))
    # align with speculative blocks and lookahead tokens.
    for k in (1, 2):
        s.append(Scenario(f"align_k{k}_c1", block_size=16, mamba_cache_mode="align", num_speculative_blocks=k,
                          num_lookahead_tokens=k, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                          requests={"a": Req(100, 40, 40)}, probes=("a",)))
    # EAGLE: the checkpoint drops one hash unit; replay boundaries with the eagle block.
    s.append(Scenario("align_eagle_k1", block_size=16, mamba_cache_mode="align", num_speculative_blocks=1,
                      num_lookahead_tokens=1, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                      use_eagle=True, requests={"a": Req(100, 10, 40)}, probes=("a",)))
    # Checkpoint alignment 16 with a chunk that ends off the grid.
    s.append(Scenario("align_c1_alignment16_chunk20", block_size=16, mamba_cache_mode="align",
                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16,
                      requests={"a": Req(100, 5, 20)}, probes=("a",)))
    # Chunks shorter than a block (sub-block advance, then re-alignment).
    s.append(Scenario("align_chunk_below_block", block_size=16, mamba_cache_mode="align",
                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                      requests={"a": Req(70, 3, 12)}, probes=("a",)))
    # ex.05 shape (bamba-like-align, worked example 3): block 528, c = 1, alignment 1, hybrid without
    # partial hits (hash = scheduler = alignment = 528), prompt 3000, chunk threshold 2048, 50 decode
    # tokens, probe.
    s.append(Scenario("ex05_bamba_align", block_size=528, mamba_cache_mode="align", num_gpu_blocks=200,
                      hybrid=True, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                      max_model_len=32768, requests={"a": Req(3000, 50, 2048)}, probes=("a",)))
    # ex.06 shape (glm-like-packed): KDA groups of block 640, c = 1, FlashKDA alignment 16, hash =
    # scheduler = alignment = 640 (MLA 640 + ring 4 beside them).
    s.append(Scenario("ex06_glm_like", block_size=640, mamba_cache_mode="align", num_gpu_blocks=200,
                      hybrid=True, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16,
                      max_model_len=131072, requests={"a": Req(3000, 50, 2048)}, probes=("a",)))
    # ex.04 shape (bamba-like-none): prefix caching off, Mamba block = max_model_len 32768, hybrid
    # scheduler block lcm(32768, 528).
    s.append(Scenario("ex04_bamba_none", block_size=32768, mamba_cache_mode="none", enable_caching=False,
                      num_gpu_blocks=200, hybrid=True, scheduler_block_size=1081344, hash_block_size=1081344,
                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1, max_model_len=32768,
                      requests={"a": Req(3000, 50, 2048)}))
    # ex.05 + prefix_match_unit 16: hash 16, scheduler 528, partial hits on (alignment 16).
    s.append(Scenario("ex05_pmu16_partial_hits", block_size=528, mamba_cache_mode="align", num_gpu_blocks=200,
                      hash_block_size=16, scheduler_block_size=528, alignment_tokens=16, hybrid=True,
                      partial_hits=True, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                      max_model_len=32768, requests={"a": Req(3000, 5, 2048)}, probes=("a",)))
    # Fine-grained hits, small: block 16, hash 4; later requests with a shared prefix hit (partial
    # tails, CoW).
    for c in (0, 1):
        s.append(Scenario(f"fine_grained_shared_prefix_c{c}", block_size=16, mamba_cache_mode="align",
                          hash_block_size=4, scheduler_block_size=16, alignment_tokens=4, hybrid=True,
                          partial_hits=True, num_prefill_checkpoint_blocks=c,
                          prefill_checkpoint_alignment=1 if c else None,
                          requests={"a": Req(50, 3, 64, shared=50), "b": Req(70, 3, 64, shared=50, arrival=2),
                                    "c": Req(60, 2, 64, shared=50, arrival=3),
                                    "d": Req(46, 2, 64, shared=46, arrival=4),
                                    "e": Req(50, 2, 64, shared=50, arrival=9)},
                          probes=("a", "b", "d")))
    # The same with the scheduler's chunk threshold below the block: sub-block chunks.
    s.append(Scenario("fine_grained_small_chunks", block_size=16, mamba_cache_mode="align",
                      hash_block_size=4, scheduler_block_size=16, alignment_tokens=4, hybrid=True,
                      partial_hits=True, num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=4,
                      num_speculative_blocks=1, num_lookahead_tokens=1,
                      requests={"a": Req(45, 3, 8, shared=45), "b": Req(61, 4, 8, shared=45, arrival=6)},
                      probes=("a", "b")))
    # Fine-grained with dense retention: every chunk reserves a checkpoint; transient (mid-block)
    # checkpoints are evicted again.
    for retention in (None, 32):
        s.append(Scenario(f"fine_grained_retention{retention}", block_size=16, mamba_cache_mode="align",
                          hash_block_size=4, scheduler_block_size=16, alignment_tokens=4, hybrid=True,
                          partial_hits=True, retention_interval=retention, num_prefill_checkpoint_blocks=1,
                          prefill_checkpoint_alignment=4, num_speculative_blocks=1, num_lookahead_tokens=1,
                          requests={"a": Req(101, 3, 40, shared=101), "b": Req(101, 2, 40, shared=101, arrival=8)},
                          probes=("a",)))
    # Periodic retention (interval 32 = 2 blocks) and a resend of the same prompt.
    s.append(Scenario("align_retention32", block_size=16, mamba_cache_mode="align", retention_interval=32,
                      num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1,
                      requests={"a": Req(100, 3, 40, shared=100), "b": Req(100, 3, 40, shared=100, arrival=8)},
                      probes=("a",)))
    # Retention interval of one block: every block is a segment boundary (dense).
    s.append(Scenario("align_retention16", block_size=16, mamba_cache_mode="align", retention_interval=16,
                      requests={"a": Req(100, 2, 40, shared=100)}, probes=("a",)))
    # Hybrid whose scheduler block (32) is twice the Mamba block, no partial hits: hits only at
    # 32-token boundaries (a cached state ending at 16 mod 32 is skipped).
    s.append(Scenario("hybrid_alignment32_bs16", block_size=16, mamba_cache_mode="align", scheduler_block_size=32,
                      hybrid=True, retention_interval=None,
                      requests={"a": Req(100, 2, 24, shared=90), "b": Req(120, 2, 40, shared=90, arrival=9)},
                      probes=("a", "b")))
    # Same-step dependency: "b" hits a block "a" cached in this very step -> num_gpu_blocks + 1.
    for retention in (0, None):
        s.append(Scenario(f"same_step_retry_ret{retention}", block_size=16, mamba_cache_mode="align",
                          retention_interval=retention,
                          requests={"a": Req(64, 2, 40, shared=64), "b": Req(80, 2, 80, shared=64, arrival=1)},
                          probes=("b",)))
    # A small pool: the allocation is refused when the free blocks run out.
    s.append(Scenario("align_small_pool", block_size=16, mamba_cache_mode="align", num_gpu_blocks=4,
                      num_speculative_blocks=1, num_lookahead_tokens=1, num_prefill_checkpoint_blocks=1,
                      prefill_checkpoint_alignment=1, requests={"a": Req(100, 3, 40)}, probes=("a",)))
    return s
