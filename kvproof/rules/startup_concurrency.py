"""SU: the scheduler's start-up capacity equals what vLLM 0.33.0 computes from its own groups.

``kv_cache_max_concurrency = num_blocks / sum_g blocks_g`` (``get_max_concurrency_for_kv_cache_config``,
``v1/core/kv_cache_utils.py:1061-1093``) with each scheduler group's blocks per request at
``max_model_len`` from :mod:`kvproof.sim.demand` (the simulator's own functions), the null block
included in ``num_blocks``; ``kv_cache_size_tokens = int(concurrency * max_model_len)``
(``get_kv_cache_capacity``, 1120-1128). Unlike seed 001's importer, layouts with sliding-window
groups are checked too (the in-flight tokens term ``max_in_flight_tokens``).
"""

from __future__ import annotations

from fractions import Fraction

from ..logic import And, IntIs, IsNumber, OrDefault, Present, RealOf, ValueOf, is_symbolic
from ..models.codec import ABSENT
from ..sim import demand
from ..sim.concurrency import kv_cache_size_tokens
from .core import Instance, binding, rule

FULL_FAMILY = ("FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec", "RSWASpec")
WINDOWED = ("SlidingWindowSpec", "SlidingWindowMLASpec")

_SOURCE = "vllm/v1/core/kv_cache_utils.py:1061-1093 (get_max_concurrency_for_kv_cache_config), :1120-1128"


def scheduler_name(record) -> str:
    phase = record.phase if record.phase not in (ABSENT, None) else None
    return f"{phase + ' ' if phase else ''}scheduler dp{record.dp_rank}"


def worker_name(record) -> str:
    phase = record.phase if record.phase not in (ABSENT, None) else None
    return f"{phase + ' ' if phase else ''}worker dp{record.dp_rank} tp{record.tp_rank} pp{record.pp_rank}"


def in_flight_tokens(config):
    """``VllmConfig.max_in_flight_tokens`` as recorded, else derived (config/vllm.py:588-609)."""
    derived = demand.max_in_flight_tokens(
        config.max_num_batched_tokens, OrDefault(config.async_scheduling, False), OrDefault(config.pipeline_parallel_size, 1)
    )
    return OrDefault(config.max_in_flight_tokens, derived)


def group_blocks(group, config):
    """Blocks one request at ``max_model_len`` needs in a scheduler group (B.5)."""
    spec = group.spec if group.spec not in (ABSENT, None) else None
    spec_type = spec.spec_type if spec is not None else group.spec_type
    block = spec.block_size if spec is not None else group.block_size_tokens
    length = config.max_model_len
    dcp = OrDefault(config.decode_context_parallel_size, 1)
    if spec_type in FULL_FAMILY:
        sharded = OrDefault(spec.dcp_sharded, True) if spec is not None else True
        return demand.full_attention_blocks(length, block, dcp, sharded)
    if spec_type in WINDOWED:
        window = spec.sliding_window if spec is not None else group.sliding_window
        extra = OrDefault(spec.extra_retained_tokens, 0) if spec is not None else 0
        return demand.sliding_window_blocks(length, block, ValueOf(window), extra, in_flight_tokens(config))
    if spec_type == "ChunkedLocalAttentionSpec":
        chunk = OrDefault(spec.attention_chunk_size, 0) if spec is not None else 0
        return demand.chunked_local_blocks(length, block, chunk, in_flight_tokens(config))
    if spec_type == "MambaSpec":
        align = And(Present(config.mamba_cache_mode), config.mamba_cache_mode == "align")
        k = OrDefault(spec.num_speculative_blocks, 0) if spec is not None else 0
        c = ValueOf(spec.num_prefill_checkpoint_blocks) if spec is not None else 0
        return demand.mamba_blocks(align, k, c)
    if spec_type == "CircularBufferSpec":
        return demand.circular_buffer_blocks()
    return 0


@binding("scheduler")
def scheduler_capacity(record):
    """The scheduler's pool, groups and settings."""
    yield Instance("$.cache", (record.cache, record.resolved_config), {"scheduler": scheduler_name(record)})


@rule(
    id="SU001",
    message="{scheduler} lacks a positive kv_cache_max_concurrency",
    over=scheduler_capacity,
    field="kv_cache_max_concurrency",
    source=_SOURCE,
)
def concurrency_positive(cache, config):
    """Missing, null, zero, negative, a bool or non-finite: vLLM always logs a positive number."""
    value = cache.kv_cache_max_concurrency
    return And(IsNumber(value), RealOf(value) > 0)


def total_blocks(cache, config):
    return sum_terms([group_blocks(group, config) for group in cache.groups])


def sum_terms(terms):
    out = 0
    for term in terms:
        out = out + term
    return out


def _explain_concurrency(cache, config):
    value = cache.kv_cache_max_concurrency
    reserved = total_blocks(cache, config)
    gives = cache.num_blocks / value if isinstance(value, (int, float)) and value else float("inf")
    return {"value": repr(value), "n": f"{gives:.12g}", "m": reserved}


@rule(
    id="SU002",
    message="{scheduler} records kv_cache_max_concurrency {value}, which gives {n} blocks per request, "
    "but its cache groups reserve {m}",
    over=scheduler_capacity,
    field="kv_cache_max_concurrency",
    after=("SU001", "SC001", "CK001", "CK002", "PC002"),
    explain=_explain_concurrency,
    source=_SOURCE + "; vllm/v1/kv_cache_interface.py (per-spec max_memory_usage_bytes)",
)
def concurrency_matches_groups(cache, config):
    """``concurrency * sum_g blocks_g == num_blocks`` within the rounding of one float division
    (relative 2**-52), computed exactly (a Fraction here, a z3 Real in the solver)."""
    reserved = total_blocks(cache, config)
    error = RealOf(cache.kv_cache_max_concurrency) * reserved - cache.num_blocks
    tolerance = cache.num_blocks * Fraction(1, 2**52) if not is_symbolic(cache.num_blocks) else cache.num_blocks * (2.0 ** -52)
    return And(reserved > 0, error <= tolerance, -error <= tolerance)


def _explain_tokens(cache, config):
    value = cache.kv_cache_max_concurrency
    expected = kv_cache_size_tokens(value, config.max_model_len) if isinstance(value, (int, float)) else "undefined"
    return {"value": repr(cache.kv_cache_size_tokens), "m": expected}


@rule(
    id="SU003",
    message="{scheduler} records kv_cache_size_tokens {value}, but int(kv_cache_max_concurrency * max_model_len) is {m}",
    over=scheduler_capacity,
    field="kv_cache_size_tokens",
    after=("SU001",),
    explain=_explain_tokens,
    source="vllm/v1/core/kv_cache_utils.py:1120-1128 (get_kv_cache_capacity)",
)
def size_tokens_match_concurrency(cache, config):
    """vLLM's own float product, truncated."""
    value = cache.kv_cache_max_concurrency
    if hasattr(value, "real_value"):  # symbolic
        concurrency = value.real_value
    else:  # a body must be total: SU001 refuses a missing or non-numeric concurrency
        concurrency = value if type(value) in (int, float) else 0.0
    return And(IsNumber(value),
               IntIs(cache.kv_cache_size_tokens, lambda n: n == kv_cache_size_tokens(concurrency, config.max_model_len)))


@binding("bundle")
def scheduler_workers(bundle):
    """Each scheduler record with each worker record of its DP rank and phase."""
    for scheduler in bundle.of_kind("scheduler"):
        for worker in bundle.of_kind("worker"):
            if worker.obj.dp_rank == scheduler.obj.dp_rank and worker.obj.phase == scheduler.obj.phase:
                yield Instance("$.cache.num_blocks", (scheduler.obj.cache.num_blocks, worker.obj.cache.num_blocks),
                               {"scheduler": scheduler_name(scheduler.obj), "worker": worker_name(worker.obj)},
                               file=scheduler.file)


@rule(
    id="SU004",
    message="{scheduler} and {worker} disagree on num_blocks",
    over=scheduler_workers,
    source="vllm/v1/core/kv_cache_planning.py:1583-1595 (every worker re-planned with the minimum num_blocks), "
    "vllm/v1/core/kv_cache_utils.py:1096-1117",
)
def pool_blocks_agree(scheduler_blocks, worker_blocks):
    """The scheduler's config is worker 0's, and all workers share the minimum."""
    return scheduler_blocks == worker_blocks

