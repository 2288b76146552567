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

from ..formulas import pages
from ..formulas.dtypes import element_bytes
from ..logic import And, If, Implies, IntIs, Not, Or, OrDefault, Present, SameScalar, Sum, ValueOf
from ..models.codec import ABSENT, present
from .common import layer_list, layer_specs_of, same_list, scheduler_worker_pairs, worker_groups
from .core import Instance, binding, child, rule

ATTENTION_SPECS = (
    "FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec",
    "SlidingWindowSpec", "SlidingWindowMLASpec", "ChunkedLocalAttentionSpec",
)
STATE_SPECS = ("MambaSpec", "CircularBufferSpec")
SPEC_KINDS = {**{name: "attention" for name in ATTENTION_SPECS}, **{name: "state" for name in STATE_SPECS}}
UNIFORM_GROUP = "UniformTypeKVCacheSpecs"

_TABLE = "vllm/v1/core/single_type_kv_cache_manager.py:2656-2730 (spec -> manager registry)"


_KIND_CODES = {**{name: 1 for name in ATTENTION_SPECS}, **{name: 2 for name in STATE_SPECS}}


def kind_code(spec_type):
    """1 for the attention family, 2 for state specs, 0 for anything else (a term or an int)."""
    if type(spec_type) is str:  # concrete: a table look-up
        return _KIND_CODES.get(spec_type, 0)
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


@binding("scheduler")
def scheduler_groups_with_evidence(record):
    """Every cache group of a scheduler record, with whether the record holds hybrid evidence."""
    hybrid = any(present(g.spec) for g in record.cache.groups)
    for index, group in enumerate(record.cache.groups):
        yield Instance(f"$.cache.groups[{index}]", (present(group.spec), hybrid),
                       {"layers": layer_list(group.layer_names)})


@rule(
    id="SC011",
    message="scheduler cache group lacks the spec the other groups state: {layers}",
    over=scheduler_groups_with_evidence,
    field="spec",
    source="vllm/v1/core/kv_cache_utils.py:1096-1117 (generate_scheduler_kv_cache_config: every group keeps a spec)",
)
def scheduler_group_states_spec(has_spec, hybrid):
    """A 0.33.0 probe writes the scheduler's copy of every group's spec, or of none."""
    return has_spec or not hybrid


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
    id="SC008",
    message="runtime cache group block size contradicts its layer specs: {layers}",
    over=worker_groups,
    field="block_size_tokens",
    after=("SC001", "SC007"),
    source="vllm/v1/kv_cache_interface.py:1347-1361 (is_uniform_type: one block size), :1363-1372 "
    "(UniformTypeKVCacheSpecs.block_size), kv_cache_planning.py:187-215 (create_kv_cache_group_specs: a merged group spec)",
)
def group_block_size_matches_layers(group):
    """Every layer spec of a group has the group's block size (a uniform-type group is built only
    over one block size; a merged group is its identical layer specs)."""
    return And(*[spec.block_size == group.block_size_tokens for spec in layer_specs_of(group)])


_FULL_BASE = ("FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec", "SinkFullAttentionSpec", "RSWASpec")


def _same(first, spec, name):
    return SameScalar(getattr(spec, name), getattr(first, name))


#: ``first.is_uniform_with_collection`` for one more spec (kv_cache_interface.py:315-326 and the
#: overrides at 890, 957, 991, 1082, 1155), with the registry's base classes
#: (single_type_kv_cache_manager.py:2656-2730): per class of the first spec, what the other spec
#: must satisfy (the full-attention family groups together).
_UNIFORM_WITH = (
    (_FULL_BASE, lambda first, spec: [Or(*[spec.spec_type == name for name in _FULL_BASE])]),
    (("SlidingWindowSpec",), lambda first, spec: [
        Or(spec.spec_type == "SlidingWindowSpec", spec.spec_type == "SlidingWindowMLASpec"),
        _same(first, spec, "sliding_window")]),
    (("SlidingWindowMLASpec",), lambda first, spec: [
        spec.spec_type == "SlidingWindowMLASpec", _same(first, spec, "sliding_window")]),
    (("ChunkedLocalAttentionSpec",), lambda first, spec: [
        spec.spec_type == "ChunkedLocalAttentionSpec", _same(first, spec, "attention_chunk_size")]),
    (("CircularBufferSpec",), lambda first, spec: [spec.spec_type == "CircularBufferSpec"]),
    (("MambaSpec",), lambda first, spec: [
        spec.spec_type == "MambaSpec", _same(first, spec, "num_speculative_blocks"),
        _same(first, spec, "num_prefill_checkpoint_blocks"), _same(first, spec, "prefill_checkpoint_alignment"),
        spec.page_size_bytes == first.page_size_bytes]),
)
_UNIFORM_WITH_CLASS = {name: conditions for classes, conditions in _UNIFORM_WITH for name in classes}


def _uniform_with(first, spec):
    """The first spec's branch of ``_UNIFORM_WITH`` holds. A loaded class name selects its one
    branch (every other branch is false); a symbolic one takes the disjunction of all."""
    t = first.spec_type
    if type(t) is str:
        conditions = _UNIFORM_WITH_CLASS.get(t)
        return And(*conditions(first, spec)) if conditions is not None else False
    return Or(*[And(Or(*[t == name for name in classes]) if len(classes) > 1 else t == classes[0],
                    *conditions(first, spec)) for classes, conditions in _UNIFORM_WITH])


@rule(
    id="SC009",
    message="runtime cache group layer specs are not of one uniform type: {layers}",
    over=worker_groups,
    field="layer_specs",
    after=("SC001", "SC007", "SC002", "SC008"),
    source="vllm/v1/kv_cache_interface.py:1347-1361 (UniformTypeKVCacheSpecs.is_uniform_type), :315-326, "
    ":890-897, :957-964, :991-996, :1082-1090, :1155-1166; kv_cache_planning.py:1634-1641 (one "
    "extra_retained_tokens for every SWA spec); model_executor/layers/mamba/abstract.py:72-91 (one mamba_cache_mode)",
)
def group_layers_uniform(group):
    """The layers of a group pass vLLM's uniform-type test against the first: one ``dcp_sharded``
    value and the first spec's registered base type with that type's conditions (one window, one
    chunk, Mamba: one speculative/checkpoint count, alignment and page); settings vLLM writes into
    every spec alike (``extra_retained_tokens``, ``mamba_cache_mode``) agree too."""
    specs = layer_specs_of(group)
    if len(specs) < 2:
        return True
    first = specs[0]
    return And(*[And(SameScalar(spec.dcp_sharded, first.dcp_sharded), _uniform_with(first, spec),
                     SameScalar(spec.extra_retained_tokens, first.extra_retained_tokens),
                     SameScalar(spec.mamba_cache_mode, first.mamba_cache_mode)) for spec in specs[1:]])


@rule(
    id="SC010",
    message="runtime cache group page size contradicts its layer specs: {layers}",
    over=worker_groups,
    field="page_size_bytes",
    after=("SC001", "SC007", "SC008", "SC009"),
    source="vllm/v1/kv_cache_interface.py:1318-1320 (UniformTypeKVCacheSpecs.page_size_bytes: the sum of "
    "the layer pages); kv_cache_planning.py:187-215 (create_kv_cache_group_specs: a merged group spec is its layers' spec)",
)
def group_page_matches_layers(group):
    """A uniform-type group's page is the sum of its layers' pages; any other group is the merge
    of identical layer specs (``merge`` asserts every compared field equal,
    kv_cache_interface.py:663-716), so it has their class and page and its layers' specs agree
    field by field."""
    specs = layer_specs_of(group)
    if not specs:
        return True
    uniform = group.spec_type == UNIFORM_GROUP
    summed = group.page_size_bytes == Sum(*[spec.page_size_bytes for spec in specs])
    if uniform is True:  # concrete: the merged branch need not be built
        return summed
    first = specs[0]
    merged = And(*[And(spec.spec_type == group.spec_type, spec.page_size_bytes == group.page_size_bytes) for spec in specs],
                 *[SameScalar(getattr(spec, name), getattr(first, name)) for spec in specs[1:] for name in _SPEC_FIELDS])
    return If(uniform, summed, merged)


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


@rule(
    id="SC012",
    message="runtime state cache group speculative blocks contradict its cache spec: {layers}",
    over=worker_groups,
    field="state.num_speculative_blocks",
    after=("SC001", "SC002", "SC003", "SC004", "SC009"),
    source="vllm/v1/kv_cache_interface.py:1094-1104 (MambaSpec.num_speculative_blocks), "
    "model_executor/layers/mamba/abstract.py:72-91",
)
def state_speculative_blocks_match_spec(group):
    """A Mamba group's state evidence states its spec's speculative blocks; a ring's states none or 0."""
    if not present(group.state):
        return True
    stated = group.state.num_speculative_blocks
    specs = layer_specs_of(group)
    if not specs:  # no layer on this stage, or no hybrid evidence: nothing to compare with
        return True
    first = specs[0]
    mamba = first.spec_type == "MambaSpec"
    return If(mamba, IntIs(stated, lambda k: k == OrDefault(first.num_speculative_blocks, 0)),
              Implies(Present(stated), IntIs(stated, lambda k: k == 0)))


@binding("worker", "scheduler")
def stated_specs(record):
    """Every layer spec a record states: worker layer specs, the scheduler's group specs."""
    for index, group in enumerate(record.cache.groups):
        subject = f"$.cache.groups[{index}]"
        if record.kind == "worker":
            specs = group.layer_specs if present(group.layer_specs) else {}
            for name in group.layer_names:
                if name in specs:
                    yield Instance(child(child(subject, "layer_specs"), name), (specs[name],), {"layer": name})
        elif present(group.spec):
            yield Instance(f"{subject}.spec", (group.spec,), {"layer": layer_list(group.layer_names)})


_ATTENTION_PAGES = ATTENTION_SPECS + ("CircularBufferSpec",)
_ATTENTION_PAGE_SET = frozenset(_ATTENTION_PAGES)


def _mamba_page(spec):
    """``(derivable, unpadded page)`` of a Mamba spec's fields: every state's dtype is known."""
    shapes, dtypes = spec.shapes, spec.dtypes
    if not (isinstance(shapes, list) and isinstance(dtypes, list) and len(shapes) == len(dtypes)):
        return False, 0
    sizes = [element_bytes(d) for d in dtypes]
    return And(*[size > 0 for size in sizes]), pages.mamba_state_size_bytes(
        [pages.state_tensor_bytes(shape, size) for shape, size in zip(shapes, sizes)])


def _attention_page(spec):
    """``(derivable, unpadded page)`` of an attention-family or ring spec's fields: heads, head
    size and either a packed content size or a known dtype are stated."""
    heads = OrDefault(spec.num_head_slots, ValueOf(spec.num_kv_heads))
    head_size = ValueOf(spec.head_size)
    head_v = OrDefault(spec.head_size_v, pages.default_head_size_v(spec.spec_type, head_size))
    size = element_bytes(spec.dtype)
    content = pages.attention_state_content_size_bytes(head_size, head_v, size, spec.state_content_bytes)
    page = pages.attention_unpadded_page_size_bytes(heads, spec.block_size, ValueOf(spec.tokens_per_state, 1), content)
    known = And(Present(spec.num_kv_heads), Present(spec.head_size), Or(Present(spec.state_content_bytes), size > 0))
    return known, page


def _derived_page(spec):
    """``(derivable, unpadded page)`` of a spec from its fields by the page formula of its class
    (:mod:`kvproof.formulas.pages`); not derivable when a field the formula needs is missing or a
    dtype is not in the table (other rules and the loader speak to those). A loaded class name
    builds its own formula only; a symbolic class builds both and selects one."""
    t = spec.spec_type
    if type(t) is str:
        if t == "MambaSpec":
            return _mamba_page(spec)
        return _attention_page(spec) if t in _ATTENTION_PAGE_SET else (False, 0)
    is_mamba = t == "MambaSpec"
    is_attention = Or(*[t == name for name in _ATTENTION_PAGES])
    mamba_known, mamba_page = _mamba_page(spec)
    attention_known, attention_page = _attention_page(spec)
    return Or(And(is_mamba, mamba_known), And(is_attention, attention_known)), If(is_mamba, mamba_page, attention_page)


@rule(
    id="SC013",
    message="layer spec page size contradicts its fields: {layer}",
    over=stated_specs,
    field="page_size_bytes",
    after=("SC001",),
    source="vllm/v1/kv_cache_interface.py:579-601 (AttentionSpec: num_heads x num_states x "
    "state_content_size_bytes, or page_size_padded >= it), :268-275 (num_states), :1106-1129 (MambaSpec: "
    "sum of prod(shape) x dtype size, or page_size_padded >= it), :719-725 (MLA alignment padding)",
)
def page_matches_fields(spec):
    """A spec's page is its padded page (never below the derived one) or the page its fields give."""
    derivable, unpadded = _derived_page(spec)
    padded = spec.page_size_padded
    return Implies(derivable, And(spec.page_size_bytes == pages.padded_page_size_bytes(unpadded, padded),
                                  pages.padding_fits(unpadded, padded)))


@binding("bundle")
def scheduler_worker_records(bundle):
    """Each scheduler record with each worker record of its DP rank and phase."""
    for scheduler, worker in scheduler_worker_pairs(bundle):
        yield Instance("$.cache.groups", (scheduler.obj.cache, worker.obj.cache), {"worker": worker.file or "worker"},
                       file=scheduler.file)


@binding("bundle")
def scheduler_worker_groups(bundle):
    """Each scheduler group with the group at the same index of a first-stage worker: the
    scheduler's config is a copy of worker 0's, and later pipeline stages hold other layers
    (``generate_scheduler_kv_cache_config``: "the same kv_cache_config except layer names")."""
    for scheduler, worker in scheduler_worker_pairs(bundle):
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
