"""CA: a profile alone can run: its pool admits one request at max_model_len, and its token
budget and batch size are positive.

The request's blocks are the terms of vLLM 0.33.0's start-up check (``check_enough_kv_cache_memory``,
``v1/core/kv_cache_planning.py:151-184``: the usable memory, one pool block held back for the null
block, must hold ``max_memory_usage_bytes`` of every group), read from the profile's groups with
the simulator's functions (:mod:`kvproof.formulas.blocks_per_request`): a full-attention group ``cdiv(L, block)``,
a windowed group ``cdiv(min(W - 1 + T, L), block) + 1`` with the token budget ``T`` as the
in-flight tokens (the smallest value vLLM uses), a Mamba group (one with checkpoint evidence)
``2 + k + c`` in align mode and ``1 + k`` otherwise (``k = blocks_per_request - 1``), a ring 1.
For seed 001's GLM-5.3-Flash profile that is 482 + 4 x 3 + 1 = 495 blocks x 13,516,800 bytes =
6,690,816,000 <= 185,126,092,800. (The replay of the profile holds 487 of them: ``kvproof plan``.)
"""

from __future__ import annotations

from ..formulas import blocks_per_request
from ..logic import HasKey, If, OrDefault, Present, SameScalar, Sum, ValueOf
from ..models.codec import ABSENT
from .core import Instance, binding, rule

__all__ = ["startup_blocks", "startup_request_bytes"]

_START = ("vllm/v1/core/kv_cache_planning.py:151-184 (check_enough_kv_cache_memory), :50-86; "
          "vllm/v1/kv_cache_interface.py:643-648, :918-944, :982-985, :1135-1141 (max_memory_usage_bytes)")


def startup_blocks(group, memory, max_num_tokens):
    """Blocks vLLM's start-up check counts for one request at max_model_len in a profile group.

    A state group with checkpoint evidence is a Mamba group (the importer writes the count for
    every Mamba group and never for a ring). Written with the logic helpers only: optional fields
    are read through ``HasKey``/``Present`` so a symbolic document takes the same branches."""
    length, block = memory.max_model_len, group.block_size_tokens
    count = ValueOf(group.blocks_per_request)
    align = SameScalar(OrDefault(memory.mamba_cache_mode, None), "align")
    state = If(HasKey(group.prefill_checkpoint_blocks),
               blocks_per_request.mamba_blocks(align, count - 1, ValueOf(group.prefill_checkpoint_blocks)), count)
    attention = If(Present(group.sliding_window),
                   blocks_per_request.sliding_window_blocks(length, block, ValueOf(group.sliding_window), 0, max_num_tokens),
                   blocks_per_request.full_attention_blocks(length, block))
    return If(group.kind == "state", state, attention)


def startup_request_bytes(groups, memory, max_num_tokens):
    """``max_memory_usage_bytes`` of one request: each group's blocks times its page."""
    return Sum(*[startup_blocks(g, memory, max_num_tokens) * g.page_size_bytes for g in groups])


@binding("profile")
def profile_pool(profile):
    """A grouped profile's groups with its runtime memory and token budget."""
    resources = profile.resources
    memory = resources.runtime_memory
    groups = resources.cache_groups
    if memory in (ABSENT, None) or groups in (ABSENT, None) or not groups:
        return
    # the subject is the resources, so a PF refusal of any group or of the memory suppresses it
    yield Instance("$.resources", (tuple(groups), memory, resources.max_num_tokens),
                   blame="$.resources.runtime_memory.kv_cache_bytes")


def _explain_pool(groups, memory, max_num_tokens):
    blocks = [startup_blocks(g, memory, max_num_tokens) for g in groups]
    return {"blocks": sum(blocks), "bytes": startup_request_bytes(groups, memory, max_num_tokens),
            "L": memory.max_model_len, "kv": memory.kv_cache_bytes}


@rule(
    id="CA001",
    message="one request at max_model_len {L} needs {blocks} blocks = {bytes} bytes, more than kv_cache_bytes {kv}",
    over=profile_pool,
    after=("PF001", "PF004", "PF006", "PF009", "PF010", "PF011", "PF013", "PF014", "PF015", "PF018", "PF020",
           "PF021", "PF022", "PF023"),
    explain=_explain_pool,
    source=_START,
)
def pool_admits_one_request(groups, memory, max_num_tokens):
    """vLLM does not start unless the usable pool holds one request at max_model_len; a profile
    whose pool cannot is no deployment vLLM runs."""
    return startup_request_bytes(groups, memory, max_num_tokens) <= memory.kv_cache_bytes


@binding("profile")
def envelope(profile):
    """The scheduler envelope of a profile."""
    resources = profile.resources
    yield Instance("$.resources", (resources.max_num_tokens, resources.max_batch_size))


@rule(
    id="CA002",
    message="max_num_tokens must be positive (the scheduler's token budget)",
    over=envelope,
    field="max_num_tokens",
    source="vllm/config/scheduler.py:48 (max_num_batched_tokens: Field(ge=1)), the scheduler's token_budget",
)
def token_budget_positive(max_num_tokens, max_batch_size):
    """A zero budget schedules no token: every request waits forever."""
    return max_num_tokens > 0


@rule(
    id="CA003",
    message="max_batch_size must be positive (the scheduler's max_num_seqs)",
    over=envelope,
    field="max_batch_size",
    source="vllm/config/scheduler.py:62 (max_num_seqs: Field(ge=1))",
)
def batch_size_positive(max_num_tokens, max_batch_size):
    """No sequence could run at a batch size of 0."""
    return max_batch_size > 0

