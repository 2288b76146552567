"""The FPM profile an importer writes for a record set, and Hypothesis strategies over record
sets and profiles.

:func:`profile_of` follows the aisimulate importer (``../shared/reference/aisimulate-importer.md``
2.4-2.6, ``RO _configuration`` / ``RM _normalized_groups``) with seed 001's state groups: one group
per scheduler group named ``runtime_group_{index}``, every group's page the whole pool block
(``allocated_cache_bytes // num_blocks``), ``kv_cache_bytes`` the usable blocks (the null block
excluded) times that block, minimised over workers; state groups carry ``blocks_per_request`` and
the checkpoint evidence.

Strategies (public):

* :func:`record_sets`: what vLLM 0.33.0 would write for a generated geometry
  (:func:`kvproof.fuzz.strategies.geometries`, planned by :mod:`kvproof.sim` and written by
  :func:`kvproof.sim.synth.synthesize`); geometries vLLM refuses are skipped.
* :func:`profiles`: the importer's profile of such a record set.
"""

from __future__ import annotations

from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from ..models import record as r
from ..models.codec import ABSENT, present
from ..models.profile import PROFILE_SCHEMA, CacheGroup, Profile, Resources, RuntimeMemory

__all__ = ["profile_of", "record_sets", "profiles"]

_STATE_SPECS = ("MambaSpec", "CircularBufferSpec")
_WINDOWED = ("SlidingWindowSpec", "SlidingWindowMLASpec")


def _pool_block(worker: r.WorkerRecord) -> int:
    """``allocated_cache_bytes / num_blocks``: the bytes one block ID costs on this worker."""
    allocated = sum(storage.size_bytes for storage in worker.cache.storages)
    return allocated // worker.cache.num_blocks


def _group(index: int, group: r.SchedulerGroup, block: int) -> CacheGroup:
    spec = group.spec if present(group.spec) else None
    spec_type = spec.spec_type if spec is not None else group.spec_type
    state = spec_type in _STATE_SPECS
    window = spec.sliding_window if spec is not None and spec_type in _WINDOWED else ABSENT
    out = CacheGroup(
        name=f"runtime_group_{index}", kind="state" if state else "attention", num_layers=len(group.layer_names),
        block_size_tokens=group.block_size_tokens, page_size_bytes=block,
        sliding_window=window if present(window) else ABSENT,
    )
    if state:
        k = spec.num_speculative_blocks if spec is not None and present(spec.num_speculative_blocks) else 0
        out.blocks_per_request = 1 + k if spec_type == "MambaSpec" else 1
        if spec is not None and spec_type == "MambaSpec" and present(spec.num_prefill_checkpoint_blocks):
            out.prefill_checkpoint_blocks = spec.num_prefill_checkpoint_blocks
            if present(spec.prefill_checkpoint_alignment):
                out.prefill_checkpoint_alignment = spec.prefill_checkpoint_alignment
    return out


def profile_of(scheduler: r.SchedulerRecord, workers: list[r.WorkerRecord], *, model: str = "kvproof/synthesized",
               gpu_memory_utilization: float = 0.9) -> Profile:
    """The importer's FPM profile of one scheduler and its workers; ``ValueError`` where the
    importer refuses: pipeline stages (its checks A9/O2: PP 1 only) or pool pages that differ
    across ranks (its check M2)."""
    if any(worker.pp_rank != 0 for worker in workers):
        raise ValueError("runtime observation allocation supports PP1 and CP1")
    blocks = {_pool_block(worker) for worker in workers}
    if len(blocks) != 1:
        raise ValueError(f"runtime observation physical page cost across phases/ranks mismatch: {sorted(blocks)}")
    block = blocks.pop()
    usable = min(worker.cache.num_blocks - 1 for worker in workers) * block
    config = scheduler.resolved_config
    mode = scheduler.cache.mamba_cache_mode
    hash_block = scheduler.cache.hash_block_size
    return Profile(
        schema_version=PROFILE_SCHEMA, model=model,
        resources=Resources(
            cache_layout="grouped",
            max_num_tokens=config.max_num_batched_tokens,
            max_batch_size=config.max_num_seqs if present(config.max_num_seqs) else 256,
            provenance="kvproof.fuzz.importer: the importer's profile of a synthesized record set",
            cache_groups=[_group(index, group, block) for index, group in enumerate(scheduler.cache.groups)],
            runtime_memory=RuntimeMemory(
                kv_cache_bytes=usable, gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=config.max_model_len, provenance="synthesized runtime observation",
                enable_prefix_caching=config.enable_prefix_caching,
                mamba_cache_mode=mode if present(mode) else ABSENT,
                hash_block_size_tokens=hash_block if present(hash_block) else ABSENT,
            ),
        ),
    )


@st.composite
def record_sets(draw, **geometry_options: Any):
    """A :class:`kvproof.sim.synth.SynthesizedRecords` for a geometry vLLM 0.33.0 starts with."""
    import json

    from ..models.geometry import load_geometry
    from ..sim import Refusal
    from ..sim.synth import synthesize
    from .strategies import geometries

    document = draw(geometries(**geometry_options))
    try:
        return synthesize(load_geometry(json.dumps(document)))
    except Refusal:
        assume(False)


@st.composite
def profiles(draw, **geometry_options: Any):
    """The importer's :class:`kvproof.models.profile.Profile` of a generated record set."""
    synthesized = draw(record_sets(**geometry_options))
    try:
        return profile_of(synthesized.scheduler, synthesized.workers)
    except ValueError:  # pipeline stages: the importer refuses them
        assume(False)
