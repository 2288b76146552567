"""CK: prefill checkpoint evidence of the Mamba (KDA, GDN, Mamba2) groups of a worker record.

vLLM 0.33.0 gives a KDA layer one prefill checkpoint block with a 16-token alignment under
FlashKDA and none (no alignment) under Triton (``models/glm5next/common/kda.py:168-176``,
``model_executor/layers/mamba/kda_checkpoint.py:9-10``); a Mamba2 layer always has one block
at alignment 1 (``model_executor/layers/mamba/mamba_mixer2.py:1108-1118``). The count enters the
start-up sizing ``page * (2 + k + c)`` in align mode (``v1/kv_cache_interface.py:1135-1141``).
"""

from __future__ import annotations

from ..logic import And, HasKey, If, Implies, IntIs, Not, Or, Present, SameScalar, ValueOf, mod
from ..models.codec import ABSENT
from .common import is_mamba_group, layer_list, layer_specs_of, worker_groups
from .core import Instance, binding, rule

_SOURCE = (
    "vllm/models/glm5next/common/kda.py:168-176, vllm/model_executor/layers/mamba/kda_checkpoint.py:9-10, "
    "vllm/v1/kv_cache_interface.py:1135-1141"
)


def _evidence(group, field: str):
    state = group.state
    if state is ABSENT or state is None:
        return ABSENT
    return getattr(state, field)


def _count(group):
    return _evidence(group, "num_prefill_checkpoint_blocks")


def _alignment(group):
    return _evidence(group, "prefill_checkpoint_alignment")


@rule(
    id="CK001",
    message="runtime state cache group lacks prefill checkpoint evidence: {layers}",
    over=worker_groups,
    field="state",
    source=_SOURCE,
)
def mamba_group_has_checkpoint_evidence(group):
    """A Mamba group's state evidence holds both ``num_prefill_checkpoint_blocks`` and
    ``prefill_checkpoint_alignment`` (null when there is no checkpoint block): the count changes
    vLLM's start-up sizing, so a record without it cannot be sized."""
    return Implies(is_mamba_group(group), And(HasKey(_count(group)), HasKey(_alignment(group))))


@rule(
    id="CK002",
    message="mamba prefill checkpoint blocks must be 0 or 1: {layers}",
    over=worker_groups,
    field="state.num_prefill_checkpoint_blocks",
    after=("CK001",),
    source=_SOURCE + " (num_prefill_checkpoint_blocks = int(alignment is not None))",
)
def checkpoint_count_is_0_or_1(group):
    """vLLM writes ``int(alignment is not None)``: the integer 0 or 1. A bool, a float or a null
    count is not such an integer (``true == 1`` in Python, which is exactly the trap)."""
    return Implies(is_mamba_group(group), IntIs(_count(group), lambda n: Or(n == 0, n == 1)))


@rule(
    id="CK003",
    message="mamba prefill checkpoint evidence is inconsistent: {layers}",
    over=worker_groups,
    field="state",
    after=("CK001", "CK002"),
    source=_SOURCE,
)
def checkpoint_evidence_consistent(group):
    """A count of 1 comes with a positive integer alignment, a count of 0 with no alignment
    (null); and every Mamba layer spec of the group states the same count and alignment as the
    group's state evidence."""
    count, alignment = _count(group), _alignment(group)
    per_group = And(
        Implies(IntIs(count, lambda n: n == 1), IntIs(alignment, lambda a: a > 0)),
        Implies(IntIs(count, lambda n: n == 0), Not(Present(alignment))),
    )
    per_layer = [
        Implies(
            spec.spec_type == "MambaSpec",
            And(
                Implies(HasKey(spec.num_prefill_checkpoint_blocks), SameScalar(spec.num_prefill_checkpoint_blocks, count)),
                Implies(HasKey(spec.prefill_checkpoint_alignment), SameScalar(spec.prefill_checkpoint_alignment, alignment)),
            ),
        )
        for spec in layer_specs_of(group)
    ]
    return Implies(is_mamba_group(group), And(per_group, *per_layer))


#: The alignments vLLM 0.33.0's Mamba layers give with one checkpoint block, by ``mamba_type``.
_ALIGNMENT_SOURCE = (
    "vllm/model_executor/layers/mamba/kda_checkpoint.py:9-10 (FlashKDA: 16), mamba_mixer2.py:1108-1118 (Mamba2: 1), "
    "gdn/qwen_gdn_linear_attn.py:745-750 and abstract.py:116-129 (GDN: the checkpoint grid), "
    "models/qwen4_exp/nvidia/ple_layer.py:215-220 (short conv: the grid)"
)


@binding("worker")
def mamba_groups_with_settings(record):
    """Every Mamba group of a worker record with its resolved settings and its layers' Mamba type."""
    config = record.resolved_config
    for index, group in enumerate(record.cache.groups):
        types = sorted({spec.mamba_type for spec in layer_specs_of(group)
                        if spec.spec_type == "MambaSpec" and spec.mamba_type not in (ABSENT, None)})
        if len(types) == 1:
            yield Instance(f"$.cache.groups[{index}]", (group, config, types[0]),
                           {"layers": layer_list(group.layer_names), "type": types[0],
                            "value": _alignment(group) if _alignment(group) is not ABSENT else "nothing"})


def _grid(config, alignment):
    """``get_mamba_prefill_checkpoint_grid``: ``mamba_block_size`` without a prefix_match_unit,
    else a multiple of it (``lcm(prefix_match_unit, alignment)``)."""
    unit = config.prefix_match_unit
    return If(Present(unit), And(ValueOf(unit) > 0, mod(alignment, ValueOf(unit)) == 0),
              IntIs(config.mamba_block_size, lambda n: n == alignment))


@rule(
    id="CK004",
    message="mamba prefill checkpoint alignment {value} is not one a vLLM 0.33.0 {type} backend gives: {layers}",
    over=mamba_groups_with_settings,
    field="state.prefill_checkpoint_alignment",
    after=("CK001", "CK002", "CK003"),
    source=_ALIGNMENT_SOURCE,
)
def alignment_is_the_backends(group, config, mamba_type):
    """A group with one checkpoint block has the alignment its layer type's backend writes:
    Mamba2 1; GDN (KDA included: the records do not name the KDA backend, and vLLM's GDN and KDA
    layers share the type) FlashKDA's 16 or the checkpoint grid; short conv the grid; no other
    type writes one. Seed 001 accepted any positive number."""
    alignment = _alignment(group)
    value = ValueOf(alignment)
    if mamba_type == "MAMBA2":
        allowed = value == 1
    elif mamba_type == "GDN_ATTN":
        allowed = Or(value == 16, _grid(config, value))
    elif mamba_type == "SHORT_CONV":
        allowed = _grid(config, value)
    else:
        allowed = False
    return Implies(IntIs(_count(group), lambda n: n == 1), allowed)
