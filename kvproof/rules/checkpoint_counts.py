"""CK: prefill checkpoint evidence of the Mamba (KDA, GDN, Mamba2) groups of a worker record.

vLLM 0.33.0 gives a KDA layer one prefill checkpoint block with a 16-token alignment under
FlashKDA and none (no alignment) under Triton (``models/glm5next/common/kda.py:168-176``,
``model_executor/layers/mamba/kda_checkpoint.py:9-10``); a Mamba2 layer always has one block
at alignment 1 (``model_executor/layers/mamba/mamba_mixer2.py:1108-1118``). The count enters the
start-up sizing ``page * (2 + k + c)`` in align mode (``v1/kv_cache_interface.py:1135-1141``).
"""

from __future__ import annotations

from ..logic import And, HasKey, Implies, IntIs, Not, Or, Present, SameScalar
from ..models.codec import ABSENT
from .common import is_mamba_group, layer_specs_of, worker_groups
from .core import rule

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
