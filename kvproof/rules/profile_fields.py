"""PF: field rules of the FPM profile (cache groups and runtime memory).

The profile contract is seed 001's ``FpmCacheGroup`` / ``FpmRuntimeMemoryProfile``; what the
fields mean comes from vLLM 0.33.0: a state group's fixed block count is
``MambaSpec.max_num_blocks_per_req`` / ``CircularBufferSpec`` (one ring block), its checkpoint
fields are the KDA/Mamba layer's ``num_prefill_checkpoint_blocks`` and
``prefill_checkpoint_alignment``, and the Mamba modes are ``MambaCacheMode``.
"""

from __future__ import annotations

from ..logic import And, If, Implies, IntIs, Not, Or, Present, ValueOf, mod
from ..models.codec import ABSENT, MAX_SAFE_INT, present
from .core import Instance, binding, rule

MAX_U32 = 2**32 - 1

_STATE_SPEC = "vllm/v1/kv_cache_interface.py:1143-1153 (MambaSpec.max_num_blocks_per_req), :982-989 (CircularBufferSpec)"
_CHECKPOINT = "vllm/models/glm5next/common/kda.py:168-176, vllm/model_executor/layers/mamba/kda_checkpoint.py:9-10"


@binding("profile")
def cache_groups(profile):
    """Every cache group of a profile."""
    groups = profile.resources.cache_groups
    if groups is ABSENT or groups is None:
        return
    for index, group in enumerate(groups):
        yield Instance(f"$.resources.cache_groups[{index}]", (group,), {"name": group.name})


@binding("profile")
def runtime_memory(profile):
    """The runtime memory of a profile, when it has one."""
    memory = profile.resources.runtime_memory
    if memory is ABSENT or memory is None:
        return
    yield Instance("$.resources.runtime_memory", (memory,))


@binding("profile")
def byte_values(profile):
    """Every byte count of a profile: group pages and the runtime KV cache bytes."""
    for instance in cache_groups(profile):
        yield Instance(instance.subject, (instance.args[0].page_size_bytes,), blame=f"{instance.subject}.page_size_bytes")
    memory = profile.resources.runtime_memory
    if memory is not ABSENT and memory is not None:
        yield Instance("$.resources.runtime_memory", (memory.kv_cache_bytes,), blame="$.resources.runtime_memory.kv_cache_bytes")


@rule(
    id="PF001",
    message="state cache group requires a positive blocks_per_request",
    over=cache_groups,
    field="blocks_per_request",
    source=_STATE_SPEC,
)
def state_group_has_positive_count(group):
    """A state group holds a fixed number of pool blocks per running request: 1 + k for a Mamba
    group between block boundaries, 1 for a ring. Zero, a negative count and a missing count
    get the same text."""
    return Implies(group.kind == "state", IntIs(group.blocks_per_request, lambda n: n > 0))


@rule(
    id="PF002",
    message="state cache group cannot have a sliding_window",
    over=cache_groups,
    field="sliding_window",
    source=_STATE_SPEC,
)
def state_group_has_no_window(group):
    """A state group keeps no token history, so a window (even an explicit null one is fine) has
    no meaning for it."""
    return Implies(group.kind == "state", Not(Present(group.sliding_window)))


@rule(
    id="PF003",
    message="only state cache groups can have blocks_per_request",
    over=cache_groups,
    field="blocks_per_request",
    source="vllm/v1/kv_cache_interface.py:290-300 (attention rows grow with the request)",
)
def count_only_on_state_groups(group):
    """Attention and convolution groups grow with the request; a fixed count would be ignored."""
    return Implies(group.kind != "state", Not(Present(group.blocks_per_request)))


@rule(
    id="PF004",
    message="blocks_per_request must not exceed 2**32 - 1",
    over=cache_groups,
    field="blocks_per_request",
    after=("PF003",),
    source="FpmCacheGroup.blocks_per_request is a u32 (seed 001)",
)
def count_fits_u32(group):
    """The Rust twin reads the count as a u32."""
    return Implies(Present(group.blocks_per_request), ValueOf(group.blocks_per_request) <= MAX_U32)


@rule(
    id="PF005",
    message="only state cache groups can have prefill_checkpoint_blocks",
    over=cache_groups,
    field="prefill_checkpoint_blocks",
    source=_CHECKPOINT,
)
def checkpoint_only_on_state_groups(group):
    """Only a Mamba/KDA layer reserves a prefill checkpoint block."""
    return Implies(group.kind != "state", Not(Present(group.prefill_checkpoint_blocks)))


@rule(
    id="PF006",
    message="prefill_checkpoint_blocks must be 0 or 1",
    over=cache_groups,
    field="prefill_checkpoint_blocks",
    after=("PF005",),
    source=_CHECKPOINT + " (c = int(alignment is not None))",
)
def checkpoint_count_is_0_or_1(group):
    """vLLM 0.33.0 sets ``num_prefill_checkpoint_blocks = int(alignment is not None)``."""
    count = group.prefill_checkpoint_blocks
    return Implies(Present(count), Or(ValueOf(count) == 0, ValueOf(count) == 1))


@rule(
    id="PF007",
    message="prefill_checkpoint_alignment must be positive",
    over=cache_groups,
    field="prefill_checkpoint_alignment",
    source=_CHECKPOINT + " (FlashKDA: 16 tokens)",
)
def checkpoint_alignment_positive(group):
    """An alignment is a token count that checkpoint positions must be multiples of."""
    alignment = group.prefill_checkpoint_alignment
    return Implies(Present(alignment), ValueOf(alignment) > 0)


@rule(
    id="PF008",
    message="prefill_checkpoint_alignment requires prefill_checkpoint_blocks of 1",
    over=cache_groups,
    field="prefill_checkpoint_alignment",
    after=("PF005", "PF006", "PF007"),
    source=_CHECKPOINT + " (Triton: c = 0 and no alignment)",
)
def checkpoint_alignment_needs_count(group):
    """A layer without a checkpoint block has no alignment. A count of 1 without an alignment
    loads, as in the Rust twin (the alignment is evidence, not sizing)."""
    return Implies(Present(group.prefill_checkpoint_alignment), ValueOf(group.prefill_checkpoint_blocks) == 1)


@rule(
    id="PF009",
    message="cache group page_size_bytes must be positive",
    over=cache_groups,
    field="page_size_bytes",
    source="vllm/v1/kv_cache_interface.py:596-601 (AttentionSpec.page_size_bytes)",
)
def page_positive(group):
    """A page of zero bytes cannot hold a block."""
    return group.page_size_bytes > 0


@rule(
    id="PF010",
    message="cache group block_size_tokens must be positive",
    over=cache_groups,
    field="block_size_tokens",
    source="vllm/v1/kv_cache_interface.py:201-217 (KVCacheSpec.block_size)",
)
def block_positive(group):
    """Tokens per block; every per-request count divides by it."""
    return group.block_size_tokens > 0


@rule(
    id="PF011",
    message="byte values must not exceed 2**53",
    over=byte_values,
    expect="dead",
    reason="the loader refuses every integer past 2**53 (kvproof.models.codec.MAX_SAFE_INT), so no "
    "loaded profile reaches this rule; it guards profiles built through the Python API",
    source="FPM profile contract (seed 001): byte values stay exact in a float64",
)
def bytes_within_2_53(value):
    """Byte counts must stay exact in a JSON number (float64)."""
    return value <= MAX_SAFE_INT


@rule(
    id="PF012",
    message="convolution cache groups require a sliding_window",
    over=cache_groups,
    field="sliding_window",
    source="FpmCacheGroup::validate (seed 001 profile contract)",
)
def convolution_needs_window(group):
    """A convolution state keeps the last ``window`` tokens."""
    return Implies(group.kind == "convolution", Present(group.sliding_window))


@rule(
    id="PF013",
    message="sliding_window must be positive",
    over=cache_groups,
    field="sliding_window",
    after=("PF002",),
    source="vllm/v1/kv_cache_interface.py:900-916 (SlidingWindowSpec.sliding_window)",
)
def window_positive(group):
    """An omitted or null window means full history; a present one counts tokens."""
    return Implies(Present(group.sliding_window), ValueOf(group.sliding_window) > 0)


@rule(
    id="PF014",
    message="cache group num_layers must be positive",
    over=cache_groups,
    field="num_layers",
    source="vllm/v1/core/kv_cache_planning.py:1218-1230 (every group holds layers)",
)
def layers_positive(group):
    """A group without layers holds no cache."""
    return group.num_layers > 0


@rule(
    id="PF015",
    message="mamba_cache_mode must be 'none' or 'align' (vLLM 0.33.0 has no other mode)",
    over=runtime_memory,
    field="mamba_cache_mode",
    source="vllm/config/cache.py:176 (MambaCacheMode = Literal['align', 'none'])",
)
def mamba_mode_known(memory):
    """vLLM 0.33.0 refuses ``mamba_cache_mode='all'`` in its config validation."""
    mode = memory.mamba_cache_mode
    return Implies(Present(mode), Or(mode == "none", mode == "align"))


@rule(
    id="PF016",
    message="mamba_cache_mode 'align' requires enable_prefix_caching",
    over=runtime_memory,
    field="mamba_cache_mode",
    after=("PF015",),
    source="vllm/model_executor/models/config.py:763-787 (prefix caching off forces mode 'none')",
)
def align_needs_prefix_caching(memory):
    """With prefix caching off vLLM forces the Mamba cache mode to 'none'."""
    return Implies(And(Present(memory.mamba_cache_mode), memory.mamba_cache_mode == "align"),
                   And(Present(memory.enable_prefix_caching), memory.enable_prefix_caching == True))  # noqa: E712


@rule(
    id="PF017",
    message="hash_block_size_tokens must be positive",
    over=runtime_memory,
    field="hash_block_size_tokens",
    source="vllm/v1/core/kv_cache_utils.py:816-918 (resolve_kv_cache_block_sizes)",
)
def hash_block_positive(memory):
    """The resolved hash block size is a positive token count."""
    size = memory.hash_block_size_tokens
    return Implies(Present(size), ValueOf(size) > 0)


@rule(
    id="PF018",
    message="runtime memory requires positive kv_cache_bytes",
    over=runtime_memory,
    field="kv_cache_bytes",
    source="vllm/v1/core/kv_cache_planning.py:50-87 (no memory for the cache blocks is a start-up refusal)",
)
def kv_bytes_positive(memory):
    """A runtime without KV cache bytes did not start."""
    return memory.kv_cache_bytes > 0


@rule(
    id="PF019",
    message="gpu_memory_utilization must be in (0, 1]",
    over=runtime_memory,
    field="gpu_memory_utilization",
    source="vllm/config/cache.py:215 (CacheConfig.gpu_memory_utilization: gt=0, le=1)",
)
def utilization_in_range(memory):
    """vLLM's config validation bounds the fraction."""
    value = memory.gpu_memory_utilization
    return And(value > 0, value <= 1)


@rule(
    id="PF020",
    message="runtime memory requires a positive max_model_len",
    over=runtime_memory,
    field="max_model_len",
    source="vllm/config/model.py:249 (ModelConfig.max_model_len)",
)
def max_model_len_positive(memory):
    """The context length the memory was sized for."""
    return memory.max_model_len > 0


# -- relations between fields (fuzz finding F014) ----------------------------------------------

_POOL = ("vllm/v1/core/kv_cache_planning.py:574-605, :1561-1574 (one bytes_per_block for every group of the "
         "pool; num_blocks = available // bytes_per_block)")


@binding("profile")
def later_groups_with_first(profile):
    """Every cache group after the first, with the first."""
    groups = profile.resources.cache_groups
    if not present(groups) or not groups:
        return
    for index, group in enumerate(groups[1:], start=1):
        yield Instance(f"$.resources.cache_groups[{index}]", (group, groups[0]), {"name": group.name})


@rule(
    id="PF021",
    message="cache groups must share one page_size_bytes (the pool block)",
    over=later_groups_with_first,
    field="page_size_bytes",
    after=("PF009",),
    source=_POOL + "; seed 001: every group page of a grouped profile is one pool block",
)
def groups_share_pool_block(group, first):
    """A group's page in the profile is one pool block (seed 001: a state group's block ID
    reserves the whole pool block, attention groups' layers fill it), and the pool has one."""
    return group.page_size_bytes == first.page_size_bytes


@binding("profile")
def memory_with_pool_block(profile):
    """The runtime memory with the profile's pool block (its first group's page)."""
    memory = profile.resources.runtime_memory
    groups = profile.resources.cache_groups
    if not present(memory) or not present(groups) or not groups:
        return
    yield Instance("$.resources.runtime_memory", (memory, groups[0].page_size_bytes))


@rule(
    id="PF022",
    message="kv_cache_bytes must be a whole number of pool blocks",
    over=memory_with_pool_block,
    field="kv_cache_bytes",
    after=("PF009", "PF018"),
    source=_POOL + "; seed 001: kv_cache_bytes = usable blocks x pool block (13,696 x 13,516,800)",
)
def kv_bytes_whole_blocks(memory, block):
    """The usable pool (the null block excluded) is whole pool blocks."""
    return Implies(block > 0, mod(memory.kv_cache_bytes, If(block > 0, block, 1)) == 0)


@binding("profile")
def resources(profile):
    """A profile's resources."""
    yield Instance("$.resources", (profile.resources,))


@rule(
    id="PF023",
    message="linear cache requires kv_bytes_per_token only; grouped cache requires cache_groups without a scalar token rate",
    over=resources,
    field="cache_layout",
    source="aisimulate FpmResourceConfig::validate (docs/import.md, "
    "layout step); vllm/v1/core/kv_cache_planning.py:1607-1657 (a grouped pool has at least one group)",
)
def layout_matches_fields(resources):
    """``linear``: no cache groups and a token rate in (0, 2**53]; ``grouped`` and ``mamba_align``
    (seed 000: grouped with the observed geometry): groups and no rate; ``unmodeled``: ST007."""
    groups = resources.cache_groups
    has_groups = present(groups) and len(groups) > 0
    rate = resources.kv_bytes_per_token
    linear_ok = And(not has_groups, IntIs(rate, lambda n: And(n > 0, n <= MAX_SAFE_INT)))
    grouped_ok = And(has_groups, Not(Present(rate)))
    layout = resources.cache_layout
    return Or(And(layout == "linear", linear_ok), And(Or(layout == "grouped", layout == "mamba_align"), grouped_ok),
              layout == "unmodeled")


@binding("profile")
def later_groups_with_earlier_names(profile):
    """Every cache group after the first, with the names before it."""
    groups = profile.resources.cache_groups
    if not present(groups):
        return
    for index, group in enumerate(groups[1:], start=1):
        yield Instance(f"$.resources.cache_groups[{index}]", (group.name, [g.name for g in groups[:index]]),
                       {"name": group.name})


@rule(
    id="PF024",
    message="cache group names must be unique",
    over=later_groups_with_earlier_names,
    field="name",
    source="aisimulate FpmResourceConfig::validate (docs/import.md)",
)
def group_names_unique(name, earlier):
    """The importer names groups ``runtime_group_{index}``; a repeated name is two groups in one."""
    return And(*[name != other for other in earlier])
