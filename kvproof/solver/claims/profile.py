"""Claims over FPM profiles."""

from __future__ import annotations

from ...formulas import blocks_per_request as demand
from ...logic import And, Implies, Present, ValueOf
from ...models.codec import ABSENT
from . import claim


def _groups(profile) -> list:
    groups = profile.resources.cache_groups
    return [] if groups is ABSENT or groups is None else list(groups)


def _align(profile):
    memory = profile.resources.runtime_memory
    if memory is ABSENT or memory is None:
        return False
    mode = memory.mamba_cache_mode

    return And(Present(mode), mode == "align")


@claim(
    id="CL001",
    text="for state groups, peak bytes = blocks_per_request * page_size_bytes (and are positive)",
    kind="profile",
    by=("PF001", "PF009"),
)
def state_peak_bytes(profile):
    """A running request holds ``1 + k`` blocks of a Mamba group between block boundaries
    (``sim.demand.mamba_blocks`` outside align mode), ``k = blocks_per_request - 1``: its peak is
    ``blocks_per_request`` pages, and an accepted profile makes it positive (PF001, PF009)."""
    checks = []
    for group in _groups(profile):
        count = ValueOf(group.blocks_per_request)
        peak = demand.mamba_blocks(False, count - 1, 0) * group.page_size_bytes
        checks.append(Implies(group.kind == "state", And(peak == count * group.page_size_bytes, peak > 0)))
    return And(*checks)


@claim(
    id="CL002",
    text="in align mode the start-up reservation of a state group is its peak plus 1 + prefill_checkpoint_blocks pages",
    kind="profile",
    by=("PF001", "PF006"),
)
def align_reservation(profile):
    """vLLM sizes a Mamba group at start-up as ``2 + k + c`` pages in align mode
    (``sim.demand.mamba_blocks``): ``blocks_per_request + 1 + c``, at least two pages (PF001:
    ``k >= 0``; PF006: ``c`` is 0 or 1)."""
    align = _align(profile)
    checks = []
    for group in _groups(profile):
        count = ValueOf(group.blocks_per_request)
        checkpoint = ValueOf(group.prefill_checkpoint_blocks)
        reserved = demand.mamba_blocks(True, count - 1, checkpoint)
        checks.append(Implies(And(group.kind == "state", align),
                              And(reserved == count + 1 + checkpoint, reserved >= 2)))
    return And(*checks)
