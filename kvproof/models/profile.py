"""The FPM profile: the cache groups and runtime memory that an inference simulator consumes.

Field names follow the FPM profile of seed 001 (``FpmCacheGroup``, ``FpmRuntimeMemoryProfile``).
Fields whose range a ``PF`` rule judges (counts, alignments, sizes) load as signed integers so a
zero or negative value reaches the rule and gets the rule's text; every other integer is a
non-negative integer up to 2**53 (see :mod:`kvproof.models.codec`).
"""

from __future__ import annotations

from typing import Literal

import attrs

from .codec import ABSENT, SignedInt

__all__ = ["PROFILE_SCHEMA", "CacheGroup", "RuntimeMemory", "Resources", "Profile", "RecordSource", "PhaseSource",
           "PhaseValue", "PhaseDifference", "ImportProvenance", "MambaCache", "ReplayRing", "StateCache",
           "CACHE_LAYOUTS", "STATE_STORAGE_POLICIES"]

PROFILE_SCHEMA = "kvproof/profile/v1"

CacheKind = Literal["attention", "state", "convolution"]
#: ``mamba_align``: the observed Mamba align-mode pool (seed 000), sized and replayed from
#: ``mamba_cache``; ``unmodeled``: timing queries only (capacity sizing and replay refuse it).
CacheLayout = Literal["grouped", "linear", "mamba_align", "unmodeled"]
CACHE_LAYOUTS = ("grouped", "linear", "mamba_align", "unmodeled")
#: ``state_storage`` values: the state backends of the support table (kvproof/sim/startup/state_support.py).
STATE_STORAGE_POLICIES = ("full_state", "triton_replayssm", "flashinfer_replayssm", "kda_recoverssm")


@attrs.define
class CacheGroup:
    """One FPM cache group (``FpmCacheGroup``)."""

    name: str
    kind: CacheKind
    num_layers: SignedInt
    block_size_tokens: SignedInt
    #: One pool block of this group in bytes (for a state group: the whole pool block).
    page_size_bytes: SignedInt
    sliding_window: SignedInt | None = ABSENT
    #: Pool blocks a running request holds in a state group (absent for other kinds).
    blocks_per_request: SignedInt | None = ABSENT
    prefill_checkpoint_blocks: SignedInt | None = ABSENT
    prefill_checkpoint_alignment: SignedInt | None = ABSENT


@attrs.define
class RuntimeMemory:
    """Runtime memory evidence (``FpmRuntimeMemoryProfile``) with the prefix-caching settings."""

    kv_cache_bytes: SignedInt
    gpu_memory_utilization: float
    max_model_len: SignedInt
    provenance: str
    enable_prefix_caching: bool | None = ABSENT
    #: A string, not an enumeration: a mode vLLM 0.33.0 lacks ("all") is a PF rule's refusal.
    mamba_cache_mode: str | None = ABSENT
    hash_block_size_tokens: SignedInt | None = ABSENT


@attrs.define
class ReplayRing:
    """ReplaySSM's replay rings (x, dt, B) of one request on one rank, all state layers
    (``MambaStateShapeCalculator.append_replayssm_ring``, model_executor/layers/mamba/mamba_utils.py:214-246)."""

    #: ``cache_config.replayssm_buffer_len`` (the logical window).
    buffer_len: SignedInt
    #: The physical ring length: the window, FlashInfer ``+ 1 + num_speculative_tokens``.
    length_tokens: SignedInt
    #: One ring slot of every ring tensor of every state layer.
    bytes_per_token: SignedInt
    #: ``length_tokens x bytes_per_token``.
    bytes: SignedInt


@attrs.define
class MambaCache:
    """The observed Mamba align-mode geometry (seed 000's ``mamba_cache``; docs/formats.md)."""

    #: ``cache_config.mamba_block_size``: tokens of one state page (align: every group's page).
    block_size_tokens: SignedInt
    #: The prefix-cache hash unit (``hash_block_size``; ``prefix_match_unit`` when set).
    hash_block_size_tokens: SignedInt
    #: One pool block: every state group's padded page (``mamba_page_size_padded``).
    page_size_bytes: SignedInt
    #: ``VllmConfig.num_speculative_tokens`` (the draft depth).
    num_speculative_tokens: SignedInt
    #: ``MambaSpec.num_speculative_blocks``: the speculative scratch states per state group.
    num_speculative_blocks: SignedInt
    replay_ring: ReplayRing | None = ABSENT


@attrs.define
class StateCache:
    """Manual state geometry a profile's author states (checked against ``mamba_cache``)."""

    #: Speculative scratch states per request and state group.
    num_speculative_states: SignedInt | None = ABSENT
    prefix_match_unit: SignedInt | None = ABSENT
    block_size_tokens: SignedInt | None = ABSENT


@attrs.define
class Resources:
    """``FpmResourceProfile``: the grouped cache layout and its memory."""

    cache_layout: CacheLayout
    max_num_tokens: int
    max_batch_size: int
    provenance: str
    cache_groups: list[CacheGroup] = ABSENT
    kv_bytes_per_token: int | None = ABSENT
    runtime_memory: RuntimeMemory | None = ABSENT
    #: A string, not an enumeration: an unsupported policy is an ST rule's refusal.
    state_storage: str | None = ABSENT
    mamba_cache: MambaCache | None = ABSENT
    state_cache: StateCache | None = ABSENT


@attrs.define
class RecordSource:
    """One record an import read: its path relative to its phase directory and its SHA-256."""

    path: str
    sha256: str


@attrs.define
class PhaseSource:
    phase: str | None
    records: list[RecordSource]


@attrs.define
class PhaseValue:
    phase: str | None
    value: int


@attrs.define
class PhaseDifference:
    """A record value that differs between the imported phases (``path`` in the records)."""

    path: str
    values: list[PhaseValue]


@attrs.define
class ImportProvenance:
    """What ``kvproof import`` read (docs/import.md)."""

    tool: str
    vllm_version: str
    phases: list[PhaseSource]
    phase_geometry_differences: list[PhaseDifference]


@attrs.define
class Profile:
    """An FPM profile document."""

    schema_version: Literal["kvproof/profile/v1"]
    model: str
    resources: Resources
    description: str | None = ABSENT
    provenance: ImportProvenance | None = ABSENT
