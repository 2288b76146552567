"""PC: prefix-caching evidence, Mamba cache modes, and the block sizes vLLM 0.33.0 resolves.

``resolve_kv_cache_block_sizes`` (``v1/core/kv_cache_utils.py:816-918``) gives the scheduler
block size and the hash block size from the scheduler's groups; ``resolve_cache_hit_alignment_tokens``
(921-950) the cache-hit alignment; the engine writes ``cache_config.block_size = min(block size of
prefix-cacheable groups)`` (``v1/engine/core.py:334-352``). A record whose sizes differ, or
whose settings vLLM would refuse to start with, contradicts its groups. The Mamba modes are
``MambaCacheMode = Literal["align", "none"]`` (``config/cache.py:176``).
"""

from __future__ import annotations

import json

from ..logic import And, HasKey, If, Implies, IntIs, Not, Or, OrDefault, Present, SameScalar, ValueOf, gcd, lcm, mod
from ..models.codec import ABSENT
from ..sim.startup.state_support import REVISION_PR_55688
from .common import same_list, scheduler_name
from .core import Instance, binding, child, rule

_RESOLVE = "vllm/v1/core/kv_cache_utils.py:816-918 (resolve_kv_cache_block_sizes)"
_EVIDENCE_KEYS = ("enable_prefix_caching", "mamba_cache_mode", "hash_block_size", "scheduler_block_size", "prefix_match_unit")


@binding("worker", "scheduler")
def evidence(record):
    """A record's prefix-caching evidence with its resolved settings."""
    yield Instance("$.prefix_caching", (record.prefix_caching, record.resolved_config))


@rule(
    id="PC001",
    message="runtime observation requires complete prefix-caching evidence",
    over=evidence,
    source="vllm/config/cache.py (CacheConfig.enable_prefix_caching, mamba_cache_mode), " + _RESOLVE,
)
def evidence_complete(prefix_caching, config):
    """Every record holds every prefix-caching key (null where vLLM has none, e.g. no unit)."""
    if prefix_caching in (ABSENT, None):
        return False
    return And(*[HasKey(getattr(prefix_caching, key)) for key in _EVIDENCE_KEYS])


@binding("worker", "scheduler")
def mamba_modes(record):
    """Every Mamba cache mode a record states."""
    config = record.resolved_config
    yield Instance("$.resolved_config.mamba_cache_mode", (config.mamba_cache_mode,))
    if record.prefix_caching not in (ABSENT, None):
        yield Instance("$.prefix_caching.mamba_cache_mode", (record.prefix_caching.mamba_cache_mode,))
    if record.kind == "scheduler":
        yield Instance("$.cache.mamba_cache_mode", (record.cache.mamba_cache_mode,))
    for index, group in enumerate(record.cache.groups):
        subject = f"$.cache.groups[{index}]"
        specs = group.layer_specs if record.kind == "worker" else ({"spec": group.spec} if group.spec not in (ABSENT, None) else None)
        if record.kind == "worker" and group.state not in (ABSENT, None):
            yield Instance(f"{subject}.state.mamba_cache_mode", (group.state.mamba_cache_mode,))
        for name, spec in (specs or {}).items() if specs not in (ABSENT, None) else ():
            where = child(child(subject, "layer_specs"), name) if record.kind == "worker" else f"{subject}.spec"
            yield Instance(f"{where}.mamba_cache_mode", (spec.mamba_cache_mode,))


@binding("worker", "scheduler")
def mamba_modes_of_revision(record):
    """Every Mamba cache mode a record states, with the vLLM revision it names (SS001)."""
    revision = record.resolved_config.vllm_revision
    for instance in mamba_modes(record):
        yield Instance(instance.subject, (*instance.args, revision))


@rule(
    id="PC002",
    message="mamba cache mode must be 'none' or 'align' (vLLM 0.33.0 has no other mode)",
    over=mamba_modes_of_revision,
    source="vllm/config/cache.py:176 (MambaCacheMode = Literal['align', 'none'])",
)
def mamba_mode_known(mode, revision):
    """``CacheConfig(mamba_cache_mode="all")`` fails vLLM 0.33.0's validation; a record of seed
    004's revision (vLLM PR #55688, ``kvproof/sim/startup/state_support.py``) may state ``all``."""
    pr = And(Present(revision), revision == REVISION_PR_55688)
    return Implies(Present(mode), Or(mode == "none", mode == "align", And(mode == "all", pr)))


@binding("worker", "scheduler")
def mamba_modes_and_resolved(record):
    """Every Mamba cache mode a record's cache states, with the resolved one."""
    resolved = record.resolved_config.mamba_cache_mode
    for instance in mamba_modes(record):
        if instance.subject.startswith("$.cache"):
            yield Instance(instance.subject, (*instance.args, resolved), {"resolved": repr(resolved)})


@rule(
    id="PC010",
    message="mamba cache mode evidence contradicts the resolved mamba_cache_mode {resolved}",
    over=mamba_modes_and_resolved,
    after=("PC002",),
    source="vllm/model_executor/layers/mamba/abstract.py:72-91 (every MambaSpec takes cache_config.mamba_cache_mode), "
    "vllm/model_executor/models/config.py:763-787 (the mode is resolved once, before the workers start)",
)
def mamba_mode_is_resolved_mode(mode, resolved):
    """A Mamba spec, a state group's evidence and the scheduler's cache all carry the one mode
    ``cache_config`` resolved (checked when both are stated)."""
    return Implies(And(Present(mode), Present(resolved)), SameScalar(mode, resolved))


@binding("worker", "scheduler")
def resolved_settings(record):
    yield Instance("$.resolved_config", (record.resolved_config,))


@rule(
    id="PC003",
    message="mamba cache mode 'align' requires prefix caching",
    over=resolved_settings,
    field="mamba_cache_mode",
    after=("PC002",),
    source="vllm/model_executor/models/config.py:763-787 (prefix caching off forces mode 'none')",
)
def align_needs_prefix_caching(config):
    """With prefix caching off vLLM switches the Mamba cache mode to 'none'."""
    return Implies(And(Present(config.mamba_cache_mode), config.mamba_cache_mode == "align"),
                   config.enable_prefix_caching == True)  # noqa: E712 - a z3 Bool in the solver


@binding("worker", "scheduler")
def hash_block_sizes(record):
    """Every hash and scheduler block size a record states."""
    if record.prefix_caching not in (ABSENT, None):
        yield Instance("$.prefix_caching.hash_block_size", (record.prefix_caching.hash_block_size,))
        yield Instance("$.prefix_caching.scheduler_block_size", (record.prefix_caching.scheduler_block_size,))
    if record.kind == "scheduler":
        yield Instance("$.cache.hash_block_size", (record.cache.hash_block_size,))
        yield Instance("$.cache.scheduler_block_size", (record.cache.scheduler_block_size,))


@rule(
    id="PC004",
    message="hash block size must be positive",
    over=hash_block_sizes,
    after=("PC001",),
    source=_RESOLVE,
)
def block_sizes_positive(size):
    """A positive integer number of tokens."""
    return IntIs(size, lambda n: n > 0)


@rule(
    id="PC005",
    message="runtime prefix-caching evidence contradicts the resolved cache settings",
    over=evidence,
    after=("PC001", "PC002"),
    source="vllm/config/cache.py (the probe's evidence is the config vLLM resolved)",
)
def evidence_matches_settings(prefix_caching, config):
    """Prefix caching on/off, the Mamba mode and the prefix_match_unit are the resolved ones."""
    return And(
        SameScalar(prefix_caching.enable_prefix_caching, config.enable_prefix_caching),
        SameScalar(OrDefault(prefix_caching.mamba_cache_mode, None), OrDefault(config.mamba_cache_mode, None)),
        SameScalar(OrDefault(prefix_caching.prefix_match_unit, None), OrDefault(config.prefix_match_unit, None)),
    )


@binding("bundle")
def evidence_and_scheduler(bundle):
    """Every record's evidence with the scheduler record of its DP rank and phase."""
    schedulers = bundle.of_kind("scheduler")
    for document in bundle.documents:
        if document.kind not in ("worker", "scheduler") or document.role == "probe":
            continue
        record = document.obj
        for scheduler in schedulers:
            if scheduler.role != "probe" and scheduler.obj.dp_rank == record.dp_rank and scheduler.obj.phase == record.phase:
                if record.prefix_caching not in (ABSENT, None):
                    yield Instance("$.prefix_caching", (record.prefix_caching, scheduler.obj.cache), file=document.file)


@rule(
    id="PC006",
    message="runtime prefix-caching evidence contradicts the scheduler block sizes",
    over=evidence_and_scheduler,
    after=("PC001", "PC004"),
    source=_RESOLVE + " (the scheduler holds the resolved sizes)",
)
def evidence_matches_scheduler(prefix_caching, scheduler_cache):
    """The evidence's hash and scheduler block sizes are the scheduler's."""
    return And(SameScalar(prefix_caching.hash_block_size, scheduler_cache.hash_block_size),
               SameScalar(prefix_caching.scheduler_block_size, scheduler_cache.scheduler_block_size))


def _spec(group):
    return group.spec if group.spec not in (ABSENT, None) else None


def _prefix_cacheable(group) -> bool:
    """``spec.prefix_cacheable``: False for rings (and bounded-replay SWA-MLA, not recorded)."""
    spec = _spec(group)
    return (spec.spec_type if spec is not None else group.spec_type) != "CircularBufferSpec"


def _dcp_sharded(group):
    spec = _spec(group)
    if spec is not None:
        return OrDefault(spec.dcp_sharded, spec.spec_type not in ("MambaSpec", "CircularBufferSpec"))
    return group.spec_type not in ("MambaSpec", "CircularBufferSpec")


def _block(group):
    spec = _spec(group)
    return spec.block_size if spec is not None else group.block_size_tokens


@binding("scheduler")
def scheduler_block_sizes(record):
    """A scheduler's groups, sizes and settings."""
    yield Instance("$.cache.scheduler_block_size", (record.cache, record.resolved_config),
                   {"scheduler": scheduler_name(record)})


@rule(
    id="PC007",
    message="scheduler block sizes contradict its cache groups",
    over=scheduler_block_sizes,
    after=("SC001", "PC002", "PC003", "PC004"),
    source=_RESOLVE + "; :921-950 (resolve_cache_hit_alignment_tokens); vllm/v1/engine/core.py:334-352",
)
def block_sizes_match_groups(cache, config):
    """The recorded block size, scheduler block size, hash block size and cache-hit alignment are
    what vLLM resolves from the scheduler's groups, and vLLM would not refuse them:

    * one group: both sizes are ``block_size * dcp`` (dcp 1 unless the spec is DCP-sharded), and
      with prefix caching on a ``prefix_match_unit`` other than that size is a start-up refusal;
    * several groups: the scheduler block is the lcm of the group blocks; the hash block is that lcm
      with prefix caching off or a Mamba spec not in align mode, else ``prefix_match_unit`` or the
      gcd of the prefix-cacheable group blocks, which it must divide; the cache-hit alignment (the
      hash block with partial hash hits, else the scheduler block) is a multiple of every cacheable
      spec's ``tokens_per_state``.
    """
    groups = cache.groups
    dcp = OrDefault(config.decode_context_parallel_size, 1)
    caching = config.enable_prefix_caching == True  # noqa: E712
    unit = config.prefix_match_unit
    cacheable = [g for g in groups if _prefix_cacheable(g)] or list(groups)
    engine_block = min(_block(g) for g in cacheable) if cacheable else config.block_size
    checks = [cache.block_size == engine_block, config.block_size == cache.block_size]
    if len(groups) <= 1:
        size = cache.block_size * If(_dcp_sharded(groups[0]), dcp, 1) if groups else cache.block_size
        checks += [cache.scheduler_block_size == size, cache.hash_block_size == size,
                   Not(And(len(groups) == 1, caching, Present(unit), ValueOf(unit) != size))]
        if cache.cache_hit_alignment_tokens not in (ABSENT, None):
            checks.append(cache.cache_hit_alignment_tokens == cache.scheduler_block_size)
        return And(*checks)
    sizes = [_block(g) * If(_dcp_sharded(g), dcp, 1) for g in groups]
    scheduler_block = lcm(*sizes)
    hashing = [size for g, size in zip(groups, sizes) if _prefix_cacheable(g)] or sizes
    mamba_specs = [s for s in (_spec(g) for g in groups) if s is not None and s.spec_type == "MambaSpec"]
    any_mamba_not_align = Or(*[Not(And(Present(s.mamba_cache_mode), s.mamba_cache_mode == "align")) for s in mamba_specs])
    hashed = And(caching, Not(any_mamba_not_align))
    hash_block = If(hashed, If(Present(unit), ValueOf(unit), gcd(*hashing)), scheduler_block)
    partial = And(hashed, Or(*[
        And(Present(s.mamba_cache_mode), s.mamba_cache_mode == "align",
            If(dcp == 1, s.block_size > hash_block, s.block_size >= hash_block))
        for s in mamba_specs
    ]))
    hit_alignment = If(partial, hash_block, scheduler_block)
    per_state = [s.tokens_per_state for g in groups if _prefix_cacheable(g) for s in [_spec(g)] if s is not None]
    checks += [
        cache.scheduler_block_size == scheduler_block,
        cache.hash_block_size == hash_block,
        Implies(hashed, And(hash_block > 0, *[mod(size, hash_block) == 0 for size in hashing])),
        Implies(hashed, And(*[Implies(ValueOf(t) > 1, mod(hit_alignment, ValueOf(t)) == 0) for t in per_state])),
    ]
    if cache.cache_hit_alignment_tokens not in (ABSENT, None):
        fine_grained = And(*[
            Or(size == hash_block, _spec_type(g) in ("FullAttentionSpec", "MLAAttentionSpec", "HiddenStateCacheSpec",
                                                     "SinkFullAttentionSpec", "MambaSpec"))
            for g, size in zip(groups, sizes) if _prefix_cacheable(g)
        ])
        expected = If(And(caching, partial, fine_grained), hash_block, scheduler_block)
        checks.append(cache.cache_hit_alignment_tokens == expected)
    return And(*checks)


def _spec_type(group) -> str:
    spec = _spec(group)
    return spec.spec_type if spec is not None else group.spec_type


# -------------------------------------------------------------------------------------------
# Phases against the accepted probe (documents checked with --probe)


@binding("bundle")
def records_and_probe(bundle):
    """Each checked record with the accepted probe's record of the same kind and ranks."""
    probes = [d for d in bundle.documents if d.role == "probe" and d.kind in ("worker", "scheduler")]
    if not probes:
        return
    for document in bundle.documents:
        if document.role == "probe" or document.kind not in ("worker", "scheduler"):
            continue
        record = document.obj
        for probe in probes:
            if probe.kind == document.kind and _ranks(probe.obj) == _ranks(record):
                phase = record.phase if record.phase not in (ABSENT, None) else "record"
                yield Instance("$", (record, probe.obj), {"phase": phase}, file=document.file)


def _ranks(record):
    return (record.dp_rank, getattr(record, "tp_rank", None), getattr(record, "pp_rank", None))


def _shown(value) -> str:
    """An evidence value as its JSON text (``absent`` for a missing key)."""
    return "absent" if value is ABSENT else json.dumps(value)


def _explain_probe_settings(record, probe):
    """Each setting that differs, with the record's value and the probe's."""
    mine, theirs = record.prefix_caching, probe.prefix_caching
    if mine in (ABSENT, None) or theirs in (ABSENT, None):
        pairs = [("prefix_caching", "present" if mine not in (ABSENT, None) else _shown(mine),
                  "present" if theirs not in (ABSENT, None) else _shown(theirs))]
    else:
        pairs = [(key, _shown(getattr(mine, key)), _shown(getattr(theirs, key))) for key in _EVIDENCE_KEYS
                 if not SameScalar(getattr(mine, key), getattr(theirs, key))]
    return {"differences": "; ".join(f"{key} {value} (probe {probe_value})" for key, value, probe_value in pairs)}


@rule(
    id="PC008",
    message="{phase}: runtime prefix-caching settings differ from the accepted probe: {differences}",
    over=records_and_probe,
    field="prefix_caching",
    after=("PC001",),
    explain=_explain_probe_settings,
    source="vllm/config/cache.py (prefix caching is a start-up setting; a phase runs the engine the probe measured)",
)
def settings_match_probe(record, probe):
    """Prefix caching, Mamba mode, hash and scheduler block sizes and unit equal the probe's."""
    mine, theirs = record.prefix_caching, probe.prefix_caching
    if mine in (ABSENT, None) or theirs in (ABSENT, None):
        return mine in (ABSENT, None) and theirs in (ABSENT, None)
    return And(*[SameScalar(getattr(mine, key), getattr(theirs, key)) for key in _EVIDENCE_KEYS])


_GEOMETRY_SPEC_FIELDS = (
    "spec_type", "page_size_bytes", "num_kv_heads", "head_size", "head_size_v", "dtype", "sliding_window",
    "attention_chunk_size", "tokens_per_state", "state_content_bytes", "page_size_padded", "cache_role", "shapes",
    "dtypes", "mamba_type", "num_speculative_blocks", "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment",
)


def _same_value(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return same_list(a, b)
    return SameScalar(a, b)


@rule(
    id="PC009",
    message="{phase}: runtime cache group geometry differs from the accepted probe",
    over=records_and_probe,
    field="cache.groups",
    after=("PC008",),
    source="vllm/v1/core/kv_cache_planning.py:1607-1657 (the groups follow from the model and settings)",
)
def geometry_matches_probe(record, probe):
    """The same groups of the same layers and specs; a state group may differ only in its block
    size and Mamba mode (a phase may run another Mamba mode), its layer specs stay compared."""
    mine, theirs = record.cache.groups, probe.cache.groups
    if len(mine) != len(theirs):
        return False
    checks = []
    for a, b in zip(mine, theirs):
        state = getattr(a, "kind", None) == "state" or _spec_type_any(a) in ("MambaSpec", "CircularBufferSpec")
        checks += [a.layer_names == b.layer_names, a.spec_type == b.spec_type, a.page_size_bytes == b.page_size_bytes]
        if not state:
            checks.append(a.block_size_tokens == b.block_size_tokens)
        specs_a = _specs(a)
        specs_b = _specs(b)
        if set(specs_a) != set(specs_b):
            return False
        for name, spec in specs_a.items():
            other = specs_b[name]
            checks += [_same_value(getattr(spec, f), getattr(other, f)) for f in _GEOMETRY_SPEC_FIELDS]
            if not state:
                checks.append(spec.block_size == other.block_size)
    return And(*checks)


def _specs(group) -> dict:
    if hasattr(group, "layer_specs"):
        return dict(group.layer_specs) if group.layer_specs not in (ABSENT, None) else {}
    return {"spec": group.spec} if group.spec not in (ABSENT, None) else {}


def _spec_type_any(group) -> str:
    specs = _specs(group)
    return next(iter(specs.values())).spec_type if specs else group.spec_type
