#!/usr/bin/env python3
"""Conformance oracle for requests over time: vLLM 0.33.0's own KV cache manager and scheduler.

Run it with the interpreter of ``.venv-vllm`` (made by ``scripts/conformance-setup.sh``)::

    .venv-vllm/bin/python tests/conformance/oracle_requests.py GEOMETRY.json      # one geometry or a list
    .venv-vllm/bin/python tests/conformance/oracle_requests.py --jsonl -          # one per line, streamed
    .venv-vllm/bin/python tests/conformance/oracle_requests.py --write-expected tests/conformance/requests/*.json

For a geometry with a ``simulate`` block (``docs/requests.md``, the contract) it prints one JSON object
with ``status``, ``simulation``, ``prefix_hit_probe`` and ``workload``:

* the start-up plan is ``oracle.py``'s (imported, not copied): vLLM's planning functions in the order of
  ``EngineCore._initialize_kv_caches``; a refusal there is printed as ``oracle.py`` prints it
  (``status: refused``) and nothing runs;
* ``simulation`` / ``prefix_hit_probe``: one request (a real ``vllm.v1.request.Request`` with the
  engine's block hasher) driven through the ``KVCacheManager`` of a real ``Scheduler`` (so the manager is
  built by ``Scheduler.__init__`` itself, ``v1/core/sched/scheduler.py:351-369``), calling
  ``get_computed_blocks`` / ``allocate_slots`` / ``cache_blocks`` / ``free`` with the arguments
  ``Scheduler.schedule`` and ``update_from_output`` pass for a lone request under synchronous scheduling;
* ``workload``: the ``requests[]`` through a second, fresh ``Scheduler`` (``schedule()`` /
  ``update_from_output()`` each step, a fake ``ModelRunnerOutput`` sampling the contract's token ids).

The stand-ins beyond ``oracle.py``'s are listed in ``docs/conformance.md`` ("Requests over time").
The script imports only the standard library, torch, vLLM and ``oracle.py``; stdout carries JSON only.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import sys
import time
import traceback
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import oracle  # noqa: E402  (sets up the process: CPU platform, logging to stderr, V2 runner)
from oracle import BadInput  # noqa: E402

with contextlib.redirect_stdout(sys.stderr):
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager

ORACLE_REQUESTS_VERSION = 1
SIMULATE_KEYS = {"prompt_tokens", "decode_tokens", "chunk_tokens", "prefix_hit_probe", "requests", "max_steps"}
REQUEST_KEYS = {"id", "arrival_step", "prompt_tokens", "decode_tokens", "shared_prefix", "shared_prefix_tokens"}
DEFAULT_MAX_STEPS = 100_000

# Token ids (docs/requests.md "Token ids").
SHARED_BASE = 10_000_000
OUTPUT_BASE = 1_000_000_000


def shared_token(k: int, i: int) -> int:
    return SHARED_BASE * (k + 1) + i


def own_token(r: int, i: int) -> int:
    return SHARED_BASE * (1_000 + r) + i


def output_token(r: int, j: int) -> int:
    return OUTPUT_BASE + 1_000_000 * r + j


# ---------------------------------------------------------------------------------------------------
# The simulate block
# ---------------------------------------------------------------------------------------------------

def parse_simulate(doc: Any) -> dict:
    if not isinstance(doc, dict):
        raise BadInput("expected an object", "$")
    sim = doc.get("simulate")
    if sim is None:
        raise BadInput("this oracle answers geometries with a simulate block", "$.simulate")
    sim = oracle._check_keys(sim, SIMULATE_KEYS, "$.simulate")
    out: dict[str, Any] = {"single": None, "requests": None,
                           "chunk_tokens": oracle._int(sim.get("chunk_tokens"), "$.simulate.chunk_tokens",
                                                       minimum=1, optional=True),
                           "max_steps": oracle._int(sim.get("max_steps", DEFAULT_MAX_STEPS),
                                                    "$.simulate.max_steps", minimum=1)}
    if "prompt_tokens" in sim:
        out["single"] = {
            "prompt_tokens": oracle._int(sim["prompt_tokens"], "$.simulate.prompt_tokens", minimum=1),
            "decode_tokens": oracle._int(sim.get("decode_tokens", 0), "$.simulate.decode_tokens", minimum=0),
            "prefix_hit_probe": oracle._bool(sim.get("prefix_hit_probe", False), "$.simulate.prefix_hit_probe"),
        }
    else:
        for key in ("decode_tokens", "prefix_hit_probe"):
            if key in sim:
                raise BadInput(f"{key} needs prompt_tokens", f"$.simulate.{key}")
    reqs = sim.get("requests")
    if reqs is not None:
        if not isinstance(reqs, list):
            raise BadInput("expected a list of requests", "$.simulate.requests")
        parsed, seen, prefix_order = [], set(), {}
        for r, req in enumerate(reqs):
            path = f"$.simulate.requests[{r}]"
            req = oracle._check_keys(req, REQUEST_KEYS, path)
            rid = oracle._str(req.get("id"), f"{path}.id")
            if rid in seen:
                raise BadInput(f"request id {rid!r} appears twice", f"{path}.id")
            seen.add(rid)
            prompt = oracle._int(req.get("prompt_tokens"), f"{path}.prompt_tokens", minimum=1)
            prefix = oracle._str(req.get("shared_prefix"), f"{path}.shared_prefix", optional=True)
            prefix_tokens = oracle._int(req.get("shared_prefix_tokens", 0), f"{path}.shared_prefix_tokens",
                                        minimum=0)
            if prefix_tokens > prompt:
                raise BadInput("shared_prefix_tokens must be <= prompt_tokens", f"{path}.shared_prefix_tokens")
            if prefix is None:
                prefix_tokens = 0
            elif prefix not in prefix_order:
                prefix_order[prefix] = len(prefix_order)
            parsed.append({
                "id": rid, "index": r,
                "arrival_step": oracle._int(req.get("arrival_step", 0), f"{path}.arrival_step", minimum=0),
                "prompt_tokens": prompt,
                "decode_tokens": oracle._int(req.get("decode_tokens"), f"{path}.decode_tokens", minimum=1),
                "prefix_k": prefix_order[prefix] if prefix is not None else None,
                "prefix_tokens": prefix_tokens,
            })
        out["requests"] = parsed
    return out


def prompt_ids(r: int, prompt_tokens: int, prefix_k: int | None = None, prefix_tokens: int = 0) -> list[int]:
    return [shared_token(prefix_k, i) if prefix_k is not None and i < prefix_tokens else own_token(r, i)
            for i in range(prompt_tokens)]


# ---------------------------------------------------------------------------------------------------
# The plan (oracle.py) and the objects it leaves behind
# ---------------------------------------------------------------------------------------------------

_CAPTURED: dict[str, Any] = {}
_real_build_vllm_config = oracle.build_vllm_config


def _capturing_build_vllm_config(g: dict):
    vllm_config = _real_build_vllm_config(g)
    _CAPTURED["vllm_config"] = vllm_config
    return vllm_config


class _CapturingKVCacheManager(oracle.KVCacheManager):
    """The manager ``oracle.plan`` builds at the ``kv_cache_manager`` stage; only its arguments are
    kept (the scheduler config, block sizes). Observation only: construction is unchanged."""

    def __init__(self, **kwargs):
        _CAPTURED["kv_cache_manager_kwargs"] = kwargs
        super().__init__(**kwargs)


# Observation hooks in oracle.py's namespace (oracle.py itself is not edited).
oracle.build_vllm_config = _capturing_build_vllm_config
oracle.KVCacheManager = _CapturingKVCacheManager


class OracleBug(Exception):
    pass


class ServingError(Exception):
    """vLLM raised while serving (after a successful start-up)."""

    def __init__(self, exc: BaseException, stage: str):
        super().__init__(str(exc))
        self.exc = exc
        self.stage = stage


@contextlib.contextmanager
def serving_stage(name: str):
    try:
        yield
    except (BadInput, OracleBug, ServingError):
        raise
    except Exception as exc:  # noqa: BLE001
        frames = traceback.extract_tb(exc.__traceback__)
        innermost = frames[-1].filename if frames else ""
        if oracle.VLLM_SOURCE_MARKER in innermost and not isinstance(exc, AttributeError):
            raise ServingError(exc, name) from exc
        raise OracleBug(f"{name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}") from exc


def _complete_stand_ins(vllm_config) -> None:
    """What ``Scheduler.__init__`` / ``schedule`` read beyond the planning code (docs/conformance.md,
    "Requests over time", stand-ins R1-R2): a text-only generative decoder model."""
    mc = vllm_config.model_config
    mc.uses_mrope = False                   # scheduler.py:102 (no M-RoPE positions)
    mc.is_encoder_decoder = False           # scheduler.py:117
    mc.is_diffusion = False                 # scheduler.py:158 (runner_type is "generate")
    mc.supports_multimodal_inputs = False   # scheduler.py:266 (no encoder budget)
    mc.return_sampling_mask = False         # scheduler.py:487
    mc.skip_tokenizer_init = True           # StructuredOutputManager: no tokenizer (no grammar requests)
    spec = vllm_config.speculative_config
    if spec is not None:
        # SpeculativeConfig fields the scheduler reads (a stand-in made with __new__, oracle.py stand-in 4):
        # their dataclass defaults.
        for key, value in (("num_speculative_tokens_per_batch_size", None),):
            if not hasattr(spec, key):
                object.__setattr__(spec, key, value)


def build_scheduler(vllm_config, kwargs: dict, chunk_tokens: int | None, max_num_seqs_given: bool,
                    scheduled_tokens: int | None = None) -> Scheduler:
    """``Scheduler(...)`` as ``EngineCore.__init__`` builds it (v1/engine/core.py:166-188)."""
    sc = vllm_config.scheduler_config
    # The workload's long-prefill threshold (docs/requests.md "Workload"); 0 = vLLM's default.
    sc.long_prefill_token_threshold = chunk_tokens or 0
    # The single request's token budget (docs/requests.md "Single request"): SchedulerConfig's
    # max_num_scheduled_tokens (config/scheduler.py:55-60; None = max_num_batched_tokens), read once
    # by Scheduler.__init__ (scheduler.py:139-143). The plan (and its KV cache manager) is not changed.
    sc.max_num_scheduled_tokens = None if scheduled_tokens is None else min(scheduled_tokens, sc.max_num_batched_tokens)
    if not max_num_seqs_given:
        # EngineArgs' default: 256 (LLM_CLASS, engine/arg_utils.py:3002-3005) capped at the token budget
        # (arg_utils.py:3232-3234). oracle.py's 256 (stand-in 2) only sizes the views' buffers.
        sc.max_num_seqs = min(256, sc.max_num_batched_tokens)
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kwargs["kv_cache_config"],
        structured_output_manager=StructuredOutputManager(vllm_config),
        include_finished_set=False,
        log_stats=False,
        block_size=kwargs["scheduler_block_size"],
        hash_block_size=kwargs["hash_block_size"],
    )


def threshold_refusal(vllm_config, chunk_tokens: int | None, max_model_len_before_fit: int) -> dict | None:
    """vLLM's start-up check of the workload's long-prefill threshold: ``SchedulerConfig.__post_init__``
    runs ``verify_max_model_len`` once, when ``EngineArgs.create_engine_config`` builds the config with the
    model's length before any auto-fit (engine/arg_utils.py:2658-2683, config/scheduler.py:315, 355-360);
    the auto-fit comes later (v1/core/kv_cache_planning.py:1545-1548) and nothing checks again. The
    Scheduler built directly here skips ``__post_init__``, so vLLM's own method is run on a copy of the
    config as it stood then: chunked prefill still on (the non-causal switch, core.py:266-280, comes
    later), so of its checks only the threshold's can fire (the budget checks ran in oracle.plan when
    the geometry states max_num_seqs; without it max_num_seqs <= max_num_batched_tokens, build_scheduler).
    The ``ValueError`` it raises, as {"type", "message"}, or None."""
    if not chunk_tokens:
        return None
    sc = copy.copy(vllm_config.scheduler_config)
    sc.enable_chunked_prefill = True
    sc.long_prefill_token_threshold = chunk_tokens
    if sc.max_num_seqs is None or sc.max_num_seqs > sc.max_num_batched_tokens:
        sc.max_num_seqs = min(256, sc.max_num_batched_tokens)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            sc.verify_max_model_len(max_model_len_before_fit)
    except ValueError as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def make_block_hasher(vllm_config, hash_block_size: int):
    """The engine's request block hasher (v1/engine/core.py:219-231)."""
    cc = vllm_config.cache_config
    if not cc.enable_prefix_caching:
        return None
    fn = get_hash_fn_by_name(cc.prefix_caching_hash_algo)
    init_none_hash(fn)
    return get_request_block_hasher(hash_block_size, fn, vllm_config.num_hash_lookahead_tokens)


def prompt_rejection(vllm_config, prompt_len: int) -> str | None:
    """vLLM's input processor check of a decoder prompt (``InputProcessor._validate_prompt_len``,
    ``v1/engine/input_processor.py:557-599``), called unbound on the smallest stand-in of the processor
    (a text-only generative model): the message of the ``VLLMValidationError`` it raises, or None."""
    processor = types.SimpleNamespace(skip_prompt_length_check=False, model_config=vllm_config.model_config,
                                      mm_encoder_cache_size=0, supports_mm_inputs=False)
    try:
        InputProcessor._validate_prompt_len(processor, prompt_len, "decoder")
    except VLLMValidationError as exc:
        return str(exc)
    return None


def make_request(request_id: str, tokens: list[int], max_tokens: int, hasher, arrival_time: float) -> Request:
    return Request(
        request_id=request_id,
        prompt_token_ids=list(tokens),
        sampling_params=SamplingParams(max_tokens=max_tokens),
        pooling_params=None,
        arrival_time=arrival_time,
        block_hasher=hasher,
    )


# ---------------------------------------------------------------------------------------------------
# One request through the manager (docs/requests.md "Single request")
# ---------------------------------------------------------------------------------------------------

def _held(manager, request_id: str) -> tuple[list[int], list[int]]:
    held, rows = [], []
    for stm in sorted(manager.coordinator.single_type_managers, key=lambda m: m.kv_cache_group_id):
        blocks = stm.req_to_blocks.get(request_id, [])
        held.append(sum(1 for b in blocks if not b.is_null))
        rows.append(len(blocks))
    return held, rows


def run_single(sched: Scheduler, single: dict, hasher, max_steps: int) -> tuple[list, dict | None, bool]:
    """Drive one request through vLLM's real ``Scheduler`` (``schedule`` / ``update_from_output``,
    synchronous scheduling, no drafts proposed), alone: the scheduler decides each step's tokens
    (its token budget is ``min(chunk_tokens, max_num_batched_tokens)`` through
    ``SchedulerConfig.max_num_scheduled_tokens``, set by :func:`build_scheduler`; the Mamba
    block-aligned split, the MTP prefill lookahead and the max_model_len cap are its own). Each
    step is read after ``schedule()`` (the step's allocation). Returns (steps, probe, stalled, truncated)."""
    manager = sched.kv_cache_manager
    prompt = single["prompt_tokens"]
    decode = single["decode_tokens"]
    tokens = prompt_ids(0, prompt)
    request = make_request("simulate-0", tokens, max(decode, 1), hasher, arrival_time=0.0)
    sched.add_request(request)
    steps: list[dict] = []
    stalled = truncated = False
    step = 0
    while not request.is_finished():
        if step >= max_steps:
            truncated = True
            break
        out = sched.schedule()
        num_new = out.num_scheduled_tokens.get(request.request_id, 0)
        if num_new == 0:
            # A lone request that does not fit: vLLM would wait (or preempt it) forever.
            stalled = True
            break
        computed = request.num_computed_tokens - num_new  # _update_after_schedule already counted them
        held, rows = _held(manager, request.request_id)
        steps.append({
            "step": step,
            "phase": "prefill" if computed < request.num_prompt_tokens else "decode",
            "num_computed_tokens": computed,
            "num_new_tokens": num_new,
            "blocks_held": held,
            "row_length": rows,
            "free_blocks": manager.block_pool.get_num_free_blocks(),
        })
        complete = request.num_computed_tokens >= request.num_tokens
        sampled = [[output_token(0, request.num_output_tokens)]] if complete and decode > 0 else [[]]
        mro = ModelRunnerOutput(req_ids=[request.request_id], req_id_to_index={request.request_id: 0},
                                sampled_token_ids=sampled)
        sched.update_from_output(out, mro)
        step += 1
        if complete and decode == 0:  # prefill only: nothing is sampled, the request ends here
            sched.finish_requests(request.request_id, RequestStatus.FINISHED_ABORTED)
    probe = None
    if single["prefix_hit_probe"] and not stalled and not truncated:
        probe_req = make_request("simulate-probe", tokens, max(decode, 1), hasher, arrival_time=1.0)
        manager.new_step_starts()
        blocks, hit, _ = manager.get_computed_blocks(probe_req)
        probe = {
            "phase": "prefix_hit_probe",
            "prompt_tokens": prompt,
            "hit_tokens": hit,
            "hit_blocks": [sum(1 for b in group if not b.is_null) for group in blocks.blocks],
        }
        steps.append(dict(probe))
    return steps, probe, stalled, truncated


# ---------------------------------------------------------------------------------------------------
# The workload through the scheduler (docs/requests.md "Workload")
# ---------------------------------------------------------------------------------------------------

def run_workload(sched: Scheduler, reqs: list[dict], max_steps: int, hasher, vllm_config) -> dict:
    by_step: dict[int, list[dict]] = {}
    info = {r["id"]: {"first_scheduled_step": None, "finished_step": None, "num_preemptions": 0,
                      "prefix_hit_tokens": None} for r in reqs}
    for r in reqs:
        # The input processor refuses a prompt before it reaches the scheduler (docs/requests.md).
        rejection = prompt_rejection(vllm_config, r["prompt_tokens"])
        if rejection is not None:
            info[r["id"]]["rejected"] = rejection
            continue
        by_step.setdefault(r["arrival_step"], []).append(r)
    index = {r["id"]: r["index"] for r in reqs}
    objects: dict[str, Request] = {}
    preempted_log: list[str] = []
    real_preempt = sched._preempt_request

    def logging_preempt(request, *args, **kwargs):  # observation only
        preempted_log.append(request.request_id)
        return real_preempt(request, *args, **kwargs)

    sched._preempt_request = logging_preempt
    last_arrival = max(by_step) if by_step else -1
    steps: list[dict] = []
    totals = {"steps": 0, "request_steps": 0, "preemptions": 0, "finished": 0}
    truncated = False
    step = 0
    while True:
        if step >= last_arrival + 1 and all(v["finished_step"] is not None or v.get("rejected") for v in info.values()):
            break
        if step >= max_steps:
            truncated = True
            break
        for r in by_step.get(step, []):
            tokens = prompt_ids(r["index"], r["prompt_tokens"], r["prefix_k"], r["prefix_tokens"])
            req = make_request(r["id"], tokens, r["decode_tokens"], hasher,
                               arrival_time=float(step) + r["index"] * 1e-6)
            objects[r["id"]] = req
            sched.add_request(req)
        waiting_before = {rid for rid, req in objects.items()
                          if req.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)}
        preempted_log.clear()
        out = sched.schedule()
        scheduled = dict(out.num_scheduled_tokens)
        admitted = {}
        for rid, n in scheduled.items():
            if rid in waiting_before:
                hit = objects[rid].num_computed_tokens - n
                admitted[rid] = hit
                if info[rid]["prefix_hit_tokens"] is None:
                    info[rid]["prefix_hit_tokens"] = hit
            if info[rid]["first_scheduled_step"] is None:
                info[rid]["first_scheduled_step"] = step
        running = [r.request_id for r in sched.running]
        waiting = [r.request_id for r in sched.kv_holding_waiting] + [r.request_id for r in sched.waiting]
        preempted = list(preempted_log)
        for rid in preempted:
            info[rid]["num_preemptions"] += 1
        # The model: one sampled token for every request whose prefill is complete after the step.
        req_ids = list(scheduled)
        sampled = []
        for rid in req_ids:
            req = objects[rid]
            if req.num_computed_tokens >= req.num_tokens:
                sampled.append([output_token(index[rid], req.num_output_tokens)])
            else:
                sampled.append([])
        mro = ModelRunnerOutput(req_ids=req_ids, req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
                                sampled_token_ids=sampled)
        sched.update_from_output(out, mro)
        finished = [rid for rid in req_ids if objects[rid].is_finished()
                    and info[rid]["finished_step"] is None]
        for rid in finished:
            info[rid]["finished_step"] = step
        steps.append({
            "step": step,
            "scheduled": scheduled,
            "preempted": preempted,
            "finished": finished,
            "admitted": admitted,
            "running": running,
            "waiting": waiting,
            "free_blocks": sched.kv_cache_manager.block_pool.get_num_free_blocks(),
        })
        totals["steps"] += 1
        totals["request_steps"] += len(scheduled)
        totals["preemptions"] += len(preempted)
        totals["finished"] += len(finished)
        step += 1
    return {"steps": steps, "requests": info, "totals": totals, "truncated": truncated}


# ---------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------

def run_geometry(doc: Any) -> dict:
    name = doc.get("name") if isinstance(doc, dict) else None
    head: dict[str, Any] = {"name": name} if name is not None else {}
    try:
        sim = parse_simulate(doc)
    except BadInput as exc:
        return {**head, "status": "bad_input", "error": {"message": str(exc), "type": "BadInput"}}
    _CAPTURED.clear()
    plan = oracle.run_geometry(doc)
    if plan.get("status") != "ok":
        return {**head, **plan, "simulation": None, "prefix_hit_probe": None, "workload": None}
    try:
        with contextlib.redirect_stdout(sys.stderr):
            vllm_config = _CAPTURED["vllm_config"]
            kwargs = _CAPTURED.get("kv_cache_manager_kwargs")
            if kwargs is None:
                raise OracleBug("the plan has no KV cache groups: no manager to drive")
            _complete_stand_ins(vllm_config)
            hasher = make_block_hasher(vllm_config, kwargs["hash_block_size"])
            out: dict[str, Any] = {**head, "status": "ok",
                                   "plan": {key: plan[key] for key in (
                                       "num_blocks", "scheduler_block_size", "hash_block_size",
                                       "enable_prefix_caching", "mamba_cache_mode", "max_in_flight_tokens")},
                                   "simulation": None, "prefix_hit_probe": None, "workload": None}
            out["plan"]["groups"] = [f"{g['spec']}/{g['block_size']}" for g in plan["groups"]]
            if sim["single"] is not None:
                with serving_stage("simulation_init"):
                    sched = build_scheduler(vllm_config, kwargs, None, doc.get("max_num_seqs") is not None,
                                            scheduled_tokens=sim["chunk_tokens"])
                rejection = prompt_rejection(vllm_config, sim["single"]["prompt_tokens"])
                if rejection is not None:  # the input processor refuses it: nothing is scheduled
                    out["simulation_rejected"] = rejection
                else:
                    with serving_stage("simulation"):
                        steps, probe, stalled, truncated = run_single(sched, sim["single"], hasher, sim["max_steps"])
                    out["simulation"] = steps
                    out["prefix_hit_probe"] = probe
                    if stalled:
                        out["simulation_stalled"] = True
                    if truncated:
                        out["simulation_truncated"] = True
            if sim["requests"] is not None:
                refusal = threshold_refusal(vllm_config, sim["chunk_tokens"], doc["max_model_len"])
                if refusal is not None:  # SchedulerConfig refuses to start: nothing is served
                    out["workload"] = {"refused": refusal}
                    return out
                with serving_stage("workload_init"):
                    sched = build_scheduler(vllm_config, kwargs, sim["chunk_tokens"], doc.get("max_num_seqs") is not None)
                with serving_stage("workload"), _block_pool_timed(out):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    out["workload"] = run_workload(sched, sim["requests"], sim["max_steps"], hasher, vllm_config)
                    if os.environ.get("KVPROOF_ORACLE_ELAPSED"):  # bench/bench_requests.py: scheduling time only
                        out["workload_elapsed_s"] = time.perf_counter() - started
                        out["workload_cpu_s"] = time.process_time() - started_cpu
            return out
    except ServingError as exc:
        return {**head, "status": "oracle_error",
                "error": {"message": str(exc.exc), "type": type(exc.exc).__name__, "stage": exc.stage,
                          "raised_in_vllm": True,
                          "traceback": "".join(traceback.format_exception(exc.exc))[-4000:]}}
    except OracleBug as exc:
        return {**head, "status": "oracle_error", "error": {"message": str(exc), "type": "OracleBug"}}
    except BadInput as exc:
        return {**head, "status": "bad_input", "error": {"message": str(exc), "type": "BadInput"}}


#: The ``BlockPool`` methods through which every block is handed out, cached, found and freed.
BLOCK_POOL_CALLS = ("get_new_blocks", "cache_full_blocks", "get_cached_block", "touch", "free_blocks")


@contextlib.contextmanager
def _block_pool_timed(out: dict):
    """With ``KVPROOF_ORACLE_BLOCK_POOL`` set (``bench/bench_requests.py --parts``): vLLM's own
    ``BlockPool`` calls timed by wrappers, ``out["block_pool_s"]`` = {method: [seconds, calls]}."""
    if not os.environ.get("KVPROOF_ORACLE_BLOCK_POOL"):
        yield
        return
    from vllm.v1.core.block_pool import BlockPool

    totals: dict[str, list] = {}
    saved = {name: getattr(BlockPool, name) for name in BLOCK_POOL_CALLS}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                entry = totals.setdefault(name, [0.0, 0])
                entry[0] += time.perf_counter() - started
                entry[1] += 1
        return wrapper

    for name, fn in saved.items():
        setattr(BlockPool, name, timed(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(BlockPool, name, fn)
        out["block_pool_s"] = totals


def _read_documents(path: str) -> tuple[list, bool]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return (doc, True) if isinstance(doc, list) else ([doc], False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("geometry", nargs="?", help="a JSON file (one geometry or a list)")
    parser.add_argument("--jsonl", action="store_true",
                        help="read one geometry per line from stdin, answer one line each (flushed)")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print (file mode)")
    parser.add_argument("--write-expected", nargs="+", metavar="GEOMETRY",
                        help="write each geometry's answer to <stem>.expected.json beside it")
    parser.add_argument("--timings", action="store_true", help="log seconds per geometry to stderr")
    args = parser.parse_args(argv)
    out = oracle._REAL_STDOUT

    def answer(doc: Any) -> dict:
        t0 = time.monotonic()
        result = run_geometry(doc)
        if args.timings:
            print(f"oracle_requests: {result.get('name', '?')}: {result['status']} in "
                  f"{time.monotonic() - t0:.2f} s", file=sys.stderr)
        return result

    if args.write_expected:
        for path in args.write_expected:
            if path.endswith(".expected.json"):
                continue
            docs, is_list = _read_documents(path)
            t0 = time.monotonic()
            results = [answer(d) for d in docs]
            target = re.sub(r"\.json$", "", path) + ".expected.json"
            with open(target, "w", encoding="utf-8") as fh:
                json.dump(results if is_list else results[0], fh, indent=1)
                fh.write("\n")
            out.write(f"{target}: {', '.join(r['status'] for r in results)} "
                      f"({time.monotonic() - t0:.2f} s)\n")
            out.flush()
        return 0
    if args.jsonl or args.geometry in (None, "-"):
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                result = {"status": "bad_input", "error": {"message": f"invalid JSON: {exc}", "type": "BadInput"}}
            else:
                result = answer(doc)
            out.write(json.dumps(result) + "\n")
            out.flush()
        return 0
    docs, is_list = _read_documents(args.geometry)
    results = [answer(d) for d in docs]
    out.write(json.dumps(results if is_list else results[0], indent=args.indent) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
