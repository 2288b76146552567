"""RS: a record set is complete and agrees with itself (seed 001, "Collection and onboarding").

A *record set* is what one probe phase writes: one scheduler record per DP rank and one worker
record per (DP, TP, PP) rank, every one from the same vLLM, the same model configuration and the
same resolved settings. ``check`` judges the records of a directory as a record set when the
directory holds two records or more (one record alone is judged as a document); ``kvproof
import`` judges every phase it reads as one (:attr:`kvproof.rules.check.Bundle.whole`).

The rules of one record's own settings that seed 001 left open sit here too: the resolved
``kv_cache_layout`` is one of vLLM's names, a hybrid worker in align mode resolved the Mamba
block to the attention block, and a ``raw_cache_config`` agrees with the resolved settings.
"""

from __future__ import annotations

import attrs

from ..logic import And, HasKey, If, Implies, IntIs, Not, Or, OrDefault, Present, SameScalar, Sum
from ..models.codec import ABSENT
from ..models.record import ResolvedConfig
from .common import is_mamba_group, pool_block_bytes, scheduler_name, worker_name
from .core import Instance, binding, rule

#: ``pool_block_bytes`` (rules/common.py) is named here too: kvproof.importer and kvproof.fuzz read it from this module.
__all__ = ["records_of", "is_record_set", "pool_block_bytes", "KV_CACHE_LAYOUTS"]

#: ``KVCacheLayout`` member names (vllm/v1/kv_cache_layout.py:15-28).
KV_CACHE_LAYOUTS = ("LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC")

_SET = "seed 001 (Collection and onboarding: every rank of every phase); vllm/v1/executor/multiproc_executor.py:205-219"


def records_of(bundle) -> list:
    """The checked worker and scheduler records of a bundle, in bundle order."""
    return [d for d in bundle.documents if d.kind in ("worker", "scheduler") and d.role != "probe"]


def is_record_set(bundle) -> bool:
    """The bundle is judged as a record set: an import's phase, or a directory of two records or more."""
    return bool(getattr(bundle, "whole", False)) or len(records_of(bundle)) >= 2


def _name(document) -> str:
    return worker_name(document.obj) if document.kind == "worker" else scheduler_name(document.obj)


def _same_phase(a, b):
    return SameScalar(OrDefault(a.phase, None), OrDefault(b.phase, None))


@binding("bundle")
def workers_with_schedulers(bundle):
    """Each worker record of a record set with every scheduler record of the set."""
    if not is_record_set(bundle):
        return
    schedulers = tuple(d.obj for d in bundle.of_kind("scheduler"))
    for worker in bundle.of_kind("worker"):
        yield Instance("$", (worker.obj, schedulers), {"worker": worker_name(worker.obj)}, blame="$.dp_rank", file=worker.file)


@rule(
    id="RS001",
    message="{worker} has no scheduler record of its DP rank and phase in the record set",
    over=workers_with_schedulers,
    source=_SET + " (one EngineCore, so one scheduler, per DP rank)",
)
def worker_has_scheduler(worker, schedulers):
    """Every worker belongs to the engine of its DP rank, whose scheduler writes one record."""
    return Or(*[And(s.dp_rank == worker.dp_rank, _same_phase(s, worker)) for s in schedulers])


def _file_name(document) -> str:
    from pathlib import Path

    return Path(document.file).name if document.file else "another record"


def _pairs(documents):
    for i, first in enumerate(documents):
        for second in documents[i + 1:]:
            yield first, second


@binding("bundle")
def scheduler_pairs(bundle):
    """Every two scheduler records of a record set."""
    if not is_record_set(bundle):
        return
    for first, second in _pairs(bundle.of_kind("scheduler")):
        yield Instance("$", (first.obj, second.obj), {"record": scheduler_name(second.obj), "other": _file_name(first)},
                       blame="$.dp_rank", file=second.file)


@rule(
    id="RS002",
    message="{record} appears twice in the record set (also {other})",
    over=scheduler_pairs,
    source=_SET,
)
def schedulers_distinct(first, second):
    """One scheduler record per DP rank and phase."""
    return Not(And(first.dp_rank == second.dp_rank, _same_phase(first, second)))


@binding("bundle")
def set_workers(bundle):
    """Every worker record of a record set."""
    if not is_record_set(bundle):
        return
    for worker in bundle.of_kind("worker"):
        yield Instance("$", (worker.obj,), {"worker": worker_name(worker.obj)}, blame="$.tp_rank", file=worker.file)


def _or1(value):
    return value if value not in (ABSENT, None) else 1


def _explain_sizes(worker):
    # in the message only (on failure, concretely): a binding that read the sizes would pin them
    # for the solver, and a record set of one worker could then never be at TP 1
    config = worker.resolved_config
    return {"tp": _or1(config.tensor_parallel_size), "pp": _or1(config.pipeline_parallel_size)}


@rule(
    id="RS003",
    message="{worker} lies outside tensor_parallel_size {tp} x pipeline_parallel_size {pp}",
    over=set_workers,
    explain=_explain_sizes,
    source=_SET + "; vllm/config/parallel.py (tensor_parallel_size, pipeline_parallel_size)",
)
def worker_rank_in_range(worker):
    """A worker's TP rank is below ``tensor_parallel_size`` and its PP rank below
    ``pipeline_parallel_size`` (absent sizes are 1)."""
    config = worker.resolved_config
    return And(worker.tp_rank < OrDefault(config.tensor_parallel_size, 1),
               worker.pp_rank < OrDefault(config.pipeline_parallel_size, 1))


@binding("bundle")
def worker_pairs(bundle):
    """Every two worker records of a record set."""
    if not is_record_set(bundle):
        return
    for first, second in _pairs(bundle.of_kind("worker")):
        yield Instance("$", (first.obj, second.obj), {"record": worker_name(second.obj), "other": _file_name(first)},
                       blame="$.tp_rank", file=second.file)


@rule(
    id="RS004",
    message="{record} appears twice in the record set (also {other})",
    over=worker_pairs,
    source=_SET,
)
def workers_distinct(first, second):
    """One worker record per DP, TP and PP rank of a phase."""
    return Not(And(first.dp_rank == second.dp_rank, first.tp_rank == second.tp_rank,
                   first.pp_rank == second.pp_rank, _same_phase(first, second)))


@binding("bundle")
def schedulers_with_workers(bundle):
    """Each scheduler record of a record set with every worker record of the set."""
    if not is_record_set(bundle):
        return
    workers = tuple(d.obj for d in bundle.of_kind("worker"))
    for scheduler in bundle.of_kind("scheduler"):
        yield Instance("$", (scheduler.obj, workers), {"scheduler": scheduler_name(scheduler.obj)},
                       blame="$.resolved_config.tensor_parallel_size", file=scheduler.file)


def _own_workers(scheduler, workers):
    return Sum(*[If(And(w.dp_rank == scheduler.dp_rank, _same_phase(w, scheduler)), 1, 0) for w in workers])


def _explain_count(scheduler, workers):
    config = scheduler.resolved_config
    count = sum(1 for w in workers if w.dp_rank == scheduler.dp_rank and w.phase == scheduler.phase)
    return {"n": count, "m": _or1(config.tensor_parallel_size) * _or1(config.pipeline_parallel_size)}


@rule(
    id="RS005",
    message="{scheduler} has {n} worker records, but tensor_parallel_size x pipeline_parallel_size is {m}",
    over=schedulers_with_workers,
    after=("RS001", "RS003", "RS004"),
    explain=_explain_count,
    source=_SET + " (world size = tp x pp workers per engine)",
)
def every_rank_once(scheduler, workers):
    """With every worker in range (RS003) and no rank twice (RS004), ``tp x pp`` workers of the
    scheduler's DP rank and phase means every TP rank of every PP stage exactly once."""
    config = scheduler.resolved_config
    return _own_workers(scheduler, workers) == OrDefault(config.tensor_parallel_size, 1) * OrDefault(config.pipeline_parallel_size, 1)


#: Every ResolvedConfig field: every worker process of one engine resolves the same settings,
#: block sizes included (each worker runs the same platform alignment, multiproc_executor.py:802).
RESOLVED_FIELDS = tuple(field.name for field in attrs.fields(ResolvedConfig))


@binding("bundle")
def worker_settings_pairs(bundle):
    """Each resolved setting of each worker with the first worker of the same phase."""
    if not is_record_set(bundle):
        return
    first: dict = {}
    for worker in bundle.of_kind("worker"):
        phase = worker.obj.phase if worker.obj.phase not in (ABSENT, None) else None
        reference = first.setdefault(phase, worker)
        if reference is worker:
            continue
        for field in RESOLVED_FIELDS:
            yield Instance(f"$.resolved_config.{field}",
                           (getattr(worker.obj.resolved_config, field), getattr(reference.obj.resolved_config, field)),
                           {"worker": worker_name(worker.obj), "field": field, "first": worker_name(reference.obj)},
                           file=worker.file)


@rule(
    id="RS006",
    message="{worker} resolved {field} differently from {first}",
    over=worker_settings_pairs,
    source="vllm/v1/executor/multiproc_executor.py:205-219, :828-836 (one VllmConfig for every worker), :802 "
    "(each worker aligns its block sizes alike)",
)
def worker_settings_agree(value, first_value):
    """The same JSON value on every rank (absent and null differ)."""
    return SameScalar(value, first_value)


def _record_field_pairs(bundle, read, path):
    if not is_record_set(bundle):
        return
    records = records_of(bundle)
    for document in records[1:]:
        yield Instance(path, (read(document.obj), read(records[0].obj)),
                       {"record": _name(document), "first": _name(records[0]),
                        "value": _shown(read(document.obj)), "other": _shown(read(records[0].obj))},
                       file=document.file)


def _shown(value) -> str:
    if value is ABSENT:
        return "nothing"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else str(value)


@binding("bundle")
def record_versions(bundle):
    """Each record's vLLM version with the first record's."""
    yield from _record_field_pairs(bundle, lambda record: record.runtime.version, "$.runtime.version")


@rule(
    id="RS007",
    message="{record} names vLLM {value}, but {first} names {other}",
    over=record_versions,
    source="seed 001 (one runtime per probe; hybrid evidence only from exactly 0.33.0)",
)
def one_version(value, first_value):
    """One installed vLLM writes every record of a probe."""
    return SameScalar(value, first_value)


@binding("bundle")
def record_models(bundle):
    """Each record's model with the first record's."""
    yield from _record_field_pairs(bundle, lambda record: record.model, "$.model")


@rule(
    id="RS008",
    message="{record} names model {value}, but {first} names {other}",
    over=record_models,
    source="seed 001 (one model per probe configuration)",
)
def one_model(value, first_value):
    """Every record names the same served model (or none does)."""
    return SameScalar(value, first_value)


@binding("bundle")
def record_config_hashes(bundle):
    """Each record's model configuration hash with the first record's."""
    yield from _record_field_pairs(bundle, lambda record: record.model_config_sha256, "$.model_config_sha256")


@rule(
    id="RS009",
    message="{record} names model configuration {value}, but {first} names {other}",
    over=record_config_hashes,
    source="seed 001 (every record resolves one model_config_sha256)",
)
def one_model_configuration(value, first_value):
    """Every record resolves the same model configuration hash (or none does)."""
    return SameScalar(value, first_value)


@binding("bundle")
def worker_pool_blocks(bundle):
    """Each worker's pool block with the first worker's, where a profile is made or judged (an
    import, or a directory with a profile): vLLM itself lets pipeline stages differ."""
    if not is_record_set(bundle) or not (getattr(bundle, "whole", False) or bundle.of_kind("profile")):
        return
    workers = bundle.of_kind("worker")
    for worker in workers[1:]:
        yield Instance("$.cache.storages", (worker.obj.cache, workers[0].obj.cache),
                       {"worker": worker_name(worker.obj), "first": worker_name(workers[0].obj)}, file=worker.file)


def _explain_pool(cache, first):
    def block(c):
        return sum(s.size_bytes for s in c.storages) // c.num_blocks if c.num_blocks else 0

    return {"a": block(cache), "b": block(first)}


@rule(
    id="RS010",
    message="{worker} has a pool block of {a} bytes, but {first} has {b}: a profile holds one page per group",
    over=worker_pool_blocks,
    explain=_explain_pool,
    source="seed 001 / reference notes M2 (the FPM profile holds one page_size_bytes per group: the pool block)",
)
def one_pool_block(cache, first):
    """``allocated_cache_bytes // num_blocks`` is the same on every worker of every phase."""
    return pool_block_bytes(cache) == pool_block_bytes(first)


@binding("worker")
def worker_layout(record):
    """A worker record's resolved cache layout."""
    layout = record.cache.kv_cache_layout
    yield Instance("$.cache.kv_cache_layout", (layout,), {"layout": _shown(layout)})


@rule(
    id="RS011",
    message="kv_cache_layout {layout} is not a KVCacheLayout of vLLM 0.33.0",
    over=worker_layout,
    source="vllm/v1/kv_cache_layout.py:15-28 (KVCacheLayout: LBHNC LBNHC LHBNC BLHNC BLNHC BHLNC)",
)
def layout_known(layout):
    """An absent layout is allowed (plain records); a present one is a member name."""
    return Implies(Present(layout), Or(*[layout == name for name in KV_CACHE_LAYOUTS]))


@binding("worker")
def hybrid_worker(record):
    """A worker record with Mamba groups next to attention groups (a hybrid model)."""
    groups = record.cache.groups
    if not groups:
        return
    config = record.resolved_config
    yield Instance("$.resolved_config.mamba_block_size", (record,),
                   {"worker": worker_name(record), "value": _shown(config.mamba_block_size), "block": config.block_size})


@rule(
    id="RS012",
    message="{worker} resolved mamba_block_size {value} in align mode, but block_size {block}",
    over=hybrid_worker,
    after=("PC002",),
    source="vllm/platforms/interface.py:1106-1115 (HybridAttentionMambaModelConfig: in align mode "
    "mamba_block_size = block_size, in each worker process, multiproc_executor.py:802)",
)
def hybrid_align_mamba_block(record):
    """A worker of a hybrid model (a Mamba group and a group that is not one) in align mode
    aligned the Mamba block to the attention block; the scheduler process does not (seed 001:
    16 there), so only the workers are judged."""
    config = record.resolved_config
    groups = record.cache.groups
    hybrid = And(Or(*[is_mamba_group(g) for g in groups]), Or(*[Not(is_mamba_group(g)) for g in groups]))
    align = SameScalar(OrDefault(config.mamba_cache_mode, None), "align")
    return Implies(And(hybrid, align), IntIs(config.mamba_block_size, lambda n: n == config.block_size))


#: raw_cache_config fields with a resolved_config twin.
RAW_FIELDS = ("block_size", "enable_prefix_caching", "mamba_cache_mode", "mamba_block_size",
              "num_gpu_blocks_override", "prefix_match_unit")


@binding("worker", "scheduler")
def raw_settings(record):
    """Each raw_cache_config field that has a resolved twin, when the record carries it."""
    raw = record.raw_cache_config
    if raw in (ABSENT, None):
        return
    name = worker_name(record) if record.kind == "worker" else scheduler_name(record)
    for field in RAW_FIELDS:
        value = getattr(raw, field)
        resolved = getattr(record.resolved_config, field)
        yield Instance(f"$.raw_cache_config.{field}", (value, resolved),
                       {"record": name, "field": field, "raw": _shown(value), "resolved": _shown(resolved)})


@rule(
    id="RS013",
    message="{record} raw_cache_config {field} {raw} contradicts the resolved {resolved}",
    over=raw_settings,
    source="vllm/config/cache.py (CacheConfig: the object resolved_config is read from)",
)
def raw_settings_agree(raw, resolved):
    """``raw_cache_config`` is the process's ``cache_config`` itself: where it states a field
    that resolved_config also records, the two are the same JSON value."""
    return Implies(HasKey(raw), SameScalar(raw, OrDefault(resolved, None)))
