"""SU: the scheduler's start-up capacity equals what vLLM 0.33.0 computes from its own groups.

``kv_cache_max_concurrency = num_blocks / sum_g blocks_g`` (``get_max_concurrency_for_kv_cache_config``,
``v1/core/kv_cache_utils.py:1061-1093``) with each scheduler group's blocks per request at
``max_model_len`` from :mod:`kvproof.formulas.blocks_per_request` (the simulator's own functions), the null block
included in ``num_blocks``; ``kv_cache_size_tokens = int(concurrency * max_model_len)``
(``get_kv_cache_capacity``, 1120-1128). Unlike seed 001's importer, layouts with sliding-window
groups are checked too (the in-flight tokens term ``max_in_flight_tokens``).
"""

from __future__ import annotations

from fractions import Fraction

from ..formulas import blocks_per_request
from ..formulas.concurrency import kv_cache_size_tokens
from ..logic import And, If, Implies, IntIs, IsNumber, Or, OrDefault, Present, RealOf, SameScalar, ValueOf, is_symbolic
from ..models.codec import ABSENT, present
from .common import scheduler_name, scheduler_worker_pairs, worker_name
from .core import Instance, binding, rule

FULL_FAMILY = ("FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec", "RSWASpec")
WINDOWED = ("SlidingWindowSpec", "SlidingWindowMLASpec")

_SOURCE = "vllm/v1/core/kv_cache_utils.py:1061-1093 (get_max_concurrency_for_kv_cache_config), :1120-1128"


def in_flight_tokens(config):
    """``VllmConfig.max_in_flight_tokens`` as recorded, else derived (config/vllm.py:588-609)."""
    derived = blocks_per_request.max_in_flight_tokens(
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
        return blocks_per_request.full_attention_blocks(length, block, dcp, sharded)
    if spec_type in WINDOWED:
        window = spec.sliding_window if spec is not None else group.sliding_window
        extra = OrDefault(spec.extra_retained_tokens, 0) if spec is not None else 0
        return blocks_per_request.sliding_window_blocks(length, block, ValueOf(window), extra, in_flight_tokens(config))
    if spec_type == "ChunkedLocalAttentionSpec":
        chunk = OrDefault(spec.attention_chunk_size, 0) if spec is not None else 0
        return blocks_per_request.chunked_local_blocks(length, block, chunk, in_flight_tokens(config))
    if spec_type == "MambaSpec":
        align = And(Present(config.mamba_cache_mode), config.mamba_cache_mode == "align")
        k = OrDefault(spec.num_speculative_blocks, 0) if spec is not None else 0
        c = ValueOf(spec.num_prefill_checkpoint_blocks) if spec is not None else 0
        return blocks_per_request.mamba_blocks(align, k, c)
    if spec_type == "CircularBufferSpec":
        return blocks_per_request.circular_buffer_blocks()
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
    for scheduler, worker in scheduler_worker_pairs(bundle):
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


def _explain_one_request(cache, config):
    return {"n": cache.num_blocks, "m": total_blocks(cache, config)}


@rule(
    id="SU005",
    message="{scheduler} has {n} blocks, but one request at max_model_len needs {m} blocks besides the null block",
    over=scheduler_capacity,
    field="num_blocks",
    after=("SC001", "CK001", "CK002", "PC002"),
    explain=_explain_one_request,
    source="vllm/v1/core/kv_cache_planning.py:1533-1558 (check_memory = available - bytes_per_block, "
    "_check_enough_kv_cache_memory), :1253-1285 (_max_memory_usage_bytes_from_groups = bytes_per_block x blocks), "
    ":1510-1531 (num_gpu_blocks_override), :1575-1595 (the minimum over workers)",
)
def pool_holds_one_request(cache, config):
    """vLLM refuses to start unless ``(blocks_per_request + 1) * bytes_per_block`` fits the
    available memory (the null block is held back), so ``num_blocks = available // bytes_per_block``
    (or the override) exceeds the sum of the groups' blocks per request; every worker passed that
    check and the pool is their minimum."""
    return cache.num_blocks > total_blocks(cache, config)


#: ResolvedConfig fields every process of one engine resolves alike: one ``VllmConfig`` is built
#: before the workers are spawned and auto-fit sends ``max_model_len`` to them
#: (v1/engine/core.py:327-332); so are the support table's state settings, which
#: ``VllmConfig.validate_mamba_cached_kernel`` validates once. Not ``block_size``/``mamba_block_size``:
#: a multiprocess executor aligns them in the worker processes only (v1/executor/multiproc_executor.py:802) and the engine
#: writes its group block size back afterwards (core.py:334-352).
SHARED_SETTINGS = (
    "max_model_len", "enable_prefix_caching", "max_num_batched_tokens", "mamba_cache_mode", "prefix_match_unit",
    "max_num_seqs", "async_scheduling", "max_in_flight_tokens", "num_speculative_tokens", "tensor_parallel_size",
    "pipeline_parallel_size", "decode_context_parallel_size", "num_gpu_blocks_override",
    "prefix_cache_retention_interval",
    # the state settings the SS rules read (kvproof/rules/state_support.py): one VllmConfig, so
    # one support-table row per engine
    "vllm_revision", "architecture", "use_replayssm", "mamba_backend", "replayssm_buffer_len", "use_v2_model_runner",
    "speculative_method", "is_kv_transfer_instance", "mamba_stochastic_rounding",
)


@binding("bundle")
def worker_settings(bundle):
    """Each shared setting of each worker record with its scheduler's (same DP rank and phase)."""
    for scheduler, worker in scheduler_worker_pairs(bundle):
        names = {"scheduler": scheduler_name(scheduler.obj), "worker": worker_name(worker.obj)}
        for field in SHARED_SETTINGS:
            yield Instance(f"$.resolved_config.{field}",
                           (getattr(worker.obj.resolved_config, field), getattr(scheduler.obj.resolved_config, field)),
                           {**names, "field": field}, file=worker.file)


@rule(
    id="SU006",
    message="{worker} resolved {field} differently from {scheduler}",
    over=worker_settings,
    source="vllm/v1/executor/multiproc_executor.py:205-219, :828-836 (every worker process gets the engine's one "
    "VllmConfig); vllm/v1/engine/core.py:327-332 (auto-fit max_model_len sent to the workers); "
    "multiproc_executor.py:802 (block sizes aligned in the workers only, so not compared)",
)
def settings_agree(worker_value, scheduler_value):
    """The same JSON value (absent and null differ: the probe writes the same keys everywhere)."""
    return SameScalar(worker_value, scheduler_value)


@binding("scheduler")
def scheduler_settings(record):
    """The scheduler's resolved settings."""
    yield Instance("$.resolved_config", (record.resolved_config,), {"scheduler": scheduler_name(record)})


def _in_flight_options(config, async_scheduling):
    """``max_concurrent_batches * max_num_batched_tokens`` on either model runner."""
    pp = OrDefault(config.pipeline_parallel_size, 1)
    tokens = config.max_num_batched_tokens
    return [blocks_per_request.max_in_flight_tokens(tokens, async_scheduling, pp, v2) for v2 in (False, True)]


def _explain_in_flight(config):
    known = present(config.async_scheduling)
    options = sorted({*_in_flight_options(config, bool(config.async_scheduling))} if known
                     else {*_in_flight_options(config, True), *_in_flight_options(config, False)})
    return {"value": config.max_in_flight_tokens, "allowed": " or ".join(str(o) for o in options)}


@rule(
    id="SU007",
    message="{scheduler} records max_in_flight_tokens {value}, but its batch settings give {allowed}",
    over=scheduler_settings,
    field="max_in_flight_tokens",
    explain=_explain_in_flight,
    source="vllm/config/vllm.py:587-609 (max_concurrent_batches, max_in_flight_tokens), :731-760 (use_v2_model_runner)",
)
def in_flight_tokens_derived(config):
    """A recorded ``max_in_flight_tokens`` is ``max_concurrent_batches x max_num_batched_tokens``:
    ``pp`` without async scheduling; with it ``pp + 1`` on the V2 model runner, 2 on the V1 runner
    at ``pp`` 1 (else ``pp``). The runner is not recorded, so either is accepted; so is either
    scheduling mode when ``async_scheduling`` is not recorded."""
    recorded = config.max_in_flight_tokens
    value = ValueOf(recorded)

    def matches(async_scheduling):
        return Or(*[value == option for option in _in_flight_options(config, async_scheduling)])

    known = Present(config.async_scheduling)
    return Implies(Present(recorded), If(known, matches(OrDefault(config.async_scheduling, False)),
                                         Or(matches(True), matches(False))))
