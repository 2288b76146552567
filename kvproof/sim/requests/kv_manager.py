"""vLLM 0.33.0's KV cache coordinators and ``KVCacheManager``, ported.

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text (empty, as vLLM raises it)
must not depend on pytest, which rewrites the asserts of every module of a distribution that
ships a pytest plugin (kvproof does: ``kvproof.pytest_plugin``).

Paths are relative to the ``vllm/`` package; line numbers are those of 0.33.0.

| name | vLLM source |
|---|---|
| ``replay_boundaries`` | ``v1/core/kv_cache_coordinator.py:65-85`` |
| ``KVCacheCoordinator`` | ``kv_cache_coordinator.py:88-465`` |
| ``KVCacheCoordinatorNoPrefixCache`` | 468-519 |
| ``UnitaryKVCacheCoordinator`` | 522-596 |
| ``SpecGroup``, ``HybridKVCacheCoordinator`` | 599-983 (``find_longest_cache_hit``: the fixed-point search, 806-941) |
| ``get_kv_cache_coordinator`` | 986-1052 |
| ``eagle_proof_margin``, ``partial_hash_hits_enabled`` | ``v1/core/kv_cache_utils.py:762-813`` |
| ``KVCacheBlocks`` | ``v1/core/kv_cache_manager.py:34-129`` |
| ``KVCacheManager`` | ``kv_cache_manager.py:132-931`` |
| ``KVCacheManager.from_plan`` | the ``KVCacheManager(...)`` call of ``Scheduler.__init__`` (``v1/core/sched/scheduler.py:294-365``) |

Not ported (and why): KV cache events and ``take_events`` / ``emit_cached_block_events``, prefix-cache
stats and metrics (no effect on blocks); KV connectors (``get_computed_blocks_for_connector`` is kept,
``evict_blocks`` is not; external computed tokens are accepted but kvproof never has any); HiSparse
(``retains_longer_hit`` groups, host pools); boundary-state / partial-tail offload hand-offs (Mamba
connectors); ``truncate_computed_blocks``, ``estimate_cached_tokens``, ``record_blocks_for_zeroing``
(connector paths). DCP is followed as vLLM does it (manager block size ``block_size * dcp`` for
DCP-sharded specs, the hybrid coordinator's DCP asserts); PCP is always 1 in the scheduler
(``scheduler.py:360``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .block_pool import BlockHash, BlockPool, KVCacheBlock, trim_null_head
from .manager_registry import get_manager_for_kv_cache_spec
from .managers import CrossAttentionManager, FullAttentionManager, SingleTypeKVCacheManager, cdiv
from .request import Request, RequestStatus, get_request_block_hasher
from ..startup.specs import (
    AttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    iter_layer_specs,
)

__all__ = [
    "HybridKVCacheCoordinator",
    "KVCacheBlocks",
    "KVCacheCoordinator",
    "KVCacheCoordinatorNoPrefixCache",
    "KVCacheManager",
    "SchedulerKVCacheConfig",
    "SchedulerKVCacheGroup",
    "UnitaryKVCacheCoordinator",
    "get_kv_cache_coordinator",
    "scheduler_num_lookahead_tokens",
]


def round_down(x: int, y: int) -> int:
    """``vllm.utils.math_utils.round_down``."""
    return (x // y) * y


def _is_mamba_manager(manager: SingleTypeKVCacheManager) -> bool:
    return isinstance(manager.kv_cache_spec, MambaSpec)


# ---------------------------------------------------------------------------------------------
# The scheduler's KVCacheConfig (generate_scheduler_kv_cache_config, kv_cache_utils.py:1096-1117)
# ---------------------------------------------------------------------------------------------


@dataclass
class SchedulerKVCacheGroup:
    """``KVCacheGroupSpec`` as the scheduler sees it (a uniform-type group replaced by its first
    layer spec)."""

    kv_cache_spec: KVCacheSpec
    is_eagle_group: bool = False
    layer_names: list[str] = field(default_factory=list)
    role: str | None = None


@dataclass
class SchedulerKVCacheConfig:
    """The fields of ``KVCacheConfig`` (``v1/kv_cache_interface.py:1525-1660``) the manager reads."""

    num_blocks: int
    kv_cache_groups: list[SchedulerKVCacheGroup]
    prefix_cache_retention_interval: int | None = None

    @property
    def has_mamba_layers(self) -> bool:
        return any(isinstance(s, MambaSpec) for g in self.kv_cache_groups for s in iter_layer_specs(g.kv_cache_spec))

    @property
    def has_mixed_precision_kv_cache(self) -> bool:
        precisions = {
            (s.dtype, s.kv_quant_mode)
            for g in self.kv_cache_groups
            for s in iter_layer_specs(g.kv_cache_spec)
            if isinstance(s, AttentionSpec)
        }
        return len(precisions) > 1

    @property
    def needs_kv_cache_zeroing(self) -> bool:
        return self.has_mamba_layers or self.has_mixed_precision_kv_cache


# ---------------------------------------------------------------------------------------------
# kv_cache_utils.py helpers
# ---------------------------------------------------------------------------------------------


def _resolve_dcp_kv_block_size(spec: KVCacheSpec, dcp_world_size: int) -> int:
    """``resolve_dcp_kv_block_size`` (kv_cache_utils.py:740-742)."""
    return spec.block_size * (dcp_world_size if spec.dcp_sharded else 1)


def partial_hash_hits_enabled(kv_cache_groups, hash_block_size: int, dcp_world_size: int = 1,
                              manager_classes=None) -> bool:
    """``partial_hash_hits_enabled`` (kv_cache_utils.py:762-801)."""
    if not any(
        isinstance(spec, MambaSpec)
        and spec.mamba_cache_mode == "align"
        and (
            (dcp_world_size == 1 and spec.block_size > hash_block_size)
            or (dcp_world_size > 1 and spec.block_size >= hash_block_size)
        )
        for group in kv_cache_groups
        for spec in iter_layer_specs(group.kv_cache_spec)
    ):
        return False
    if manager_classes is None:
        return True
    unsupported = {
        manager_cls.__name__
        for group, manager_cls in zip(kv_cache_groups, manager_classes)
        if group.kv_cache_spec.prefix_cacheable
        and not manager_cls.supports_fine_grained_hash_lookup
        and _resolve_dcp_kv_block_size(group.kv_cache_spec, dcp_world_size) != hash_block_size
    }
    return not unsupported


def eagle_proof_margin(block_size: int, hash_block_size: int, fine_grained_lookup: bool) -> int:
    """``eagle_proof_margin`` (kv_cache_utils.py:804-813)."""
    if fine_grained_lookup and block_size > hash_block_size:
        return hash_block_size
    return block_size


# ---------------------------------------------------------------------------------------------
# Coordinators (kv_cache_coordinator.py)
# ---------------------------------------------------------------------------------------------


def _validate_prefix_cache_retention_interval(retention_interval, scheduler_block_size, kv_cache_config) -> None:
    """33-62."""
    if retention_interval is None:
        return
    if not any(isinstance(g.kv_cache_spec, (SlidingWindowSpec, MambaSpec)) for g in kv_cache_config.kv_cache_groups):
        if retention_interval == 0:
            return
        raise ValueError(
            "prefix_cache_retention_interval is set but this model has "
            "no sliding-window or Mamba KV cache group, so retention has no "
            "effect. Set it to 0 (it only applies to sliding-window and Mamba "
            "attention)."
        )
    if retention_interval < 0 or retention_interval % scheduler_block_size != 0:
        raise ValueError(
            f"prefix_cache_retention_interval ({retention_interval}) "
            "must be non-negative and a multiple of scheduler_block_size "
            f"({scheduler_block_size})."
        )


def _may_skip_blocks(manager: SingleTypeKVCacheManager) -> bool:
    """Whether ``manager.remove_skipped_blocks`` can do anything: not for a manager whose class keeps
    the base ``remove_skipped_blocks`` and ``get_num_skipped_tokens`` (no token is ever skipped)."""
    cls = type(manager)
    return not (
        cls.remove_skipped_blocks is SingleTypeKVCacheManager.remove_skipped_blocks
        and cls.get_num_skipped_tokens is SingleTypeKVCacheManager.get_num_skipped_tokens
    )


@functools.lru_cache(maxsize=4096)
def replay_boundaries(num_prompt_tokens: int, scheduler_block_size: int, use_eagle: bool) -> tuple[int, ...]:
    """``replay_boundaries`` (65-85): where a later request replaying the prompt can resume."""
    if not use_eagle:
        return (num_prompt_tokens - 1,)
    block = scheduler_block_size
    resend = (num_prompt_tokens - 1) // block * block
    extension = num_prompt_tokens // block * block
    return tuple(sorted({max(resend - block, 0), max(extension - block, 0)}))


class KVCacheCoordinator:
    """``KVCacheCoordinator`` (88-465)."""

    enable_partial_hash_hits = False

    def __init__(
        self,
        kv_cache_config: SchedulerKVCacheConfig,
        max_model_len: int,
        max_in_flight_tokens: int,
        use_eagle: bool,
        enable_caching: bool,
        dcp_world_size: int,
        pcp_world_size: int,
        scheduler_block_size: int,
        hash_block_size: int,
        num_prefill_lookahead: int = 0,
        num_hash_lookahead_tokens: int = 0,
    ):
        self.kv_cache_config = kv_cache_config
        assert scheduler_block_size % hash_block_size == 0 and all(
            scheduler_block_size % g.kv_cache_spec.block_size == 0 for g in kv_cache_config.kv_cache_groups
        )
        self.scheduler_block_size = scheduler_block_size
        self.num_reprefillable_tokens = max(0, num_prefill_lookahead - 1)
        self.block_pool = BlockPool(
            num_gpu_blocks=kv_cache_config.num_blocks,
            enable_caching=enable_caching,
            hash_block_size=hash_block_size,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens,
        )
        # 128-137: EAGLE groups; all groups when none is flagged.
        self.eagle_group_ids: set[int] = {i for i, g in enumerate(kv_cache_config.kv_cache_groups) if g.is_eagle_group}
        if use_eagle and not self.eagle_group_ids:
            self.eagle_group_ids = set(range(len(kv_cache_config.kv_cache_groups)))
        self.drop_eagle_group_ids = self.eagle_group_ids if use_eagle else set()
        # 150-159
        if enable_caching and self.eagle_group_ids and scheduler_block_size < num_prefill_lookahead:
            raise ValueError(
                f"Multi-module MTP with prefix caching requires scheduler_block_size"
                f" (={scheduler_block_size}) >= num_speculative_tokens"
                f" (={num_prefill_lookahead})."
            )
        self.single_type_managers = tuple(
            get_manager_for_kv_cache_spec(
                kv_cache_spec=kv_cache_group.kv_cache_spec,
                max_in_flight_tokens=max_in_flight_tokens,
                max_model_len=max_model_len,
                block_pool=self.block_pool,
                role=kv_cache_group.role,
                enable_caching=enable_caching,
                kv_cache_group_id=i,
                dcp_world_size=dcp_world_size,
                pcp_world_size=pcp_world_size,
                scheduler_block_size=self.scheduler_block_size,
                needs_kv_cache_zeroing=self.kv_cache_config.needs_kv_cache_zeroing,
            )
            for i, kv_cache_group in enumerate(self.kv_cache_config.kv_cache_groups)
        )
        # 176-180: match Mamba checkpoints to EAGLE's attention replay boundary.
        if use_eagle:
            for manager in self.single_type_managers:
                if _is_mamba_manager(manager):
                    manager.drop_eagle_checkpoint_block = True
        self.group_block_sizes = tuple(manager.block_size for manager in self.single_type_managers)
        self._cross_attention = tuple(isinstance(m, CrossAttentionManager) for m in self.single_type_managers)
        # remove_skipped_blocks of a manager that never skips a token is a no-op (690-720): not called
        self._skipping_managers = tuple(m for m in self.single_type_managers if _may_skip_blocks(m))
        self.retention_interval = kv_cache_config.prefix_cache_retention_interval
        _validate_prefix_cache_retention_interval(self.retention_interval, self.scheduler_block_size, kv_cache_config)

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
        num_encoder_tokens: int,
        total_computed_tokens: int,
        num_local_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
        prefill_end: int = 0,
    ) -> int:
        """194-263."""
        num_blocks_to_allocate = 0
        if self.retention_interval != 0:
            prefill_end = 0
        for i, manager in enumerate(self.single_type_managers):
            if self._cross_attention[i]:
                num_blocks_to_allocate += manager.get_num_blocks_to_allocate(
                    request_id, num_encoder_tokens, [], 0, 0, num_encoder_tokens, apply_admission_cap
                )
            else:
                num_blocks_to_allocate += manager.get_num_blocks_to_allocate(
                    request_id, num_tokens, new_computed_blocks[i], total_computed_tokens,
                    num_local_computed_tokens, num_tokens_main_model, apply_admission_cap, prefill_end,
                )
        return num_blocks_to_allocate

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
        skip_zeroing_group_ids: tuple[int, ...] = (),
    ) -> None:
        """265-310: touch every group's hit blocks first, then external blocks."""
        if any(request_id in manager.num_cached_block for manager in self.single_type_managers):
            assert all(len(blocks) == 0 for blocks in new_computed_blocks)
            return
        for i, manager in enumerate(self.single_type_managers):
            manager.add_local_computed_blocks(
                request_id, new_computed_blocks[i], num_local_computed_tokens, num_external_computed_tokens
            )
        if num_external_computed_tokens > 0:
            for i, manager in enumerate(self.single_type_managers):
                manager.allocate_external_computed_blocks(
                    request_id, num_local_computed_tokens, num_external_computed_tokens,
                    record_for_zeroing=i not in skip_zeroing_group_ids,
                )

    def allocate_new_blocks(self, request_id: str, num_tokens: int, num_tokens_main_model: int,
                            num_encoder_tokens: int = 0) -> tuple[list[KVCacheBlock], ...]:
        """312-342."""
        return tuple([
            manager.allocate_new_blocks(request_id, num_encoder_tokens if cross else num_tokens, num_tokens_main_model)
            for manager, cross in zip(self.single_type_managers, self._cross_attention)
        ])

    def get_num_cacheable_tokens(self, num_computed_tokens: int, kv_cache_group_id: int) -> int:
        """344-350: the last ``num_reprefillable_tokens`` stay uncached (multi-module MTP)."""
        return max(0, num_computed_tokens - self.num_reprefillable_tokens)

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """352-375."""
        boundaries = replay_boundaries(request.num_prompt_tokens, self.scheduler_block_size,
                                       bool(self.drop_eagle_group_ids))  # use_eagle
        retention_interval = self.retention_interval
        for group_id, manager in enumerate(self.single_type_managers):
            if not manager.enable_caching:
                continue
            manager.cache_blocks(request, self.get_num_cacheable_tokens(num_computed_tokens, group_id),
                                 retention_interval, replay_boundaries=boundaries)

    def reset_prefix_cache(self) -> bool:
        return self.block_pool.reset_prefix_cache()

    # -- kvproof: decode runs (docs/requests.md, "Decode runs") ----------------------------------

    def min_tokens_cacheable(self, num_tokens: int, kv_cache_group_id: int) -> int:
        """The least ``m`` with ``get_num_cacheable_tokens(m, group) >= num_tokens`` (> 0): the
        closed-form inverse of :meth:`get_num_cacheable_tokens`."""
        return num_tokens + self.num_reprefillable_tokens

    @property
    def supports_decode_runs(self) -> bool:
        return all(manager.supports_decode_runs for manager in self.single_type_managers)

    def decode_cacheable_tokens(self, num_computed_tokens: int, kv_cache_group_id: int) -> int:
        """What a one-token decode step at computed count ``c`` passes to the group's ``cache_blocks``:
        ``allocate_slots`` caches ``min(c + 1, num_tokens) = c + 1`` tokens (``kv_cache_manager.py:621-625``)."""
        return self.get_num_cacheable_tokens(num_computed_tokens + 1, kv_cache_group_id)

    def first_decode_step_cacheable(self, num_tokens: int, kv_cache_group_id: int) -> int:
        """The least computed count whose decode step passes at least ``num_tokens`` to ``cache_blocks``."""
        return self.min_tokens_cacheable(num_tokens, kv_cache_group_id) - 1

    def first_decode_step_caching(self, num_tokens: int, kv_cache_group_id: int, after_sampling: bool = False) -> int:
        """The least computed count whose decode step can cache a block ending at ``num_tokens`` (a
        multiple of the hash block size): it must be cacheable and hashed. The request's hasher has
        hashed ``(num_tokens_of_request - L) // hash_block_size`` blocks (``request.py``,
        ``kv_cache_utils.py:953-1036``, L the hash lookahead), and a decode at ``c`` holds ``c + 1``
        tokens, ``c + 2`` once its sampled token is appended (``after_sampling``)."""
        hashed_from = num_tokens + self.block_pool.num_hash_lookahead_tokens - (2 if after_sampling else 1)
        return max(self.first_decode_step_cacheable(num_tokens, kv_cache_group_id), hashed_from)

    def decode_quiet_steps(self, request: Request, num_computed_tokens: int, lookahead_tokens: int = 0,
                           after_sampling: bool = False) -> int:
        """How many one-token decode steps from ``num_computed_tokens`` leave every group as it is
        (the least over the groups of ``SingleTypeKVCacheManager.decode_quiet_steps``; ``cache_blocks``
        skips the groups without caching, 352-375)."""
        quiet = 1 << 62
        for manager in self.single_type_managers:
            quiet = min(quiet, manager.decode_quiet_steps(
                request, num_computed_tokens, self if manager.enable_caching else None, lookahead_tokens,
                after_sampling))
            if not quiet:
                break
        return quiet

    def free(self, request_id: str) -> None:
        """399-407."""
        for manager in self.single_type_managers:
            manager.free(request_id)

    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """409-426."""
        blocks: list[KVCacheBlock] = []
        for manager in self.single_type_managers:
            blocks.extend(manager.pop_blocks_for_free(request_id))
        return blocks

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        """428-446."""
        for manager in self._skipping_managers:
            manager.remove_skipped_blocks(request_id, processed_computed_tokens, num_prompt_tokens)

    def get_blocks(self, request_id: str) -> tuple[list[KVCacheBlock], ...]:
        """448-453."""
        return tuple(manager.req_to_blocks.get(request_id) or [] for manager in self.single_type_managers)

    def find_longest_cache_hit(self, block_hashes: list[BlockHash], max_cache_hit_length: int):
        """455-464 (abstract): (per-group hit blocks, hit length, uncached common prefix tokens)."""
        raise NotImplementedError

    def new_step_starts(self) -> None:
        for manager in self.single_type_managers:
            manager.new_step_starts()


class KVCacheCoordinatorNoPrefixCache(KVCacheCoordinator):
    """468-519: prefix caching off; any number of groups; no hits."""

    def __init__(self, kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, dcp_world_size,
                 pcp_world_size, scheduler_block_size, hash_block_size, num_hash_lookahead_tokens=0,
                 num_prefill_lookahead=0):
        super().__init__(
            kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, False,
            dcp_world_size=dcp_world_size, pcp_world_size=pcp_world_size,
            scheduler_block_size=scheduler_block_size, hash_block_size=hash_block_size,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens, num_prefill_lookahead=num_prefill_lookahead,
        )
        self.num_single_type_manager = len(self.single_type_managers)

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        return tuple([] for _ in range(self.num_single_type_manager)), 0, 0


class UnitaryKVCacheCoordinator(KVCacheCoordinator):
    """522-596: one KV cache group."""

    def __init__(self, kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
                 dcp_world_size, pcp_world_size, scheduler_block_size, hash_block_size,
                 num_hash_lookahead_tokens=0, num_prefill_lookahead=0):
        super().__init__(
            kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
            dcp_world_size=dcp_world_size, pcp_world_size=pcp_world_size,
            scheduler_block_size=scheduler_block_size, hash_block_size=hash_block_size,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens, num_prefill_lookahead=num_prefill_lookahead,
        )
        self.kv_cache_spec = self.kv_cache_config.kv_cache_groups[0].kv_cache_spec
        self.dcp_world_size = self.single_type_managers[0].dcp_world_size
        self.pcp_world_size = pcp_world_size
        self.block_size = self.single_type_managers[0].block_size
        assert not enable_caching or (hash_block_size == self.block_size), (
            "UnitaryKVCacheCoordinator assumes hash_block_size == block_size"
        )
        assert len(self.kv_cache_config.kv_cache_groups) == 1, (
            "UnitaryKVCacheCoordinator assumes only one kv cache group"
        )
        self.single_type_managers[0].use_eagle = 0 in self.drop_eagle_group_ids

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        """581-596."""
        hit_blocks, hit_length = self.single_type_managers[0].find_longest_cache_hit(
            block_hashes=block_hashes,
            max_length=max_cache_hit_length,
            kv_cache_group_ids=[0],
            block_pool=self.block_pool,
            kv_cache_spec=self.kv_cache_spec,
            drop_eagle_block=0 in self.drop_eagle_group_ids,
            alignment_tokens=self.block_size,
            dcp_world_size=self.dcp_world_size,
            pcp_world_size=self.pcp_world_size,
        )
        return hit_blocks, hit_length, 0


class SpecGroup(NamedTuple):
    """599-612: groups sharing one spec, looked up jointly."""

    spec: KVCacheSpec
    group_ids: list[int]
    manager_cls: type
    use_eagle: bool


class HybridKVCacheCoordinator(KVCacheCoordinator):
    """615-983: several KV cache groups."""

    def __init__(self, kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
                 dcp_world_size, pcp_world_size, scheduler_block_size, hash_block_size,
                 num_hash_lookahead_tokens=0, num_prefill_lookahead=0, allow_partial_hash_hits=True):
        super().__init__(
            kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
            dcp_world_size=dcp_world_size, pcp_world_size=pcp_world_size,
            scheduler_block_size=scheduler_block_size, hash_block_size=hash_block_size,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens, num_prefill_lookahead=num_prefill_lookahead,
        )
        self.hash_block_size = hash_block_size
        self.dcp_world_size = dcp_world_size
        cacheable_block_sizes = [
            manager.block_size
            for manager, group in zip(self.single_type_managers, kv_cache_config.kv_cache_groups)
            if group.kv_cache_spec.prefix_cacheable
        ]
        assert all(block_size % hash_block_size == 0 for block_size in cacheable_block_sizes), (
            "Each KV cache group's real block_size must be divisible by "
            f"hash_block_size. block_sizes={cacheable_block_sizes}, "
            f"hash_block_size={hash_block_size}"
        )
        for g in kv_cache_config.kv_cache_groups:
            spec = g.kv_cache_spec
            replicated = not spec.dcp_sharded
            if pcp_world_size > 1:
                assert isinstance(spec, FullAttentionSpec) or (isinstance(spec, AttentionSpec) and replicated), (
                    "PCP only supports full attention and replicated draft groups."
                )
            if dcp_world_size > 1:
                assert isinstance(spec, FullAttentionSpec) or replicated, (
                    "DCP with hybrid KV cache layouts only supports "
                    "full-attention, Mamba, and replicated draft groups, got: "
                    f"{type(spec).__name__}."
                )
        self.enable_partial_hash_hits = allow_partial_hash_hits and partial_hash_hits_enabled(
            kv_cache_config.kv_cache_groups,
            hash_block_size,
            dcp_world_size,
            [type(manager) for manager in self.single_type_managers],
        )
        cache_hit_alignment_tokens = self._cache_hit_alignment_tokens
        for manager in self.single_type_managers:
            manager.cache_hit_alignment_tokens = cache_hit_alignment_tokens
        self.verify_and_split_kv_cache_groups()

    @property
    def _cache_hit_alignment_tokens(self) -> int:
        """709-715."""
        return self.hash_block_size if self.enable_partial_hash_hits else self.scheduler_block_size

    def verify_and_split_kv_cache_groups(self) -> None:
        """717-775: spec groups, full attention first, the EAGLE bit pushed to the managers."""
        self.attention_groups: list[SpecGroup] = []
        for i, g in enumerate(self.kv_cache_config.kv_cache_groups):
            if not g.kv_cache_spec.prefix_cacheable:
                continue
            manager_cls = self.single_type_managers[i].__class__
            spec = g.kv_cache_spec
            use_eagle = i in self.drop_eagle_group_ids
            for idx, group in enumerate(self.attention_groups):
                if (
                    group.spec == spec
                    and group.manager_cls is manager_cls
                    and self.single_type_managers[group.group_ids[0]].block_pool
                    is self.single_type_managers[i].block_pool
                ):
                    group.group_ids.append(i)
                    if use_eagle and not group.use_eagle:
                        self.attention_groups[idx] = group._replace(use_eagle=True)
                    break
            else:
                self.attention_groups.append(SpecGroup(spec, [i], manager_cls, use_eagle))
        assert self.attention_groups, "HybridKVCacheCoordinator requires at least one cacheable group."
        self.attention_groups.sort(key=lambda g: not isinstance(g.spec, FullAttentionSpec))
        first = self.attention_groups[0]
        self.full_attention_group_id: int | None = (
            first.group_ids[0] if isinstance(first.spec, FullAttentionSpec) else None
        )
        for group in self.attention_groups:
            if group.use_eagle:
                for gid in group.group_ids:
                    self.single_type_managers[gid].use_eagle = True

    def _align_cacheable(self, num_tokens: int) -> int:
        """777-787."""
        if self.enable_partial_hash_hits:
            return num_tokens
        return round_down(num_tokens, self.scheduler_block_size)

    def min_tokens_cacheable(self, num_tokens: int, kv_cache_group_id: int) -> int:
        """kvproof (decode runs): the inverse of :meth:`get_num_cacheable_tokens` for a group without
        EAGLE (``supports_decode_runs`` excludes those)."""
        if self.enable_partial_hash_hits:
            return num_tokens
        return cdiv(num_tokens, self.scheduler_block_size) * self.scheduler_block_size

    @property
    def supports_decode_runs(self) -> bool:
        return super().supports_decode_runs and not any(m.use_eagle for m in self.single_type_managers)

    def get_num_cacheable_tokens(self, num_computed_tokens: int, kv_cache_group_id: int) -> int:
        """789-804: hybrid caches only up to the hit alignment (+ one block for EAGLE groups)."""
        cached_num_computed_tokens = self._align_cacheable(num_computed_tokens)
        manager = self.single_type_managers[kv_cache_group_id]
        if manager.use_eagle and cached_num_computed_tokens > 0:
            num_finalized_computed_tokens = max(0, num_computed_tokens - self.num_reprefillable_tokens)
            return min(
                num_finalized_computed_tokens,
                self._align_cacheable(num_finalized_computed_tokens) + manager.block_size,
            )
        return cached_num_computed_tokens

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        """806-941: the fixed-point search. Each spec group accepts the candidate length or lowers
        it; any lowering restarts the pass; full attention is looked up once and then trimmed;
        "simple hybrid" (full attention + one other) stops after one pass."""
        num_groups = len(self.kv_cache_config.kv_cache_groups)
        hit_length = max_cache_hit_length
        longest_hit_length = 0
        hit_blocks_by_group: list[list[KVCacheBlock] | None] = [None] * num_groups
        hit_length_by_group: list[int] = [0] * num_groups
        is_simple_hybrid = len(self.attention_groups) == 2 and isinstance(
            self.attention_groups[0].spec, FullAttentionSpec
        )
        eagle_verified: set[int] = set()
        while True:
            curr_hit_length = hit_length
            for idx, (spec, group_ids, manager_cls, use_eagle) in enumerate(self.attention_groups):
                first_group_id = group_ids[0]
                group_block_size = self.single_type_managers[first_group_id].block_size
                cached_blocks = hit_blocks_by_group[first_group_id]
                if isinstance(spec, FullAttentionSpec) and cached_blocks is not None:
                    curr_hit_length = min(curr_hit_length, hit_length_by_group[first_group_id])
                    continue
                drop_eagle_block = use_eagle and idx not in eagle_verified
                _max_length = curr_hit_length
                if drop_eagle_block and not isinstance(spec, MambaSpec):
                    eagle_margin = eagle_proof_margin(
                        group_block_size,
                        self.hash_block_size,
                        self.enable_partial_hash_hits and manager_cls.supports_fine_grained_hash_lookup,
                    )
                    _max_length = min(curr_hit_length + eagle_margin, len(block_hashes) * self.hash_block_size)
                hit_blocks, _new_hit_length = manager_cls.find_longest_cache_hit(
                    block_hashes=block_hashes,
                    max_length=_max_length,
                    kv_cache_group_ids=group_ids,
                    block_pool=self.single_type_managers[first_group_id].block_pool,
                    kv_cache_spec=spec,
                    drop_eagle_block=drop_eagle_block,
                    alignment_tokens=self._cache_hit_alignment_tokens,
                    dcp_world_size=self.single_type_managers[first_group_id].dcp_world_size,
                    pcp_world_size=self.single_type_managers[first_group_id].pcp_world_size,
                )
                if drop_eagle_block:
                    eagle_verified.add(idx)
                elif _new_hit_length < curr_hit_length:
                    eagle_verified.clear()
                curr_hit_length = _new_hit_length
                for group_id, blocks in zip(group_ids, hit_blocks):
                    hit_blocks_by_group[group_id] = blocks
                    hit_length_by_group[group_id] = _new_hit_length
                longest_hit_length = max(longest_hit_length, curr_hit_length)
            if curr_hit_length >= hit_length:
                break
            hit_length = curr_hit_length
            if is_simple_hybrid:
                break
        for group in self.attention_groups:
            if not isinstance(group.spec, FullAttentionSpec):
                continue
            manager = self.single_type_managers[group.group_ids[0]]
            if manager.retains_longer_hit:
                continue
            num_blocks = cdiv(hit_length, manager.block_size)
            for group_id in group.group_ids:
                if (blks := hit_blocks_by_group[group_id]) is not None:
                    del blks[num_blocks:]
                    hit_length_by_group[group_id] = hit_length
        num_uncached_common_prefix_tokens = longest_hit_length - hit_length
        cache_hit_blocks = tuple(blocks if blocks is not None else [] for blocks in hit_blocks_by_group)
        return cache_hit_blocks, hit_length, num_uncached_common_prefix_tokens

    def find_longest_cache_hit_per_group(self, block_hashes, max_cache_hit_length):
        """943-983: each spec group on its own."""
        num_groups = len(self.kv_cache_config.kv_cache_groups)
        hit_blocks: list[list[KVCacheBlock]] = [[] for _ in range(num_groups)]
        hit_lengths: list[int] = [0] * num_groups
        for spec, group_ids, manager_cls, use_eagle in self.attention_groups:
            manager = self.single_type_managers[group_ids[0]]
            lookup_length = max_cache_hit_length
            if use_eagle and not isinstance(spec, MambaSpec):
                eagle_margin = eagle_proof_margin(
                    manager.block_size,
                    self.hash_block_size,
                    self.enable_partial_hash_hits and manager_cls.supports_fine_grained_hash_lookup,
                )
                lookup_length = min(max_cache_hit_length + eagle_margin, len(block_hashes) * self.hash_block_size)
            blocks, group_hit = manager_cls.find_longest_cache_hit(
                block_hashes=block_hashes,
                max_length=lookup_length,
                kv_cache_group_ids=group_ids,
                block_pool=manager.block_pool,
                kv_cache_spec=spec,
                drop_eagle_block=use_eagle,
                alignment_tokens=self._cache_hit_alignment_tokens,
                dcp_world_size=manager.dcp_world_size,
                pcp_world_size=manager.pcp_world_size,
            )
            for gid, blks in zip(group_ids, blocks):
                hit_blocks[gid] = blks
                hit_lengths[gid] = group_hit
        return tuple(hit_blocks), tuple(hit_lengths)


def get_kv_cache_coordinator(kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
                             dcp_world_size, pcp_world_size, scheduler_block_size, hash_block_size,
                             num_hash_lookahead_tokens=0, num_prefill_lookahead=0,
                             allow_partial_hash_hits=True) -> KVCacheCoordinator:
    """986-1052."""
    common = {
        "dcp_world_size": dcp_world_size, "pcp_world_size": pcp_world_size,
        "scheduler_block_size": scheduler_block_size, "hash_block_size": hash_block_size,
        "num_hash_lookahead_tokens": num_hash_lookahead_tokens, "num_prefill_lookahead": num_prefill_lookahead,
    }
    if not enable_caching:
        return KVCacheCoordinatorNoPrefixCache(kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle,
                                               **common)
    if len(kv_cache_config.kv_cache_groups) == 1:
        return UnitaryKVCacheCoordinator(kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle,
                                         enable_caching, **common)
    return HybridKVCacheCoordinator(kv_cache_config, max_model_len, max_in_flight_tokens, use_eagle, enable_caching,
                                    allow_partial_hash_hits=allow_partial_hash_hits, **common)


# ---------------------------------------------------------------------------------------------
# KVCacheManager (kv_cache_manager.py)
# ---------------------------------------------------------------------------------------------


@dataclass
class KVCacheBlocks:
    """``KVCacheBlocks`` (34-129): ``blocks[i][j]`` is group ``i``'s ``j``-th block."""

    blocks: tuple[Sequence[KVCacheBlock], ...]

    def __add__(self, other: KVCacheBlocks) -> KVCacheBlocks:
        return KVCacheBlocks(tuple(list(itertools.chain(b1, b2)) for b1, b2 in zip(self.blocks, other.blocks)))

    def get_block_ids(self, allow_none: bool = False, *, group_ids: Sequence[int] | None = None):
        groups = self.blocks if group_ids is None else tuple(self.blocks[g] for g in group_ids)
        if allow_none and all(len(group) == 0 for group in groups):
            return None
        return tuple([blk.block_id for blk in group] for group in groups)

    def get_unhashed_block_ids(self) -> list[int]:
        assert len(self.blocks) == 1, "Only one group is supported"
        return [block.block_id for block in self.blocks[0] if block.block_hash is None]

    def get_unhashed_block_ids_all_groups(self) -> list[list[int]]:
        return [
            [b.block_id for b in trim_null_head(group) if b.block_hash is None and not b.is_null]
            for group in self.blocks
        ]

    def new_empty(self) -> KVCacheBlocks:
        return KVCacheBlocks(tuple(() for _ in range(len(self.blocks))))


def scheduler_num_lookahead_tokens(settings: Any) -> int:
    """``VllmConfig.num_lookahead_tokens`` (``config/vllm.py:625-652``), which the scheduler passes to
    ``allocate_slots`` (``scheduler.py:298, 917, 1405``): DFlash ``k + 1``; EAGLE / EAGLE3 / MTP /
    DSpark (anchor sampling, its default) / draft model ``k``; otherwise 0."""
    method = settings.speculative_method
    if method is None:
        return 0
    k = settings.num_speculative_tokens
    if method == "dflash":
        return k + 1
    if method in ("eagle", "eagle3", "mtp", "dspark", "draft_model"):
        return k
    return 0


_WAITING_STATUSES = frozenset((RequestStatus.WAITING, RequestStatus.PREEMPTED))


class KVCacheManager:
    """``KVCacheManager`` (132-931)."""

    def __init__(
        self,
        kv_cache_config: SchedulerKVCacheConfig,
        max_model_len: int,
        scheduler_block_size: int,
        hash_block_size: int,
        max_in_flight_tokens: int | None = None,
        enable_caching: bool = True,
        use_eagle: bool = False,
        num_hash_lookahead_tokens: int = 0,
        num_prefill_lookahead: int = 0,
        log_stats: bool = False,
        enable_kv_cache_events: bool = False,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
        metrics_collector: Any = None,
        watermark: float = 0.0,
        enable_mamba_shared_prefix_checkpoint: bool = False,
    ) -> None:
        """133-219. ``log_stats``, ``enable_kv_cache_events`` and ``metrics_collector`` are accepted
        and ignored (no effect on blocks)."""
        self.max_model_len = max_model_len
        if max_in_flight_tokens is None:
            max_in_flight_tokens = max_model_len
        self.enable_caching = enable_caching
        self.use_eagle = use_eagle
        self.log_stats = False
        self.coordinator = get_kv_cache_coordinator(
            kv_cache_config=kv_cache_config,
            max_model_len=self.max_model_len,
            max_in_flight_tokens=max_in_flight_tokens,
            use_eagle=self.use_eagle,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens,
            enable_caching=self.enable_caching,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
            scheduler_block_size=scheduler_block_size,
            hash_block_size=hash_block_size,
            num_prefill_lookahead=num_prefill_lookahead,
        )
        self.mamba_shared_prefix_checkpoint = (
            enable_mamba_shared_prefix_checkpoint
            and bool(self.coordinator.eagle_group_ids)
            and self.coordinator.enable_partial_hash_hits
            and self.coordinator.num_reprefillable_tokens == 0
        )
        if self.mamba_shared_prefix_checkpoint:
            for manager in self.coordinator.single_type_managers:
                if _is_mamba_manager(manager):
                    manager.shared_prefix_checkpoint = True
        self.num_kv_cache_groups = len(kv_cache_config.kv_cache_groups)
        self.block_pool = self.coordinator.block_pool
        self.retained_hit_group_ids = tuple(
            manager.kv_cache_group_id for manager in self.coordinator.single_type_managers
            if manager.retains_longer_hit
        )
        self.kv_cache_config = kv_cache_config
        assert watermark >= 0.0, "watermark must be non-negative"
        self.watermark_blocks = int(watermark * kv_cache_config.num_blocks)
        self.empty_kv_cache_blocks = KVCacheBlocks(tuple(() for _ in range(self.num_kv_cache_groups)))
        # kvproof: the request block hasher the engine builds for this cache (engine/core.py, the
        # scheduler's hash_block_size and num_hash_lookahead_tokens), for make_request.
        self.hash_block_size = hash_block_size
        self.scheduler_block_size = scheduler_block_size
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self.block_hasher = (
            get_request_block_hasher(hash_block_size, num_hash_lookahead_tokens)
            if enable_caching else None
        )

    # -- kvproof constructors -----------------------------------------------------------------

    @classmethod
    def from_plan(cls, plan: Any, *, watermark: float = 0.0,
                  enable_mamba_shared_prefix_checkpoint: bool = False) -> KVCacheManager:
        """The manager ``Scheduler.__init__`` builds (``v1/core/sched/scheduler.py:345-365``) for a
        :class:`kvproof.sim.startup.plan.Plan`: the scheduler's KV cache config (uniform-type groups replaced
        by their first layer spec, ``kv_cache_utils.py:1096-1117``) with ``plan.num_blocks``;
        ``max_model_len``; ``max_in_flight_tokens = VllmConfig.max_in_flight_tokens``;
        ``enable_caching = enable_prefix_caching``; ``use_eagle = use_eagle_block_drop``, cleared by
        lookahead block hashes (scheduler.py:341-343); ``num_hash_lookahead_tokens``;
        ``num_prefill_lookahead = num_prefill_lookahead_tokens``; ``pcp_world_size = 1``;
        ``scheduler_block_size``; ``hash_block_size``; ``watermark`` (``SchedulerConfig.watermark``,
        default 0.0, ``config/scheduler.py:196``).

        The request block hasher (``block_hasher``, used by :meth:`make_request`) is vLLM's
        ``get_request_block_hasher(hash_block_size, ..., num_hash_lookahead_tokens)``
        (``v1/engine/core.py``), built only when prefix caching (or a connector) needs hashes.
        """
        s = plan.settings
        groups = [
            SchedulerKVCacheGroup(kv_cache_spec=g.scheduler_spec, is_eagle_group=g.is_eagle_group,
                                  layer_names=list(g.layer_names))
            for g in plan.groups
        ]
        config = SchedulerKVCacheConfig(
            num_blocks=plan.num_blocks,
            kv_cache_groups=groups,
            prefix_cache_retention_interval=s.prefix_cache_retention_interval,
        )
        use_eagle = s.use_eagle_block_drop and not s.num_hash_lookahead_tokens
        return cls(
            kv_cache_config=config,
            max_model_len=plan.max_model_len,
            scheduler_block_size=plan.scheduler_block_size,
            hash_block_size=plan.hash_block_size,
            max_in_flight_tokens=s.max_in_flight_tokens,
            enable_caching=s.enable_prefix_caching,
            use_eagle=use_eagle,
            num_hash_lookahead_tokens=s.num_hash_lookahead_tokens,
            num_prefill_lookahead=s.num_prefill_lookahead_tokens,
            dcp_world_size=s.dcp,
            pcp_world_size=1,
            watermark=watermark,
            enable_mamba_shared_prefix_checkpoint=enable_mamba_shared_prefix_checkpoint,
        )

    def make_request(self, request_id: str, prompt_token_ids: Sequence[int], max_tokens: int = 1) -> Request:
        """A :class:`kvproof.sim.requests.request.Request` hashed the way this cache needs."""
        return Request(request_id=request_id, prompt_token_ids=prompt_token_ids, max_tokens=max_tokens,
                       block_hasher=self.block_hasher)

    # -- vLLM's interface ---------------------------------------------------------------------

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_num_free_blocks(self) -> int:
        return self.block_pool.get_num_free_blocks()

    def prefix_cache_lookup_enabled(self, request: Request) -> bool:
        """238-240."""
        return self.enable_caching and not request.skip_reading_prefix_cache

    def get_computed_blocks(self, request: Request, max_cache_hit_length: int | None = None
                            ) -> tuple[KVCacheBlocks, int, int]:
        """254-316: (hit blocks, hit tokens, shared-prefix boundary). The hit is capped at
        ``num_tokens - 1`` (the last token is recomputed for its logits)."""
        if not self.prefix_cache_lookup_enabled(request):
            return self.empty_kv_cache_blocks, 0, 0
        if max_cache_hit_length is None:
            max_cache_hit_length = request.num_tokens - 1
        computed_blocks, num_new_computed_tokens, num_uncached = self.coordinator.find_longest_cache_hit(
            request.block_hashes, max_cache_hit_length
        )
        shared_prefix_boundary = num_new_computed_tokens + num_uncached if num_uncached else 0
        return self.create_kv_cache_blocks(computed_blocks), num_new_computed_tokens, shared_prefix_boundary

    def get_computed_blocks_for_connector(self, request: Request, max_cache_hit_length: int | None = None):
        """318-378."""
        coordinator = self.coordinator
        if not (
            self.kv_cache_config.has_mamba_layers
            and isinstance(coordinator, HybridKVCacheCoordinator)
            and coordinator.full_attention_group_id is not None
        ):
            return *self.get_computed_blocks(request, max_cache_hit_length), False
        if not self.prefix_cache_lookup_enabled(request):
            return self.empty_kv_cache_blocks, 0, 0, False
        if max_cache_hit_length is None:
            max_cache_hit_length = request.num_tokens - 1
        fa_group_id = coordinator.full_attention_group_id
        computed, per_group_hits = coordinator.find_longest_cache_hit_per_group(
            request.block_hashes, max_cache_hit_length
        )
        if any(hit > per_group_hits[fa_group_id] for hit in per_group_hits):
            return *self.get_computed_blocks(request, max_cache_hit_length), False
        num_local = per_group_hits[fa_group_id]
        return self.create_kv_cache_blocks(computed), num_local, 0, min(per_group_hits) < num_local

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: KVCacheBlocks | None = None,
        num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        num_encoder_tokens: int = 0,
        full_sequence_must_fit: bool = False,
        reserved_blocks: int = 0,
        has_scheduled_reqs: bool = True,
        skip_zeroing_group_ids: tuple[int, ...] = (),
    ) -> KVCacheBlocks | None:
        """380-627. In order: (a) the optional admission gate ``full_sequence_must_fit`` (the full
        sequence with the recycling-aware cap); (b) ``remove_skipped_blocks`` on the processed-token
        basis; (c) ``get_num_blocks_to_allocate`` for ``min(computed + new + lookahead,
        max_model_len)``; (d) the hit blocks, then new blocks; (e) ``cache_blocks`` up to
        ``min(computed + new, num_tokens)``. Returns None when the blocks do not fit."""
        if num_new_tokens == 0 and num_external_computed_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no computed tokens to adopt")
        if new_computed_blocks is not None:
            new_computed_block_list = new_computed_blocks.blocks
            if self.retained_hit_group_ids:
                reused = num_new_computed_tokens + num_external_computed_tokens
                groups = list(new_computed_block_list)
                for group_id in self.retained_hit_group_ids:
                    manager = self.coordinator.single_type_managers[group_id]
                    groups[group_id] = groups[group_id][: cdiv(reused, manager.block_size)]
                new_computed_block_list = tuple(groups)
        else:
            new_computed_block_list = self.empty_kv_cache_blocks.blocks

        num_local_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        total_computed_tokens = min(num_local_computed_tokens + num_external_computed_tokens, self.max_model_len)

        watermark_blocks = 0
        if has_scheduled_reqs and request.status in _WAITING_STATUSES:
            watermark_blocks = self.watermark_blocks

        prefill_end = max(request.num_prompt_tokens, request.num_tokens - 1)

        if full_sequence_must_fit:  # 527-546
            full_num_tokens = min(request.num_tokens, self.max_model_len)
            num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
                request_id=request.request_id,
                num_tokens=full_num_tokens,
                new_computed_blocks=new_computed_block_list,
                num_encoder_tokens=num_encoder_tokens,
                total_computed_tokens=total_computed_tokens,
                num_local_computed_tokens=num_local_computed_tokens,
                num_tokens_main_model=full_num_tokens,
                apply_admission_cap=True,
                prefill_end=prefill_end,
            )
            if num_blocks_to_allocate + watermark_blocks > self.block_pool.get_num_free_blocks():
                return None

        num_tokens_main_model = total_computed_tokens + num_new_tokens
        num_tokens_need_slot = min(num_tokens_main_model + num_lookahead_tokens, self.max_model_len)

        # 553-568: free out-of-window blocks first (processed-token basis).
        self.coordinator.remove_skipped_blocks(
            request.request_id,
            max(0, total_computed_tokens - request.num_in_flight_tokens),
            num_prompt_tokens=request.num_prompt_tokens,
        )

        num_blocks_to_allocate = self.coordinator.get_num_blocks_to_allocate(
            request.request_id,  # request_id
            num_tokens_need_slot,  # num_tokens
            new_computed_block_list,  # new_computed_blocks
            num_encoder_tokens,  # num_encoder_tokens
            num_local_computed_tokens + num_external_computed_tokens,  # total_computed_tokens
            num_local_computed_tokens,  # num_local_computed_tokens
            num_tokens_main_model,  # num_tokens_main_model
            False,  # apply_admission_cap
            prefill_end,  # prefill_end
        )
        available_blocks = self.block_pool.get_num_free_blocks() - reserved_blocks
        if num_blocks_to_allocate + watermark_blocks > available_blocks:
            return None

        if new_computed_block_list is not self.empty_kv_cache_blocks.blocks or num_external_computed_tokens > 0:
            self.coordinator.allocate_new_computed_blocks(
                request_id=request.request_id,
                new_computed_blocks=new_computed_block_list,
                num_local_computed_tokens=num_local_computed_tokens,
                num_external_computed_tokens=num_external_computed_tokens,
                skip_zeroing_group_ids=skip_zeroing_group_ids,
            )

        new_blocks = self.coordinator.allocate_new_blocks(
            request.request_id, num_tokens_need_slot, num_tokens_main_model, num_encoder_tokens
        )
        if delay_cache_blocks:
            return self.create_kv_cache_blocks(new_blocks)
        num_tokens_to_cache = min(total_computed_tokens + num_new_tokens, request.num_tokens)
        self.coordinator.cache_blocks(request, num_tokens_to_cache)
        return self.create_kv_cache_blocks(new_blocks)

    def free(self, request: Request) -> None:
        """629-638: blocks back to the pool in reverse order."""
        self.coordinator.free(request.request_id)

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        """640-656."""
        self.coordinator.remove_skipped_blocks(request_id, processed_computed_tokens, num_prompt_tokens)

    def pop_blocks_for_free(self, request: Request) -> list[KVCacheBlock]:
        """658-670."""
        return self.coordinator.pop_blocks_for_free(request.request_id)

    def reset_prefix_cache(self) -> bool:
        """681-696."""
        return self.coordinator.reset_prefix_cache()

    def get_num_common_prefix_blocks(self, running_request_id: str) -> list[int]:
        """698-701 (deprecated, always 0)."""
        return [0] * self.num_kv_cache_groups

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        """735-737."""
        return self.create_kv_cache_blocks(self.coordinator.get_blocks(request_id))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """739-741."""
        return self.get_blocks(request_id).get_block_ids()

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """800-810."""
        if self.enable_caching:
            self.coordinator.cache_blocks(request, num_computed_tokens)

    def create_kv_cache_blocks(self, blocks: tuple[list[KVCacheBlock], ...]) -> KVCacheBlocks:
        """812-816."""
        return KVCacheBlocks(blocks) if any(blocks) else self.empty_kv_cache_blocks

    def take_new_block_ids(self) -> list[int]:
        """849-854."""
        ids: list[int] = []
        for mgr in self.coordinator.single_type_managers:
            ids.extend(mgr.take_new_block_ids())
        return ids

    def take_kv_cache_block_copies(self):
        """870-887: pending partial-hit copies ``(src, dst)`` and the blocks they retain (the
        scheduler frees the retained refs after the step, ``scheduler.py:1698-1706, 3095-3120``)."""
        pending: list[tuple[KVCacheBlock, KVCacheBlock]] = []
        for mgr in self.coordinator.single_type_managers:
            pending.extend(mgr.take_pending_cow_copies())
        copies = [(src.block_id, dst.block_id) for src, dst in pending]
        retained = [block for pair in pending for block in pair]
        return copies, retained

    def new_step_starts(self) -> None:
        """928-931."""
        self.coordinator.new_step_starts()

    # -- kvproof: decode runs (docs/requests.md, "Decode runs") ----------------------------------

    @property
    def supports_decode_runs(self) -> bool:
        return self.coordinator.supports_decode_runs

    @property
    def decode_step_max_blocks(self) -> int:
        """At most this many blocks leave the pool in one request's one-token decode step."""
        return sum(manager.decode_step_max_blocks for manager in self.coordinator.single_type_managers)

    def decode_quiet_steps(self, request: Request, num_computed_tokens: int, lookahead_tokens: int = 0,
                           after_sampling: bool = False) -> int:
        """How many one-token decode steps of a running ``request`` from ``num_computed_tokens`` on
        are no-ops of ``allocate_slots(request, 1, num_lookahead_tokens=lookahead_tokens)`` (and, with
        ``after_sampling``, of the scheduler's ``cache_blocks`` after the sampled token): no block
        allocated, freed or cached, no manager state changed (``KVCacheCoordinator.decode_quiet_steps``)."""
        return self.coordinator.decode_quiet_steps(request, num_computed_tokens, lookahead_tokens, after_sampling)

    @functools.cached_property
    def _plain_decode_groups(self) -> tuple[SingleTypeKVCacheManager, ...] | None:
        """The groups, when every one is a ``FullAttentionManager`` itself (no subclass: none skips a
        token, none is cross attention); else None. For these a running decode's ``allocate_slots``
        reduces to its groups' calls (:meth:`decode_event`)."""
        managers = self.coordinator.single_type_managers
        return managers if all(type(m) is FullAttentionManager for m in managers) else None

    def decode_event(self, request: Request, num_computed_tokens: int, lookahead_tokens: int = 0,
                     after_sampling: bool = False) -> int | None:
        """kvproof (decode runs): ``allocate_slots(request, 1, num_lookahead_tokens=L)`` of a running
        one-token decode at computed count ``c`` (``request.num_computed_tokens == c``, ``num_tokens
        == c + 1``, nothing in flight), then :meth:`decode_quiet_steps` from ``c + 1``; None when
        the blocks do not fit.

        With :attr:`_plain_decode_groups` the call is made of the calls it reduces to (548-627): no
        hit blocks, no watermark and no admission gate for a running request, nothing skipped; each
        group's ``get_num_blocks_to_allocate`` and the free check, each group's
        ``allocate_new_blocks`` for ``min(c + 1 + L, max_model_len)`` tokens, then the coordinator's
        ``cache_blocks`` of ``c + 1`` tokens. Otherwise the real ``allocate_slots``.
        ``tests/sim/test_decode_event.py`` checks that the two leave the same rows, cache and free
        queue."""
        groups = self._plain_decode_groups
        if groups is None:
            if self.allocate_slots(request, 1, num_lookahead_tokens=lookahead_tokens) is None:
                return None
            return self.decode_quiet_steps(request, num_computed_tokens + 1, lookahead_tokens, after_sampling)
        request_id = request.request_id
        c = num_computed_tokens
        need = min(c + 1 + lookahead_tokens, self.max_model_len)
        num_blocks = 0
        for m in groups:
            num_blocks += m.get_num_blocks_to_allocate(request_id, need, (), c, c, c + 1)
        if num_blocks > self.block_pool.get_num_free_blocks():
            return None
        for m in groups:
            m.allocate_new_blocks(request_id, need, c + 1)
        self.coordinator.cache_blocks(request, c + 1)
        return self.decode_quiet_steps(request, c + 1, lookahead_tokens, after_sampling)
