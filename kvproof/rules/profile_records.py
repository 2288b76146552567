"""PA: every value of a profile that ``kvproof import`` derives equals what the records give.

Applied where a profile sits with a record set: by ``check`` to a directory that holds a profile
and records, and by ``kvproof import`` (``--verify``) to the profile and every phase it reads.
The derivation is the importer's (seed 001's ``_normalized_groups`` with its state groups, in
``docs/import.md``), written once here: :mod:`kvproof.importer` builds a profile from these same
functions, so a profile the importer writes passes these rules by construction and any other
value is refused. Each diagnostic sits at the profile's JSON path and names the record and the
JSON path that give the value.
"""

from __future__ import annotations

from pathlib import Path

from ..logic import HasKey, If, Implies, Min, Not, OrDefault, Present, SameScalar
from ..models.codec import ABSENT
from .common import pool_block_bytes, scheduler_name, worker_name
from .core import Instance, binding, rule

__all__ = [
    "STATE_SPECS", "WINDOWED_SPECS", "group_spec", "spec_type_of", "derived_name", "derived_kind",
    "derived_window", "derived_blocks_per_request", "derived_checkpoint_blocks", "derived_checkpoint_alignment",
    "derived_kv_cache_bytes",
]

#: Scheduler spec classes whose groups are state groups of the profile (seed 001: MambaSpec and
#: CircularBufferSpec); every other class the SC rules accept is an attention group.
STATE_SPECS = ("MambaSpec", "CircularBufferSpec")
WINDOWED_SPECS = ("SlidingWindowSpec", "SlidingWindowMLASpec")

_IMPORT = "docs/import.md (the importer's derivation; seed 001 runtime_memory._normalized_groups)"
_STATE = "vllm/v1/kv_cache_interface.py:1143-1153 (MambaSpec: 1 + num_speculative_blocks), :982-989 (CircularBufferSpec: 1)"


# --------------------------------------------------------------------------------------------
# The derivation (concrete for the importer, symbolic for the solver)


def group_spec(group):
    """The scheduler's spec of a group (the first layer spec of a uniform group), or None."""
    return group.spec if group.spec not in (ABSENT, None) else None


def spec_type_of(group) -> str:
    spec = group_spec(group)
    return spec.spec_type if spec is not None else group.spec_type


def derived_name(index: int) -> str:
    return f"runtime_group_{index}"


def derived_kind(group) -> str:
    return "state" if spec_type_of(group) in STATE_SPECS else "attention"


def derived_window(group):
    """A windowed group's window (the spec's, else the group's plain evidence); ABSENT otherwise."""
    if spec_type_of(group) not in WINDOWED_SPECS:
        return ABSENT
    spec = group_spec(group)
    return spec.sliding_window if spec is not None else group.sliding_window


def derived_blocks_per_request(group):
    """``1 + num_speculative_blocks`` for a Mamba group, 1 for a ring, ABSENT for attention."""
    kind = spec_type_of(group)
    if kind == "MambaSpec":
        spec = group_spec(group)
        return 1 + OrDefault(spec.num_speculative_blocks, 0) if spec is not None else 1
    if kind == "CircularBufferSpec":
        return 1
    return ABSENT


def derived_checkpoint_blocks(group):
    """A Mamba group's ``num_prefill_checkpoint_blocks`` as recorded; ABSENT otherwise."""
    spec = group_spec(group)
    if spec is None or spec.spec_type != "MambaSpec":
        return ABSENT
    return spec.num_prefill_checkpoint_blocks


def derived_checkpoint_alignment(group):
    """A Mamba group's ``prefill_checkpoint_alignment`` (a null one is written as absent)."""
    spec = group_spec(group)
    if spec is None or spec.spec_type != "MambaSpec":
        return ABSENT
    return spec.prefill_checkpoint_alignment


def derived_num_layers(index: int, workers) -> int:
    """The layers of group ``index`` over every stage: the scheduler's copy of a group names the
    first worker's layers only (``generate_scheduler_kv_cache_config`` copies
    ``kv_cache_configs[0]``, v1/core/kv_cache_utils.py:1096-1117), so a pipeline stage's layers
    come from its own workers."""
    names: set[str] = set()
    for worker in workers:
        if index < len(worker.cache.groups):
            names.update(worker.cache.groups[index].layer_names)
    return len(names)


def derived_kv_cache_bytes(caches):
    """Usable blocks (the null block excluded) times the pool block, the minimum over workers."""
    return Min(*[(cache.num_blocks - 1) * pool_block_bytes(cache) for cache in caches])


# --------------------------------------------------------------------------------------------
# Bindings


def _pairs(bundle):
    """(profile document, scheduler document) of a bundle that holds both (and workers)."""
    profiles = bundle.of_kind("profile")
    if not profiles or not bundle.of_kind("worker"):
        return
    for profile in profiles:
        for scheduler in bundle.of_kind("scheduler"):
            yield profile, scheduler


def _where(document) -> str:
    return Path(document.file).name if document.file else "the record"


def _shown(value) -> str:
    if value is ABSENT:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _groups(profile):
    groups = profile.resources.cache_groups
    return groups if groups not in (ABSENT, None) else []


@binding("bundle")
def group_counts(bundle):
    """A profile's group count with each scheduler's."""
    for profile, scheduler in _pairs(bundle):
        yield Instance("$.resources.cache_groups", (len(_groups(profile.obj)), len(scheduler.obj.cache.groups)),
                       {"n": len(_groups(profile.obj)), "m": len(scheduler.obj.cache.groups),
                        "scheduler": scheduler_name(scheduler.obj), "file": _where(scheduler)}, file=profile.file)


@rule(
    id="PA001",
    message="profile has {n} cache groups, but {scheduler} ({file}) gives {m} at $.cache.groups",
    over=group_counts,
    source=_IMPORT + " (one profile group per scheduler group)",
)
def group_count_agrees(n, m):
    """One profile group per KV cache group of the scheduler, in its order."""
    return n == m


@binding("bundle")
def group_pairs(bundle):
    """Each profile group with the scheduler group of its index and the first worker's cache."""
    for profile, scheduler in _pairs(bundle):
        workers = bundle.of_kind("worker")
        worker = workers[0]
        for index, (group, record_group) in enumerate(zip(_groups(profile.obj), scheduler.obj.cache.groups)):
            layers = derived_num_layers(index, [w.obj for w in workers if w.obj.dp_rank == scheduler.obj.dp_rank])
            yield Instance(f"$.resources.cache_groups[{index}]", (group, record_group, index, worker.obj.cache, layers),
                           {"scheduler": scheduler_name(scheduler.obj), "file": _where(scheduler),
                            "group": f"$.cache.groups[{index}]", "worker": worker_name(worker.obj),
                            "worker_file": _where(worker)},
                           file=profile.file)


def _explain(field, derive):
    def explain(group, record_group, index, cache, layers):
        return {"value": _shown(getattr(group, field)), "derived": _shown(derive(group, record_group, index, cache, layers))}

    return explain


_AT = "which {scheduler} ({file}) gives at {group}"


def _agreement(id: str, field: str, where: str, derive, source: str, doc: str, after: tuple[str, ...] = ()):
    """Declare the rule that a profile group's ``field`` is the derived value."""

    def body(group, record_group, index, cache, layers):
        return SameScalar(getattr(group, field), derive(group, record_group, index, cache, layers))

    body.__name__ = f"{field}_agrees_with_records"
    body.__doc__ = doc
    return rule(
        id=id, message=f"{field} {{value}} differs from {{derived}}, {where}", over=group_pairs, field=field,
        after=("PA001",) + after, explain=_explain(field, derive), source=source,
    )(body)


_agreement("PA002", "name", _AT, lambda g, s, i, c, n: derived_name(i), _IMPORT,
           "The importer names group i ``runtime_group_i`` after the scheduler group's index.")
_agreement("PA003", "kind", _AT + ".spec.spec_type", lambda g, s, i, c, n: derived_kind(s),
           _IMPORT + "; vllm/v1/kv_cache_interface.py (MambaSpec, CircularBufferSpec: state)",
           "MambaSpec and CircularBufferSpec groups are state groups, every other class an attention group.")
_agreement("PA004", "num_layers", "which the workers of {scheduler} give at {group}.layer_names", lambda g, s, i, c, n: n,
           _IMPORT + "; vllm/v1/core/kv_cache_utils.py:1096-1117",
           "A group has as many layers as the workers' copies of it name together (every pipeline stage).")
_agreement("PA005", "block_size_tokens", _AT + ".block_size_tokens", lambda g, s, i, c, n: s.block_size_tokens, _IMPORT,
           "The group's block is the scheduler group's block size.")
_agreement("PA006", "page_size_bytes", "which {worker} ({worker_file}) gives at $.cache.storages / $.cache.num_blocks",
           lambda g, s, i, c, n: pool_block_bytes(c), _IMPORT + " (every group's page is the whole pool block)",
           "Every group's page is the pool block ``allocated_cache_bytes // num_blocks`` (RS010: the same on "
           "every worker).", after=("RS010",))
_agreement("PA007", "sliding_window", _AT + ".spec.sliding_window", lambda g, s, i, c, n: derived_window(s), _IMPORT,
           "A sliding-window group keeps the spec's window; no other group has one.")
_agreement("PA008", "blocks_per_request", _AT + ".spec.num_speculative_blocks",
           lambda g, s, i, c, n: derived_blocks_per_request(s), _IMPORT + "; " + _STATE,
           "A Mamba group holds ``1 + num_speculative_blocks`` blocks per request, a ring 1; attention "
           "groups have no fixed count.")
_agreement("PA009", "prefill_checkpoint_blocks", _AT + ".spec.num_prefill_checkpoint_blocks",
           lambda g, s, i, c, n: derived_checkpoint_blocks(s),
           _IMPORT + "; vllm/models/glm5next/common/kda.py:168-176",
           "A Mamba group carries its spec's checkpoint count; no other group has one.")


def _alignment_explain(group, record_group, index, cache, layers):
    derived = derived_checkpoint_alignment(record_group)
    return {"value": _shown(group.prefill_checkpoint_alignment), "derived": _shown(derived if derived is not None else ABSENT)}


@rule(
    id="PA010",
    message="prefill_checkpoint_alignment {value} differs from {derived}, " + _AT + ".spec.prefill_checkpoint_alignment",
    over=group_pairs,
    field="prefill_checkpoint_alignment",
    after=("PA001",),
    explain=_alignment_explain,
    source=_IMPORT + "; vllm/model_executor/layers/mamba/kda_checkpoint.py:9-10",
)
def checkpoint_alignment_agrees(group, record_group, index, cache, layers):
    """A Mamba group with an alignment carries it; a null alignment (no checkpoint block) and
    every other group have none."""
    derived = derived_checkpoint_alignment(record_group)
    return _given_or_absent(derived, group.prefill_checkpoint_alignment)


def _given_or_absent(derived, value):
    """``value`` is ``derived`` when the records give one, else absent."""
    if derived is ABSENT:
        return Not(HasKey(value))
    return If(Present(derived), SameScalar(value, derived), Not(HasKey(value)))


@binding("bundle")
def memory_pairs(bundle):
    """A profile's runtime memory with each scheduler record and every worker's cache."""
    for profile, scheduler in _pairs(bundle):
        memory = profile.obj.resources.runtime_memory
        if memory in (ABSENT, None):
            continue
        caches = tuple(w.obj.cache for w in bundle.of_kind("worker"))
        yield Instance("$.resources.runtime_memory", (memory, scheduler.obj, caches, profile.obj.resources),
                       {"scheduler": scheduler_name(scheduler.obj), "file": _where(scheduler)}, file=profile.file)


def _memory_rule(id: str, field: str, where: str, derive, source: str, doc: str, after: tuple[str, ...] = ()):
    def body(memory, scheduler, caches, resources):
        return SameScalar(getattr(memory, field), derive(scheduler, caches))

    def explain(memory, scheduler, caches, resources):
        return {"value": _shown(getattr(memory, field)), "derived": _shown(derive(scheduler, caches))}

    body.__name__ = f"{field}_agrees_with_records"
    body.__doc__ = doc
    return rule(id=id, message=f"{field} {{value}} differs from {{derived}}, {where}", over=memory_pairs,
                field=field, after=after, explain=explain, source=source)(body)


_SCHED = "which {scheduler} ({file}) gives at "
_memory_rule("PA011", "kv_cache_bytes", "which the workers give at $.cache.num_blocks x the pool block (the null block excluded)",
             lambda s, caches: derived_kv_cache_bytes(caches),
             _IMPORT + "; vllm/v1/core/block_pool.py (the null block is never allocated)",
             "Usable blocks times the pool block, the minimum over the workers of every phase.", after=("RS010",))
_memory_rule("PA012", "max_model_len", _SCHED + "$.resolved_config.max_model_len",
             lambda s, caches: s.resolved_config.max_model_len, _IMPORT, "The resolved max_model_len.")
_memory_rule("PA013", "enable_prefix_caching", _SCHED + "$.resolved_config.enable_prefix_caching",
             lambda s, caches: s.resolved_config.enable_prefix_caching, _IMPORT + " (prefix-caching evidence)",
             "Prefix caching as the engine resolved it.")
_memory_rule("PA014", "mamba_cache_mode", _SCHED + "$.cache.mamba_cache_mode",
             lambda s, caches: s.cache.mamba_cache_mode, _IMPORT + " (prefix-caching evidence)",
             "The scheduler's Mamba cache mode (absent when the scheduler records none).")
_memory_rule("PA015", "hash_block_size_tokens", _SCHED + "$.cache.hash_block_size",
             lambda s, caches: s.cache.hash_block_size, _IMPORT + " (prefix-caching evidence)",
             "The scheduler's hash block size.")


def raw_utilization_records(records):
    """The records (schedulers first, then workers, in bundle order) whose ``raw_cache_config``
    is carried: each states the engine's ``cache_config.gpu_memory_utilization`` (one VllmConfig
    for every process of an engine, multiproc_executor.py:205-219) when it has the key."""
    return [r for r in records if r.raw_cache_config not in (ABSENT, None)]


@binding("bundle")
def utilization_pairs(bundle):
    """A profile's runtime memory with each record of its set that carries a raw cache config."""
    profiles = bundle.of_kind("profile")
    if not profiles or not bundle.of_kind("worker"):
        return
    documents = bundle.of_kind("scheduler") + bundle.of_kind("worker")
    carrying = {id(r) for r in raw_utilization_records([d.obj for d in documents])}
    for profile in profiles:
        memory = profile.obj.resources.runtime_memory
        if memory in (ABSENT, None):
            continue
        for document in documents:
            if id(document.obj) in carrying:
                name = worker_name(document.obj) if document.kind == "worker" else scheduler_name(document.obj)
                yield Instance("$.resources.runtime_memory", (memory, document.obj.raw_cache_config),
                               {"record": name, "file": _where(document)}, file=profile.file)


@rule(
    id="PA016",
    message="gpu_memory_utilization {value} differs from {derived}, which {record} ({file}) gives at "
    "$.raw_cache_config.gpu_memory_utilization",
    over=utilization_pairs,
    field="gpu_memory_utilization",
    explain=lambda memory, raw: {"value": _shown(memory.gpu_memory_utilization),
                                 "derived": _shown(raw.gpu_memory_utilization)},
    source=_IMPORT + "; vllm/config/cache.py (CacheConfig.gpu_memory_utilization, one for every process of the engine)",
)
def utilization_agrees(memory, raw):
    """Where a record of the set carries its raw cache config with a utilization, the profile's
    is that one (records that state none leave it unjudged: the importer writes vLLM's default
    0.9 and says so in the memory's provenance)."""
    derived = raw.gpu_memory_utilization
    return Implies(Present(derived), SameScalar(memory.gpu_memory_utilization, derived))


def _resources_rule(id: str, field: str, where: str, derive, doc: str):
    def body(memory, scheduler, caches, resources):
        return SameScalar(getattr(resources, field), derive(scheduler))

    def explain(memory, scheduler, caches, resources):
        return {"value": _shown(getattr(resources, field)), "derived": _shown(derive(scheduler))}

    body.__name__ = f"{field}_agrees_with_records"
    body.__doc__ = doc
    return rule(id=id, message=f"{field} {{value}} differs from {{derived}}, {where}", over=resources_pairs,
                field=field, explain=explain, source=_IMPORT)(body)


@binding("bundle")
def resources_pairs(bundle):
    """A profile's resources with each scheduler record."""
    for profile, scheduler in _pairs(bundle):
        yield Instance("$.resources", (None, scheduler.obj, (), profile.obj.resources),
                       {"scheduler": scheduler_name(scheduler.obj), "file": _where(scheduler)}, file=profile.file)


_resources_rule("PA017", "max_num_tokens", _SCHED + "$.resolved_config.max_num_batched_tokens",
                lambda s: s.resolved_config.max_num_batched_tokens, "The token budget is max_num_batched_tokens.")
_resources_rule("PA018", "max_batch_size", _SCHED + "$.resolved_config.max_num_seqs",
                lambda s: s.resolved_config.max_num_seqs, "The batch size is max_num_seqs (a record set without it "
                "gives no batch size, and the importer refuses it).")



@rule(
    id="PA019",
    message="profile lacks runtime_memory, which {scheduler} ({file}) and its workers give",
    over=resources_pairs,
    field="runtime_memory",
    source=_IMPORT,
)
def runtime_memory_present(memory, scheduler, caches, resources):
    """A profile next to its records holds the runtime memory they give."""
    return Present(resources.runtime_memory)

