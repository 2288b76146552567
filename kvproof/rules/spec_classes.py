"""SC: vLLM 0.33.0 cache-spec classes, their FPM kinds, and the scheduler's copy of each group.

One class table maps the spec classes of ``vllm/v1/kv_cache_interface.py`` to FPM kinds: the
attention family (registered base ``FullAttentionSpec``, ``SlidingWindowSpec``,
``SlidingWindowMLASpec``, ``ChunkedLocalAttentionSpec``; ``single_type_kv_cache_manager.py:2656-2730``)
is ``attention``; ``MambaSpec`` and ``CircularBufferSpec`` hold a fixed number of blocks per
request and are ``state``. ``RSWASpec`` (its manager frees the blocks between prompt and decode
window, which no FPM kind models), HiSparse placement, cross-attention, encoder-only and every
unknown class are unsupported.
"""

from __future__ import annotations

from ..logic import And, If, Implies, IntIs, Not, Or, OrDefault, Present, SameScalar, ValueOf
from ..models.codec import ABSENT
from .common import layer_list, layer_specs_of, same_list, worker_groups
from .core import Instance, binding, child, rule

ATTENTION_SPECS = (
    "FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec",
    "SlidingWindowSpec", "SlidingWindowMLASpec", "ChunkedLocalAttentionSpec",
)
STATE_SPECS = ("MambaSpec", "CircularBufferSpec")
SPEC_KINDS = {**{name: "attention" for name in ATTENTION_SPECS}, **{name: "state" for name in STATE_SPECS}}
UNIFORM_GROUP = "UniformTypeKVCacheSpecs"

_TABLE = "vllm/v1/core/single_type_kv_cache_manager.py:2656-2730 (spec -> manager registry)"


def kind_code(spec_type):
    """1 for the attention family, 2 for state specs, 0 for anything else (a term or an int)."""
    return If(Or(*[spec_type == name for name in ATTENTION_SPECS]), 1, If(Or(*[spec_type == name for name in STATE_SPECS]), 2, 0))


def kind_name_code(kind):
    return If(kind == "attention", 1, If(kind == "state", 2, 0))


def group_kind_code(group):
    """The kind the group's specs give: its first layer spec's, else its own spec class's."""
    specs = layer_specs_of(group)
    return kind_code(specs[0].spec_type if specs else group.spec_type)


@binding("worker", "scheduler")
def spec_classes(record):
    """Every spec class a record names: worker layer specs and non-uniform group specs, the
    scheduler's group specs."""
    for index, group in enumerate(record.cache.groups):
        subject = f"$.cache.groups[{index}]"
        if record.kind == "worker":
            if group.spec_type != UNIFORM_GROUP or group.layer_specs in (ABSENT, None):
                yield Instance(subject, (group.spec_type, ABSENT), {"spec": group.spec_type}, blame=f"{subject}.spec_type")
            for name in group.layer_names:
                specs = group.layer_specs
                if specs in (ABSENT, None) or name not in specs:
                    continue
                spec = specs[name]
                where = child(child(subject, "layer_specs"), name)
                yield Instance(where, (spec.spec_type, spec.placement), {"spec": spec.spec_type}, blame=f"{where}.spec_type")
        else:
            yield Instance(subject, (group.spec_type, ABSENT), {"spec": group.spec_type}, blame=f"{subject}.spec_type")
            if group.spec not in (ABSENT, None):
                where = f"{subject}.spec"
                yield Instance(where, (group.spec.spec_type, group.spec.placement), {"spec": group.spec.spec_type},
                               blame=f"{where}.spec_type")


@rule(
    id="SC001",
    message="unsupported runtime cache spec: {spec}",
    over=spec_classes,
    source=_TABLE + "; vllm/v1/kv_cache_interface.py:815-857 (RSWASpec), :485-548 (HiSparse)",
)
def spec_class_supported(spec_type, placement):
    """The class is in the class table and the layer has no HiSparse (host) placement."""
    return And(kind_code(spec_type) != 0, Not(Present(placement)))


@binding("worker")
def worker_groups_with_evidence(record):
    """Every cache group of a worker record, with whether the record holds hybrid evidence."""
    hybrid = any(g.layer_specs not in (ABSENT, None) for g in record.cache.groups)
    for instance in worker_groups(record):
        yield Instance(instance.subject, (*instance.args, hybrid), instance.names)


@rule(
    id="SC007",
    message="runtime cache group layer specs do not match its layers: {layers}",
    over=worker_groups_with_evidence,
    field="layer_specs",
    source="vllm/v1/kv_cache_interface.py:1290-1320 (UniformTypeKVCacheSpecs.kv_cache_specs: one spec per layer)",
)
def layer_specs_cover_layers(group, hybrid):
    """Hybrid evidence names a spec for exactly the group's layers, in every group of the record
    (a 0.33.0 probe writes it for all groups or none)."""
    specs = group.layer_specs
    if specs in (ABSENT, None):
        return not hybrid
    return sorted(specs) == sorted(group.layer_names)


@rule(
    id="SC002",
    message="runtime cache group mixes cache kinds: {layers}",
    over=worker_groups,
    field="layer_specs",
    after=("SC001", "SC007"),
    source="vllm/v1/kv_cache_interface.py:1347-1361 (UniformTypeKVCacheSpecs.is_uniform_type)",
)
def group_has_one_kind(group):
    """A ``UniformTypeKVCacheSpecs`` group holds layers of one registered type, so one kind."""
    specs = layer_specs_of(group)
    return And(*[kind_code(spec.spec_type) == kind_code(specs[0].spec_type) for spec in specs[1:]])


@rule(
    id="SC003",
    message="runtime cache group kind contradicts its cache specs: {layers}",
    over=worker_groups,
    field="kind",
    after=("SC001", "SC002"),
    source=_TABLE,
)
def group_kind_matches_specs(group):
    """The recorded kind is the one kind of the group's specs; a group with layer specs must
    record it."""
    hybrid = group.layer_specs not in (ABSENT, None)
    if hybrid:
        return And(Present(group.kind), kind_name_code(group.kind) == group_kind_code(group))
    return Implies(Present(group.kind), kind_name_code(group.kind) == group_kind_code(group))


def _expected_state_blocks(group):
    """1 + k for a Mamba group (k speculative blocks), 1 for a ring."""
    specs = layer_specs_of(group)
    first = specs[0] if specs else None
    # A group without layers on this pipeline stage has no layer spec: its evidence states k.
    source = first if first is not None else group.state
    k = OrDefault(source.num_speculative_blocks, 0) if source not in (ABSENT, None) else 0
    return If((first.spec_type if first is not None else group.spec_type) == "MambaSpec", 1 + k, 1)


@rule(
    id="SC004",
    message="runtime state cache group blocks_per_request contradicts its cache spec: {layers}",
    over=worker_groups,
    field="state",
    after=("SC001", "SC002", "SC003"),
    source="vllm/v1/kv_cache_interface.py:1143-1153 (MambaSpec: 1 + k between block boundaries), "
    ":982-989 (CircularBufferSpec: one ring block)",
)
def state_evidence_matches_spec(group):
    """A state group carries state evidence whose ``blocks_per_request`` is the count a running
    request holds between block boundaries (``1 + num_speculative_blocks`` for Mamba, 1 for a
    ring); an attention group carries none."""
    is_state = group_kind_code(group) == 2
    if group.state in (ABSENT, None):
        return Not(is_state)
    return And(is_state, IntIs(group.state.blocks_per_request, lambda n: n == _expected_state_blocks(group)))


def _pairs(bundle):
    """(scheduler document, worker document) of the same DP rank and phase."""
    schedulers = bundle.of_kind("scheduler")
    workers = bundle.of_kind("worker")
    for scheduler in schedulers:
        for worker in workers:
            if worker.obj.dp_rank == scheduler.obj.dp_rank and worker.obj.phase == scheduler.obj.phase:
                yield scheduler, worker


@binding("bundle")
def scheduler_worker_records(bundle):
    """Each scheduler record with each worker record of its DP rank and phase."""
    for scheduler, worker in _pairs(bundle):
        yield Instance("$.cache.groups", (scheduler.obj.cache, worker.obj.cache), {"worker": worker.file or "worker"},
                       file=scheduler.file)


@binding("bundle")
def scheduler_worker_groups(bundle):
    """Each scheduler group with the group at the same index of a first-stage worker: the
    scheduler's config is a copy of worker 0's, and later pipeline stages hold other layers
    (``generate_scheduler_kv_cache_config``: "the same kv_cache_config except layer names")."""
    for scheduler, worker in _pairs(bundle):
        if worker.obj.pp_rank != 0:
            continue
        for index, (mine, theirs) in enumerate(zip(scheduler.obj.cache.groups, worker.obj.cache.groups)):
            yield Instance(f"$.cache.groups[{index}]", (mine, theirs), {"layers": layer_list(mine.layer_names)},
                           file=scheduler.file)


@rule(
    id="SC005",
    message="worker and scheduler cache group counts disagree",
    over=scheduler_worker_records,
    source="vllm/v1/core/kv_cache_utils.py:1096-1117 (generate_scheduler_kv_cache_config copies the groups)",
)
def group_counts_agree(scheduler_cache, worker_cache):
    """The scheduler's config is a copy of the worker's."""
    return len(scheduler_cache.groups) == len(worker_cache.groups)


_SPEC_FIELDS = [
    "spec_type", "block_size", "page_size_bytes", "num_kv_heads", "head_size", "head_size_v", "dtype",
    "sliding_window", "attention_chunk_size", "extra_retained_tokens", "tokens_per_state", "state_content_bytes",
    "page_size_padded", "num_head_slots", "cache_role", "cache_dtype_str", "dcp_sharded", "mamba_type",
    "mamba_cache_mode", "num_speculative_blocks", "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment",
]


@rule(
    id="SC006",
    message="scheduler cache group differs from the worker's first layer spec: {layers}",
    over=scheduler_worker_groups,
    after=("SC001", "SC005"),
    source="vllm/v1/core/kv_cache_utils.py:1096-1117 (a UniformTypeKVCacheSpecs group becomes its first layer spec)",
)
def scheduler_copy_is_first_spec(scheduler_group, worker_group):
    """The scheduler group holds the worker group's layers, and its spec is the worker's first
    layer spec (or the group spec of a non-uniform group): same class, block size, page and
    every field."""
    first = None
    if worker_group.layer_specs not in (ABSENT, None) and worker_group.layer_names:
        first = worker_group.layer_specs.get(worker_group.layer_names[0])
    same_layers = same_list(scheduler_group.layer_names, worker_group.layer_names)
    if first is None:  # a plain group, or a group without layers on this pipeline stage
        return And(same_layers, scheduler_group.spec_type == worker_group.spec_type,
                   scheduler_group.block_size_tokens == worker_group.block_size_tokens,
                   scheduler_group.page_size_bytes == worker_group.page_size_bytes)
    checks = [same_layers, scheduler_group.spec_type == first.spec_type, scheduler_group.block_size_tokens == first.block_size,
              scheduler_group.page_size_bytes == first.page_size_bytes]
    spec = scheduler_group.spec
    if spec not in (ABSENT, None):
        checks += [SameScalar(getattr(spec, name), getattr(first, name)) for name in _SPEC_FIELDS]
        checks.append(same_list(spec.shapes, first.shapes))
        checks.append(same_list(spec.dtypes, first.dtypes))
    return And(*checks)
