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
           "PhaseValue", "PhaseDifference", "ImportProvenance"]

PROFILE_SCHEMA = "kvproof/profile/v1"

CacheKind = Literal["attention", "state", "convolution"]


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
class Resources:
    """``FpmResourceProfile``: the grouped cache layout and its memory."""

    cache_layout: Literal["grouped", "linear"]
    max_num_tokens: int
    max_batch_size: int
    provenance: str
    cache_groups: list[CacheGroup] = ABSENT
    kv_bytes_per_token: int | None = ABSENT
    runtime_memory: RuntimeMemory | None = ABSENT


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
