"""ST: storage policies of a profile and the layouts that carry them (seed 000; issue #16).

A profile's ``state_storage`` names how the Mamba state is stored: ``full_state`` (one state page
per working state, checkpoint and draft token: vLLM without ReplaySSM), ``triton_replayssm`` and
``flashinfer_replayssm`` (one state plus replay rings of x, dt and B: ``--use-replayssm``), or
``kda_recoverssm`` (a KDA model's speculative decode with ``--use-replayssm``). The state backends
are the support table's (``kvproof/sim/startup/state_support.py``, ``state_backend``).

Seed 000: the ``mamba_align`` layout (the observed Mamba align-mode pool, ``mamba_cache``) requires
``state_storage: full_state``; ReplaySSM and RecoverSSM profiles have their own rules and use the
``unmodeled`` layout, which serves timing queries while capacity sizing and replay refuse it. The
seed gives no error text for any of these cases (docs/state-storage.md): every text here is
kvproof's, except those of vLLM 0.33.0's ``validate_mamba_cached_kernel`` (ST020-ST024, the
support table's texts). docs/formats.md gives the fields, docs/rules.md each rule.
"""

from __future__ import annotations

from ..logic import And, If, Implies, Not, Or, Present, ValueOf, mod
from ..models.codec import present
from ..models.profile import CACHE_LAYOUTS, STATE_STORAGE_POLICIES
from ..sim.startup.replay_ring import ring_length as physical_ring_length
from ..sim.startup.state_support import REFUSALS
from .core import Instance, binding, rule

__all__ = ["REPLAY_ROLE", "replay_document"]

#: The role of a profile document that is being sized or replayed (``kvproof plan``): ST028 binds it.
REPLAY_ROLE = "replay"

_SEED = "seed 000 (aisimulate mamba_align PR: the profile requires state_storage: full_state; the seed gives no text)"
_SPEC = "vllm/model_executor/layers/mamba/abstract.py:72-91 (MambaBase.get_kv_cache_spec: num_speculative_blocks)"
_RING = "vllm/model_executor/layers/mamba/mamba_utils.py:214-246 (append_replayssm_ring), mamba_mixer2.py:1134-1155"
_ALIGN = ("vllm/platforms/interface.py:940-1137 (_align_hybrid_block_size: attention pages of mamba_block_size "
          "tokens), vllm/v1/core/kv_cache_planning.py:574-605 (one pool block)")
_REPLAYSSM = ("triton_replayssm", "flashinfer_replayssm")
_CACHED_KERNELS = ("triton_replayssm", "flashinfer_replayssm", "kda_recoverssm")


def replay_document(document):
    """The profile document as sizing and replay read it (ST028 judges it)."""
    import attrs

    return attrs.evolve(document, role=REPLAY_ROLE)


def _is(value, wanted: str):
    """An optional string field holds ``wanted``."""
    return And(Present(value), value == wanted)


def _one_of(value, names):
    return And(Present(value), Or(*[value == name for name in names]))


@binding("profile")
def resources(profile):
    """A profile's resources with the structure the layout rules read."""
    r = profile.resources
    yield Instance("$.resources", (r, present(r.mamba_cache), present(r.runtime_memory)))


@rule(
    id="ST001",
    message="state_storage {policy} is not a storage policy: 'full_state', 'triton_replayssm', "
    "'flashinfer_replayssm' or 'kda_recoverssm'",
    over=resources,
    field="state_storage",
    explain=lambda r, *_: {"policy": repr(r.state_storage)},
    source=_SEED + "; the state backends of vllm/config/vllm.py:3454-3553 (kvproof/sim/startup/state_support.py)",
)
def policy_known(r, has_mamba_cache, has_memory):
    """An unsupported storage policy (seed 000's negative case) is refused by name."""
    return Implies(Present(r.state_storage), Or(*[r.state_storage == p for p in STATE_STORAGE_POLICIES]))


@rule(
    id="ST002",
    message="cache_layout {layout} requires a state_storage policy",
    over=resources,
    field="state_storage",
    explain=lambda r, *_: {"layout": r.cache_layout},
    source=_SEED + " (a missing policy is refused)",
)
def policy_given(r, has_mamba_cache, has_memory):
    """The state layouts (``mamba_align``, ``unmodeled``) say how the state is stored."""
    return Implies(Or(r.cache_layout == "mamba_align", r.cache_layout == "unmodeled"), Present(r.state_storage))


@rule(
    id="ST003",
    message="cache_layout mamba_align requires state_storage: full_state; ReplaySSM and RecoverSSM profiles use the "
    "unmodeled layout (timing queries only)",
    over=resources,
    field="state_storage",
    after=("ST001", "ST002"),
    source=_SEED + "; " + _SPEC + " (ReplaySSM: one state and rings, not one page per state)",
)
def mamba_align_is_full_state(r, has_mamba_cache, has_memory):
    """The observed align-mode geometry sizes one page per working state, checkpoint and draft
    token: full-state storage only."""
    return Implies(r.cache_layout == "mamba_align", _is(r.state_storage, "full_state"))


@binding("profile")
def state_fields(profile):
    """Each state field a profile states, with its layout."""
    r = profile.resources
    # a scalar's presence is a value (the body reads it), an object's is structure (the binding)
    yield Instance("$.resources", (r.cache_layout, r.state_storage), {"field": "state_storage"},
                   blame="$.resources.state_storage")
    for name in ("mamba_cache", "state_cache"):
        if present(getattr(r, name)):
            yield Instance("$.resources", (r.cache_layout, True), {"field": name}, blame=f"$.resources.{name}")


@rule(
    id="ST004",
    message="{field} belongs to the mamba_align and unmodeled layouts",
    over=state_fields,
    source=_SEED + " (additive fields of the new layouts; grouped and linear profiles keep their contract)",
)
def state_fields_on_state_layouts(layout, value):
    """A grouped or linear profile's consumer ignores the state fields: stating them there is a
    profile of another layout."""
    return Implies(Present(value), Or(layout == "mamba_align", layout == "unmodeled"))


@rule(
    id="ST005",
    message="cache_layout mamba_align requires mamba_cache (the observed geometry) and runtime_memory",
    over=resources,
    field="cache_layout",
    source=_SEED + " (the observed layout's physical geometry drives replay)",
)
def mamba_align_has_geometry(r, has_mamba_cache, has_memory):
    """Sizing and replay of the layout read ``mamba_cache`` and the runtime pool."""
    return Implies(r.cache_layout == "mamba_align", And(has_mamba_cache, has_memory))


@binding("profile")
def align_memory(profile):
    r = profile.resources
    if present(r.runtime_memory):
        yield Instance("$.resources.runtime_memory", (r.cache_layout, r.runtime_memory))


@rule(
    id="ST006",
    message="cache_layout mamba_align requires enable_prefix_caching true and mamba_cache_mode 'align'",
    over=align_memory,
    field="mamba_cache_mode",
    after=("PF015", "PF016"),
    source=_SEED + " (supported scope: observed vLLM profiles with prefix caching); "
    "vllm/model_executor/models/config.py:763-787 (align with prefix caching)",
)
def mamba_align_with_prefix_caching(layout, memory):
    """The layout is vLLM's align mode, which prefix caching selects."""
    return Implies(layout == "mamba_align",
                   And(_is(memory.mamba_cache_mode, "align"), Present(memory.enable_prefix_caching),
                       memory.enable_prefix_caching == True))  # noqa: E712 - a z3 term in the solver


@binding("profile")
def unmodeled_geometry(profile):
    r = profile.resources
    groups = present(r.cache_groups) and len(r.cache_groups) > 0
    yield Instance("$.resources", (r.cache_layout, groups, r.kv_bytes_per_token), blame="$.resources.cache_layout")


@rule(
    id="ST007",
    message="cache_layout unmodeled carries no cache geometry: cache_groups and kv_bytes_per_token must be absent",
    over=unmodeled_geometry,
    source=_SEED + " (unmodeled: timing queries only)",
)
def unmodeled_has_no_geometry(layout, has_groups, rate):
    """A sizing consumer must not find groups or a token rate in a timing-only profile."""
    return Implies(layout == "unmodeled", And(not has_groups, Not(Present(rate))))


# -- the observed geometry ----------------------------------------------------------------------

_POSITIVE = ("block_size_tokens", "hash_block_size_tokens", "page_size_bytes")
_COUNTS = ("num_speculative_tokens", "num_speculative_blocks")
_RING_FIELDS = ("buffer_len", "length_tokens", "bytes_per_token", "bytes")


@binding("profile")
def mamba_cache_values(profile):
    cache = profile.resources.mamba_cache
    if not present(cache):
        return
    for name in _POSITIVE + _COUNTS:
        yield Instance(f"$.resources.mamba_cache.{name}", (getattr(cache, name), name in _COUNTS),
                       {"field": f"mamba_cache.{name}", "bound": "0 or more" if name in _COUNTS else "positive"})
    if present(cache.replay_ring):
        for name in _RING_FIELDS:
            yield Instance(f"$.resources.mamba_cache.replay_ring.{name}", (getattr(cache.replay_ring, name), False),
                           {"field": f"mamba_cache.replay_ring.{name}", "bound": "positive"})


@rule(
    id="ST008",
    message="{field} must be {bound}",
    over=mamba_cache_values,
    source="vllm/v1/kv_cache_interface.py:201-217 (block_size), :1143-1153 (num_speculative_blocks); " + _RING
    + "; vllm/config/cache.py:318 (replayssm_buffer_len: Field(gt=0))",
)
def mamba_cache_value_in_range(value, count):
    """Sizes and lengths are positive; the draft depth and the speculative states may be 0."""
    return If(count, value >= 0, value > 0)


@binding("profile")
def mamba_cache_of(profile):
    r = profile.resources
    if present(r.mamba_cache):
        yield Instance("$.resources.mamba_cache", (r.mamba_cache, r.state_storage),
                       {"policy": r.state_storage if present(r.state_storage) else "null"})


_VALUES = ("ST008",)


@rule(
    id="ST009",
    message="Invalid prefix_match_unit={unit}; a state page of {block} tokens is not a whole number of hash units "
    "(fractional pages: prefix-cacheable KV cache group block sizes must be divisible by prefix_match_unit)",
    over=mamba_cache_of,
    field="hash_block_size_tokens",
    after=_VALUES,
    explain=lambda cache, _: {"unit": cache.hash_block_size_tokens, "block": cache.block_size_tokens},
    source="vllm/v1/core/kv_cache_utils.py:884-894 (resolve_kv_cache_block_sizes); " + _SEED + " (fractional pages)",
)
def whole_hash_units(cache, policy):
    """A page holds whole hash units, else hits would end inside a unit."""
    unit = cache.hash_block_size_tokens
    return Implies(unit > 0, mod(cache.block_size_tokens, If(unit > 0, unit, 1)) == 0)


@binding("profile")
def memory_and_mamba_cache(profile):
    r = profile.resources
    if present(r.mamba_cache) and present(r.runtime_memory):
        yield Instance("$.resources.runtime_memory", (r.runtime_memory, r.mamba_cache),
                       {"page": r.mamba_cache.page_size_bytes}, blame="$.resources.runtime_memory.kv_cache_bytes")


@rule(
    id="ST010",
    message="kv_cache_bytes must be a whole number of mamba_cache pages of {page} bytes (fractional pages)",
    over=memory_and_mamba_cache,
    after=_VALUES + ("PF018",),
    source="vllm/v1/core/kv_cache_planning.py:1561-1574 (num_blocks = available // bytes_per_block); "
    + _SEED + " (fractional pages)",
)
def whole_pages(memory, cache):
    """The pool is whole pages of the observed page size."""
    page = cache.page_size_bytes
    return Implies(page > 0, mod(memory.kv_cache_bytes, If(page > 0, page, 1)) == 0)


@binding("profile")
def groups_with_mamba_cache(profile):
    """Each align-mode group (full attention, a Mamba state group) of a mamba_align profile, with
    the observed geometry: its block and its page."""
    r = profile.resources
    if not present(r.mamba_cache) or not present(r.cache_groups):
        return
    for index, group in enumerate(r.cache_groups):
        path = f"$.resources.cache_groups[{index}]"
        for name in ("block_size_tokens", "page_size_bytes"):
            yield Instance(path, (r.cache_layout, group, getattr(group, name), getattr(r.mamba_cache, name)),
                           {"name": group.name, "field": name}, blame=f"{path}.{name}")


@rule(
    id="ST011",
    message="cache group {name} {field} {value} differs from the observed mamba_cache.{field} {observed}",
    over=groups_with_mamba_cache,
    after=_VALUES + ("PF009", "PF010"),
    explain=lambda layout, group, value, observed: {"value": value, "observed": observed},
    source=_ALIGN,
)
def group_matches_observed(layout, group, value, observed):
    """In align mode every full-attention and Mamba group is paged by the Mamba block, and every
    group's page is the pool block. A ring or a windowed group keeps its own block."""
    mamba_or_full = Or(And(group.kind == "attention", Not(Present(group.sliding_window))),
                       And(group.kind == "state", Present(group.prefill_checkpoint_blocks)))
    return Implies(And(layout == "mamba_align", mamba_or_full), value == observed)


@binding("profile")
def state_groups_with_mamba_cache(profile):
    r = profile.resources
    if not present(r.mamba_cache) or not present(r.cache_groups):
        return
    for index, group in enumerate(r.cache_groups):
        yield Instance(f"$.resources.cache_groups[{index}]", (r.cache_layout, group, r.mamba_cache),
                       {"name": group.name}, blame=f"$.resources.cache_groups[{index}].blocks_per_request")


@rule(
    id="ST012",
    message="state cache group {name} holds blocks_per_request {n}, not 1 + mamba_cache.num_speculative_blocks ({k})",
    over=state_groups_with_mamba_cache,
    after=_VALUES + ("PF001", "PF003"),
    explain=lambda layout, group, cache: {"n": group.blocks_per_request, "k": 1 + cache.num_speculative_blocks},
    source="vllm/v1/kv_cache_interface.py:1143-1153 (MambaSpec.max_num_blocks_per_req = 1 + num_speculative_blocks)",
)
def state_blocks_match_observed(layout, group, cache):
    """A Mamba group's working state and its speculative scratch states are the observed ones."""
    mamba = And(group.kind == "state", Present(group.prefill_checkpoint_blocks))
    return Implies(And(layout == "mamba_align", mamba),
                   ValueOf(group.blocks_per_request) == 1 + cache.num_speculative_blocks)


@binding("profile")
def hash_units(profile):
    r = profile.resources
    if present(r.mamba_cache) and present(r.runtime_memory):
        yield Instance("$.resources.mamba_cache", (r.runtime_memory, r.mamba_cache),
                       blame="$.resources.mamba_cache.hash_block_size_tokens")


@rule(
    id="ST013",
    message="mamba_cache.hash_block_size_tokens {unit} differs from runtime_memory.hash_block_size_tokens {runtime}",
    over=hash_units,
    after=_VALUES + ("PF017",),
    explain=lambda memory, cache: {"unit": cache.hash_block_size_tokens,
                                   "runtime": memory.hash_block_size_tokens if present(memory.hash_block_size_tokens)
                                   else "null"},
    source="vllm/v1/core/kv_cache_utils.py:817-905 (one hash_block_size per engine)",
)
def hash_unit_matches_runtime(memory, cache):
    """The engine hashes at one granularity; both places name it."""
    runtime = memory.hash_block_size_tokens
    return Implies(Present(runtime), ValueOf(runtime) == cache.hash_block_size_tokens)


# -- storage policies ---------------------------------------------------------------------------


@rule(
    id="ST014",
    message="state_storage full_state keeps one state per draft token: mamba_cache.num_speculative_blocks {blocks} "
    "must equal num_speculative_tokens {tokens}",
    over=mamba_cache_of,
    field="num_speculative_blocks",
    after=_VALUES + ("ST001",),
    explain=lambda cache, _: {"blocks": cache.num_speculative_blocks, "tokens": cache.num_speculative_tokens},
    source=_SPEC + " (num_speculative_blocks = num_speculative_tokens without ReplaySSM)",
)
def full_state_speculative_blocks(cache, policy):
    """Without ReplaySSM vLLM gives a Mamba spec one scratch state per draft token."""
    return Implies(_is(policy, "full_state"), cache.num_speculative_blocks == cache.num_speculative_tokens)


@rule(
    id="ST015",
    message="ReplaySSM sets separate speculative blocks to zero: mamba_cache.num_speculative_blocks must be 0 with "
    "state_storage {policy}",
    over=mamba_cache_of,
    field="num_speculative_blocks",
    after=_VALUES + ("ST001",),
    source=_SPEC + " (0 with use_replayssm, RecoverSSM included); seed 000 (vLLM #55688 at d9cd1fd1)",
)
def replayssm_no_speculative_blocks(cache, policy):
    """The seed's own words: ReplaySSM verifies the window off one checkpoint."""
    return Implies(_one_of(policy, _CACHED_KERNELS), cache.num_speculative_blocks == 0)


@binding("profile")
def ring_presence(profile):
    r = profile.resources
    if present(r.mamba_cache):
        yield Instance("$.resources.mamba_cache", (r.state_storage, present(r.mamba_cache.replay_ring)),
                       {"policy": r.state_storage if present(r.state_storage) else "null"},
                       blame="$.resources.mamba_cache.replay_ring")


@rule(
    id="ST016",
    message="state_storage {policy} requires mamba_cache.replay_ring (the x, dt and B replay rings)",
    over=ring_presence,
    after=("ST001",),
    source=_RING,
)
def replayssm_has_ring(policy, has_ring):
    """ReplaySSM keeps the x, dt and B history of the window in rings inside the state."""
    return Implies(_one_of(policy, _REPLAYSSM), has_ring)


@rule(
    id="ST017",
    message="mamba_cache.replay_ring belongs to ReplaySSM state storage, not to state_storage {policy}",
    over=ring_presence,
    after=("ST001",),
    source=_RING + " (rings only with use_replayssm); the seed gives no RecoverSSM ring",
)
def ring_only_with_replayssm(policy, has_ring):
    """Full state keeps no ring; the seed gives none for RecoverSSM either."""
    return Implies(has_ring, _one_of(policy, _REPLAYSSM))


@binding("profile")
def replay_rings(profile):
    r = profile.resources
    cache = r.mamba_cache
    if present(cache) and present(cache.replay_ring):
        yield Instance("$.resources.mamba_cache.replay_ring", (r, cache, cache.replay_ring),
                       {"policy": r.state_storage if present(r.state_storage) else "null"})


def _ring_length(r, cache, ring):
    """The physical ring: the window, FlashInfer ``+ 1 + num_speculative_tokens`` (mamba_utils.py:234-237),
    as the simulator sizes it."""
    return physical_ring_length(ring.buffer_len, _is(r.state_storage, "flashinfer_replayssm"), cache.num_speculative_tokens)


_RINGS = _VALUES + ("ST001", "ST016", "ST017")


@rule(
    id="ST018",
    message="replay_ring.length_tokens {length} is not the {policy} ring length {expected} (FlashInfer: "
    "replayssm_buffer_len + 1 + num_speculative_tokens; Triton: replayssm_buffer_len)",
    over=replay_rings,
    field="length_tokens",
    after=_RINGS,
    explain=lambda r, cache, ring: {"length": ring.length_tokens, "expected": _ring_length(r, cache, ring)},
    source=_RING + "; seed 000/004 (the FlashInfer replay ring grows with draft depth)",
)
def ring_length(r, cache, ring):
    """FlashInfer keeps the live window and the current verify window together: its ring grows with the draft depth."""
    return ring.length_tokens == _ring_length(r, cache, ring)


@rule(
    id="ST019",
    message="replay_ring.bytes {bytes} is not length_tokens x bytes_per_token ({expected})",
    over=replay_rings,
    field="bytes",
    after=_RINGS,
    explain=lambda r, cache, ring: {"bytes": ring.bytes, "expected": ring.length_tokens * ring.bytes_per_token},
    source=_RING + " (every ring tensor has length_tokens slots)",
)
def ring_bytes(r, cache, ring):
    """Every ring tensor has one slot per ring token."""
    return ring.bytes == ring.length_tokens * ring.bytes_per_token


def _table(rule_id: str) -> str:
    return REFUSALS[rule_id].text


@rule(
    id="ST020",
    message=_table("SS006"),
    over=replay_rings,
    field="buffer_len",
    after=_RINGS,
    source=REFUSALS["SS006"].source + " (the support table's SS006)",
)
def flashinfer_buffer_bound(r, cache, ring):
    """The support table's SS006 on the profile's ring window."""
    return Implies(_is(r.state_storage, "flashinfer_replayssm"), ring.buffer_len <= 16)


@rule(
    id="ST021",
    message=_table("SS014"),
    over=replay_rings,
    field="buffer_len",
    after=_RINGS + ("ST020",),
    explain=lambda r, cache, ring: {"query_len": 1 + cache.num_speculative_tokens, "buffer_len": ring.buffer_len},
    source=REFUSALS["SS014"].source + " (the support table's SS014)",
)
def flashinfer_buffer_holds_query(r, cache, ring):
    """The support table's SS014: the window holds one verify query (1 + drafts)."""
    return Implies(And(_is(r.state_storage, "flashinfer_replayssm"), cache.num_speculative_tokens > 0),
                   ring.buffer_len >= 1 + cache.num_speculative_tokens)


@rule(
    id="ST022",
    message=_table("SS015"),
    over=mamba_cache_of,
    field="num_speculative_tokens",
    after=_VALUES + ("ST001",),
    source=REFUSALS["SS015"].source + " (the support table's SS015)",
)
def triton_without_speculation(cache, policy):
    """The support table's SS015: Triton ReplaySSM does not decode speculatively."""
    return Implies(_is(policy, "triton_replayssm"), cache.num_speculative_tokens == 0)


@binding("profile")
def memory_and_policy(profile):
    r = profile.resources
    if present(r.runtime_memory) and present(r.mamba_cache):
        yield Instance("$.resources.runtime_memory", (r.runtime_memory, r.mamba_cache, r.state_storage),
                       blame="$.resources.runtime_memory.mamba_cache_mode")


def _align(memory):
    return _is(memory.mamba_cache_mode, "align")


@rule(
    id="ST023",
    message=_table("SS016"),
    over=memory_and_policy,
    after=_VALUES + ("ST001", "PF015"),
    source=REFUSALS["SS016"].source + " (the support table's SS016)",
)
def flashinfer_without_prefix_caching(memory, cache, policy):
    """The support table's SS016: FlashInfer ReplaySSM without drafts refuses align mode (0.33.0)."""
    return Not(And(_is(policy, "flashinfer_replayssm"), cache.num_speculative_tokens == 0, _align(memory)))


@rule(
    id="ST024",
    message=_table("SS012"),
    over=memory_and_policy,
    after=_VALUES + ("ST001", "PF015"),
    source=REFUSALS["SS012"].source + " (the support table's SS012)",
)
def flashinfer_speculative_without_prefix_caching(memory, cache, policy):
    """The support table's SS012: with drafts FlashInfer ReplaySSM refuses align mode (0.33.0)."""
    return Not(And(_is(policy, "flashinfer_replayssm"), cache.num_speculative_tokens > 0, _align(memory)))


@rule(
    id="ST025",
    message="state_storage kda_recoverssm requires speculative decoding: mamba_cache.num_speculative_tokens must be "
    "at least 1",
    over=mamba_cache_of,
    field="num_speculative_tokens",
    after=_VALUES + ("ST001",),
    source="vllm/config/vllm.py:3468-3470 (use_kda_recoverssm = num_speculative_tokens > 0 and is_kda_model)",
)
def recoverssm_is_speculative(cache, policy):
    """Without drafts a KDA model runs the ReplaySSM kernels, not RecoverSSM."""
    return Implies(_is(policy, "kda_recoverssm"), cache.num_speculative_tokens > 0)


# -- manual geometry against the observed one --------------------------------------------------

_MANUAL = (("num_speculative_states", "num_speculative_blocks"), ("prefix_match_unit", "hash_block_size_tokens"),
           ("block_size_tokens", "block_size_tokens"))


@binding("profile")
def manual_speculation(profile):
    r = profile.resources
    if present(r.state_cache) and present(r.mamba_cache):
        yield Instance("$.resources.state_cache.num_speculative_states",
                       (r.state_cache.num_speculative_states, r.mamba_cache.num_speculative_blocks))


@rule(
    id="ST026",
    message="state_cache.num_speculative_states {manual} does not match the profile's speculative states "
    "(mamba_cache.num_speculative_blocks {observed})",
    over=manual_speculation,
    after=_VALUES,
    explain=lambda manual, observed: {"manual": manual, "observed": observed},
    source=_SPEC + "; seed 000 (a speculation depth that does not match the profile is refused)",
)
def manual_speculation_matches(manual, observed):
    """A stated scratch-state count is the observed one."""
    return Implies(Present(manual), ValueOf(manual) == observed)


@binding("profile")
def manual_geometry(profile):
    r = profile.resources
    if not (present(r.state_cache) and present(r.mamba_cache)):
        return
    for manual, observed in _MANUAL[1:]:
        yield Instance(f"$.resources.state_cache.{manual}",
                       (getattr(r.state_cache, manual), getattr(r.mamba_cache, observed)),
                       {"field": manual, "observed_field": observed})


@rule(
    id="ST027",
    message="manual state_cache.{field} {manual} conflicts with the observed mamba_cache.{observed_field} {observed}",
    over=manual_geometry,
    after=_VALUES,
    explain=lambda manual, observed: {"manual": manual, "observed": observed},
    source=_SEED + " (manual geometry that conflicts with the profile is refused); " + _ALIGN,
)
def manual_geometry_matches(manual, observed):
    """A stated hash unit or page is the observed one."""
    return Implies(Present(manual), ValueOf(manual) == observed)


# -- sizing and replay --------------------------------------------------------------------------


@binding("bundle")
def replayed_profiles(bundle):
    """Profiles being sized or replayed (``kvproof plan`` checks its profile with role
    ``replay``; no document of ``check`` has it)."""
    for document in bundle.documents:
        if document.kind == "profile" and document.role == REPLAY_ROLE:
            yield Instance("$.resources.cache_layout", (document.obj.resources.cache_layout,), file=document.file)


@rule(
    id="ST028",
    message="cache_layout unmodeled is for timing queries only: capacity sizing and replay refuse it",
    over=replayed_profiles,
    source=_SEED + " (capacity sizing and replay reject the unmodeled layout)",
)
def replay_needs_modeled_layout(layout):
    """Sizing and replay need a modeled layout; ``kvproof plan`` of an unmodeled profile is refused."""
    return layout != "unmodeled"


assert set(CACHE_LAYOUTS) >= {"mamba_align", "unmodeled"}
