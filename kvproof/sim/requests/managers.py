"""vLLM 0.33.0's single-type KV cache managers, ported (``v1/core/single_type_kv_cache_manager.py``).

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text (empty, as vLLM raises it)
must not depend on pytest, which rewrites the asserts of every module of a distribution that
ships a pytest plugin (kvproof does: ``kvproof.pytest_plugin``).

Paths are relative to the ``vllm/`` package; line numbers are those of 0.33.0.

| class | vLLM source |
|---|---|
| ``SingleTypeKVCacheManager`` | 49-736 |
| ``FullAttentionManager`` (full, MLA, hidden state) | 739-897 |
| ``RSWAManager`` | 900-943 |
| ``SlidingWindowManager`` (also ``SlidingWindowMLASpec``) | 946-1183 |
| ``CircularBufferManager`` | 1186-1273 |
| ``ChunkedLocalAttentionManager`` | 1276-1425 |
| ``CrossAttentionManager`` | 2138-2196 |
| ``SinkFullAttentionManager`` | 2199-2220 |

``MambaManager`` (1428-2135) lives in ``kvproof/sim/requests/mamba_manager.py`` (a subclass of this base);
``get_manager_for_kv_cache_spec`` and the registry (2600-2730) in ``manager_registry.py``, which imports
both, so neither imports the other's module back.

Not ported (and why): the HiSparse managers (2223-2598: host pools are not modelled; their group
roles never occur in a kvproof plan, so ``role`` is ignored); KV-connector hooks are kept only where
they touch block accounting (``allocate_external_computed_blocks``; kvproof never has external
tokens); worker-side zeroing ids are recorded (``new_block_ids``) as vLLM does but nothing reads them.
DCP follows vLLM (manager block size ``block_size * dcp`` for DCP-sharded specs, 109-111); PCP is 1
in the scheduler.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import ClassVar

from .block_pool import (
    BlockHashList,
    BlockHashListWithBlockSize,
    BlockPool,
    KVCacheBlock,
    null_head_len,
    resolve_block_hashes,
    trim_null_head,
)
from ..startup.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowSpec,
)


def cdiv(a: int, b: int) -> int:
    """``vllm.utils.math_utils.cdiv``."""
    return -(a // -b)


class SingleTypeKVCacheManager:
    """``SingleTypeKVCacheManager`` (49-736): the block accounting of one KV cache group.

    Attribute and method names are vLLM's: ``req_to_blocks``, ``num_cached_block``,
    ``block_pool``, ``block_size``, ``kv_cache_spec``, ``get_num_blocks_to_allocate``,
    ``add_local_computed_blocks``, ``allocate_new_blocks``, ``cache_blocks``, ``free``,
    ``remove_skipped_blocks``, ``get_num_skipped_tokens``, ``find_longest_cache_hit`` (a classmethod).
    """

    supports_fine_grained_hash_lookup: ClassVar[bool] = False
    retains_longer_hit: bool = False

    def __init__(
        self,
        kv_cache_spec: KVCacheSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        scheduler_block_size: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
        needs_kv_cache_zeroing: bool = False,
        max_admission_blocks_per_request: int | None = None,
    ) -> None:
        # 67-151
        self.scheduler_block_size = scheduler_block_size
        self.cache_hit_alignment_tokens = scheduler_block_size
        self.dcp_world_size = dcp_world_size if kv_cache_spec.dcp_sharded else 1
        self.pcp_world_size = pcp_world_size if kv_cache_spec.dcp_sharded else 1
        self.block_size = kv_cache_spec.block_size * self.dcp_world_size
        self.kv_cache_spec = kv_cache_spec
        self._prefix_cacheable = kv_cache_spec.prefix_cacheable  # a property of the spec: read once
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self.max_admission_blocks_per_request = max_admission_blocks_per_request
        self._record_new_block_ids = (
            needs_kv_cache_zeroing
            and isinstance(kv_cache_spec, AttentionSpec)
            and not isinstance(kv_cache_spec, CircularBufferSpec)
        )
        self.new_block_ids: list[int] = []
        self.req_to_blocks: defaultdict[str, list[KVCacheBlock]] = defaultdict(list)
        self.num_cached_block: dict[str, int] = {}
        self.kv_cache_group_id = kv_cache_group_id
        self._null_block = block_pool.null_block
        self.use_eagle = False
        self.shared_prefix_checkpoint = False
        self._partial_hit_reqs: dict[str, tuple[int, KVCacheBlock]] = {}
        self._pending_cow_copies: list[tuple[KVCacheBlock, KVCacheBlock]] = []
        self._pending_boundary_state_offloads: list = []

    @property
    def has_positionally_stable_blocks(self) -> bool:
        return True

    @classmethod
    def _get_num_evictable_blocks(cls, blocks: Sequence[KVCacheBlock]) -> int:
        if not blocks:  # (a running request's call: no hit blocks)
            return 0
        return sum(blk.ref_cnt == 0 and not blk.is_null for blk in blocks)

    def _has_partial_local_hit(self, new_computed_blocks: Sequence[KVCacheBlock], num_local_computed_tokens: int) -> bool:
        # 159-168
        return len(new_computed_blocks) > 0 and num_local_computed_tokens % self.block_size != 0

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        num_local_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
        prefill_end: int = 0,
    ) -> int:
        """``get_num_blocks_to_allocate`` (170-266)."""
        num_required_blocks = cdiv(num_tokens, self.block_size)
        if apply_admission_cap and self.max_admission_blocks_per_request is not None:
            num_required_blocks = min(num_required_blocks, self.max_admission_blocks_per_request)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))

        if request_id in self.num_cached_block:
            # A running request has no new prefix-cache hits.
            assert len(new_computed_blocks) == 0
            return max(num_required_blocks - num_req_blocks, 0)

        num_skipped_tokens = self.get_num_skipped_tokens(total_computed_tokens)
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        num_skipped_blocks = num_skipped_tokens // self.block_size
        num_new_blocks = max(num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks), 0)
        num_skipped_new_computed_blocks = max(0, num_skipped_blocks - num_req_blocks)
        num_evictable_blocks = self._get_num_evictable_blocks(new_computed_blocks[num_skipped_new_computed_blocks:])
        if self._has_partial_local_hit(new_computed_blocks, num_local_computed_tokens):
            num_new_blocks += 1
        return num_new_blocks + num_evictable_blocks

    def add_local_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
    ) -> None:
        """``add_local_computed_blocks`` (268-325): touch the hit blocks, pad skipped ones with nulls."""
        req_blocks = self.req_to_blocks[request_id]
        assert len(req_blocks) == 0
        num_total_computed_tokens = num_local_computed_tokens + num_external_computed_tokens
        num_skipped_tokens = self.get_num_skipped_tokens(num_total_computed_tokens)
        num_skipped_blocks = num_skipped_tokens // self.block_size
        if num_skipped_blocks > 0:
            new_computed_blocks = new_computed_blocks[num_skipped_blocks:]
        if self.enable_caching:
            self.block_pool.touch(new_computed_blocks)
        else:
            assert not any(new_computed_blocks), "Computed blocks should be empty when prefix caching is disabled"
        req_blocks.extend([self._null_block] * num_skipped_blocks)
        req_blocks.extend(new_computed_blocks)
        self.num_cached_block[request_id] = len(req_blocks)
        if self._has_partial_local_hit(new_computed_blocks, num_local_computed_tokens):
            block_idx = num_local_computed_tokens // self.block_size
            self._partial_hit_reqs[request_id] = (block_idx, new_computed_blocks[-1])
            self.num_cached_block[request_id] = block_idx

    def allocate_external_computed_blocks(
        self,
        request_id: str,
        num_local_computed_tokens: int,
        num_external_computed_tokens: int,
        record_for_zeroing: bool = True,
    ) -> None:
        """``allocate_external_computed_blocks`` (327-368); kvproof has no KV connector, kept for fidelity."""
        num_total_computed_tokens = num_local_computed_tokens + num_external_computed_tokens
        num_skipped_tokens = self.get_num_skipped_tokens(num_total_computed_tokens)
        if num_skipped_tokens > 0:
            num_external_computed_tokens = min(
                num_total_computed_tokens - num_skipped_tokens, num_external_computed_tokens
            )
        if num_external_computed_tokens <= 0:
            return
        req_blocks = self.req_to_blocks[request_id]
        num_new_blocks = max(0, cdiv(num_total_computed_tokens, self.block_size) - len(req_blocks))
        allocated_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(allocated_blocks)
        if self._record_new_block_ids and record_for_zeroing:
            self.new_block_ids.extend(b.block_id for b in allocated_blocks)

    def allocate_new_blocks(self, request_id: str, num_tokens: int, num_tokens_main_model: int) -> list[KVCacheBlock]:
        """``allocate_new_blocks`` (370-410): grow the row to ``cdiv(num_tokens, block_size)``."""
        cow_blocks: list[KVCacheBlock] = []
        if request_id in self._partial_hit_reqs:
            block_idx, source_block = self._partial_hit_reqs.pop(request_id)
            cow_block = self.block_pool.get_new_blocks(1)[0]
            self._apply_cow(request_id, block_idx, source_block, cow_block)
            self.new_block_ids.append(cow_block.block_id)
            cow_blocks.append(cow_block)
        req_blocks = self.req_to_blocks[request_id]
        num_required_blocks = cdiv(num_tokens, self.block_size)
        num_new_blocks = num_required_blocks - len(req_blocks)
        if num_new_blocks <= 0:
            return cow_blocks
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(new_blocks)
        if self._record_new_block_ids:
            self.new_block_ids.extend(b.block_id for b in new_blocks)
        return cow_blocks + new_blocks

    @property
    def records_new_block_ids(self) -> bool:
        return self._record_new_block_ids

    def take_new_block_ids(self) -> list[int]:
        ids = self.new_block_ids
        self.new_block_ids = []
        return ids

    def take_pending_cow_copies(self) -> list[tuple[KVCacheBlock, KVCacheBlock]]:
        pending = self._pending_cow_copies
        self._pending_cow_copies = []
        return pending

    def take_pending_boundary_state_offloads(self) -> list:
        pending = self._pending_boundary_state_offloads
        self._pending_boundary_state_offloads = []
        return pending

    def finalize_partial_tail_offload(self, request_id: str, num_computed_tokens: int, num_in_flight_tokens: int):
        return None

    def _apply_cow(self, request_id: str, block_idx: int, source_block: KVCacheBlock, cow_block: KVCacheBlock) -> None:
        """``_apply_cow`` (457-475): the partial-hit tail becomes a private copy; both ends stay
        referenced until the worker copied (``cow_block`` takes an extra ref)."""
        req_blocks = self.req_to_blocks[request_id]
        assert block_idx < len(req_blocks)
        assert req_blocks[block_idx] is source_block
        assert not source_block.is_null and source_block.ref_cnt > 0
        req_blocks[block_idx] = cow_block
        self._pending_cow_copies.append((source_block, cow_block))
        cow_block.ref_cnt += 1

    def cache_blocks(
        self,
        request,
        num_tokens: int,
        retention_interval: int | None = None,
        *,
        replay_boundaries: Sequence[int] = (),
    ) -> None:
        """``cache_blocks`` (477-542): hash the request's full blocks up to ``num_tokens``."""
        if not self._prefix_cacheable:
            return
        num_cached_blocks = self.num_cached_block.get(request.request_id, 0)
        num_hashed_tokens = len(request.block_hashes) * self.block_pool.hash_block_size
        num_full_blocks = min(num_tokens, num_hashed_tokens) // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        reachable_boundaries = [*replay_boundaries]
        shared_prefix_boundary = getattr(request, "shared_prefix_boundary", 0)
        if shared_prefix_boundary:
            reachable_boundaries.append(shared_prefix_boundary)
            if self.use_eagle:
                reachable_boundaries.append(shared_prefix_boundary - self.block_size)
        block_mask = self.reachable_block_mask(
            start_block=num_cached_blocks,
            end_block=num_full_blocks,
            alignment_tokens=self.cache_hit_alignment_tokens,
            kv_cache_spec=self.kv_cache_spec,
            use_eagle=self.use_eagle,
            retention_interval=retention_interval,
            reachable_boundaries=reachable_boundaries,
            dcp_world_size=self.dcp_world_size,
        )
        self.block_pool.cache_full_blocks(
            request=request,
            blocks=self.req_to_blocks[request.request_id],
            num_cached_blocks=num_cached_blocks,
            num_full_blocks=num_full_blocks,
            block_size=self.block_size,
            kv_cache_group_id=self.kv_cache_group_id,
            block_mask=block_mask,
        )
        self.num_cached_block[request.request_id] = num_full_blocks

    @classmethod
    def reachable_block_mask(
        cls,
        start_block: int,
        end_block: int,
        alignment_tokens: int | None,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        retention_interval: int | None = None,
        reachable_boundaries: Sequence[int] = (),
        dcp_world_size: int = 1,
        final_segment_end_block: int | None = None,
    ) -> list[bool] | None:
        """``reachable_block_mask`` (544-573): ``None`` = cache every non-null block."""
        return None

    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """``pop_blocks_for_free`` (575-589): the row without its leading nulls."""
        req_blocks = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        self._partial_hit_reqs.pop(request_id, None)
        return trim_null_head(req_blocks)

    def free(self, request_id: str) -> None:
        """``free`` (591-599): blocks return in reverse order (the tail is evicted first)."""
        self.block_pool.free_blocks(reversed(self.pop_blocks_for_free(request_id)))

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        drop_eagle_block: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """``find_longest_cache_hit`` (601-660, abstract): per-group hit blocks (skipped ones as nulls)
        and the hit length in tokens."""
        raise NotImplementedError

    def _remove_blocks_in_range(self, request_id: str, first_block: int, last_block: int) -> None:
        """``_remove_blocks_in_range`` (662-688): free ``[first_block, last_block)`` back to front,
        stopping at the first null, and null them in the row."""
        if request_id not in self.req_to_blocks:
            return
        if first_block >= last_block:
            return
        blocks = self.req_to_blocks[request_id]
        last_block = min(last_block, len(blocks))
        freed: list[KVCacheBlock] = []
        for i in range(last_block - 1, first_block - 1, -1):
            if blocks[i] is self._null_block:
                break
            freed.append(blocks[i])
            blocks[i] = self._null_block
        if freed:
            self.block_pool.free_blocks(freed)

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        """``remove_skipped_blocks`` (690-720)."""
        del num_prompt_tokens
        num_skipped_tokens = self.get_num_skipped_tokens(processed_computed_tokens)
        if num_skipped_tokens <= 0:
            return
        blocks = self.req_to_blocks[request_id]
        num_skipped_blocks = num_skipped_tokens // self.block_size
        num_skipped_blocks = min(num_skipped_blocks, len(blocks))
        self._remove_blocks_in_range(request_id, 0, num_skipped_blocks)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """``get_num_skipped_tokens`` (722-733): no token is skipped by default."""
        return 0

    def min_computed_skipping(self, num_skipped_tokens: int) -> int | None:
        """kvproof: the least ``c`` with ``get_num_skipped_tokens(c) >= num_skipped_tokens`` (> 0), the
        closed-form inverse of :meth:`get_num_skipped_tokens` (None: no count reaches it)."""
        return None

    def new_step_starts(self) -> None:
        return None

    # -- kvproof: decode runs (docs/requests.md, "Decode runs") ----------------------------------

    #: Whether :meth:`decode_quiet_steps` models this manager; one that does not keeps every step real.
    supports_decode_runs: ClassVar[bool] = False
    #: Upper bound on the blocks one one-token decode step can take from the pool in this group.
    decode_step_max_blocks: ClassVar[int] = 1

    def _decode_extra_blocks(self) -> int:
        """Blocks a decode row holds beyond ``cdiv(computed + 1, block_size)`` (Mamba's speculative ones)."""
        return 0

    def decode_quiet_steps(self, request, num_computed_tokens: int, coordinator, lookahead_tokens: int = 0,
                           after_sampling: bool = False) -> int:
        """kvproof: how many consecutive one-token decode steps, the first at computed count
        ``c = num_computed_tokens``, leave this group exactly as they find it (0: the next one may not).

        A running decode's ``allocate_slots(request, 1, num_lookahead_tokens=L)``
        (``kv_cache_manager.py:548-627``) calls, per group, ``remove_skipped_blocks(c)``,
        ``get_num_blocks_to_allocate`` (pure for a running request, 170-266),
        ``allocate_new_blocks(c + 1 + L)`` (370-410) and, through the coordinator,
        ``cache_blocks(get_num_cacheable_tokens(c + 1))`` (477-542); with ``after_sampling`` the
        scheduler caches again once the sampled token is appended (speculative decoding,
        ``scheduler.py:2402-2415``). Each is a no-op while ``cdiv(c + 1 + L, block_size)`` fits the
        row, ``get_num_skipped_tokens(c) // block_size`` does not pass the row's leading nulls (the
        removal walks back from there and stops at the first null, 662-720), and the cacheable and
        hashed tokens stay below the next full block (``num_cached_block + 1``); the step at which
        one of these first fails is an event and runs for real. ``coordinator``: the one calling
        ``cache_blocks`` for this group, or None when it skips the group (caching off). Conservative:
        an event may turn out to be a no-op, never the reverse (``tests/sim/test_decode_runs.py``)."""
        if not self.supports_decode_runs:
            return 0
        request_id = request.request_id
        blocks = self.req_to_blocks.get(request_id)
        if not blocks or request_id in self._partial_hit_reqs:  # the next allocation copies the hit tail
            return 0
        c = num_computed_tokens
        bs = self.block_size
        # first c with cdiv(c + 1 + L, bs) > the row (the max_model_len cap only lowers the need)
        end = (len(blocks) - self._decode_extra_blocks()) * bs - lookahead_tokens
        first_skipping = self.min_computed_skipping((null_head_len(blocks) + 1) * bs)
        if first_skipping is not None:
            end = min(end, first_skipping)
        if coordinator is not None and self._prefix_cacheable:
            end = min(end, coordinator.first_decode_step_caching(
                (self.num_cached_block.get(request_id, 0) + 1) * bs, self.kv_cache_group_id, after_sampling
            ))
            first_tail = self._decode_tail_event(request, c, coordinator)
            if first_tail is not None:
                end = min(end, first_tail)
        return max(end - c, 0)

    def _decode_tail_event(self, request, num_computed_tokens: int, coordinator) -> int | None:
        """The first computed count at which this group's partial-tail caching may act in a decode
        step (None: never while the row keeps its length); none by default."""
        return None


class FullAttentionManager(SingleTypeKVCacheManager):
    """``FullAttentionManager`` (739-897); also MLA, hidden-state and (through the registry) indexer
    groups."""

    supports_fine_grained_hash_lookup: ClassVar[bool] = True
    supports_decode_runs: ClassVar[bool] = True

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        drop_eagle_block: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """742-838: the left-to-right run of cached blocks; fine-grained interior probe; EAGLE drop;
        round down to the alignment."""
        assert isinstance(kv_cache_spec, FullAttentionSpec | ChunkedLocalAttentionSpec), (
            "FullAttentionManager can only be used for full attention and chunked local attention groups"
        )
        block_size = kv_cache_spec.block_size
        if dcp_world_size > 1:
            block_size *= dcp_world_size
        block_hashes = resolve_block_hashes(
            block_hashes,
            block_pool.hash_block_size,
            block_size,
            supports_fine_grained_hash_lookup=cls.supports_fine_grained_hash_lookup,
            alignment_tokens=alignment_tokens,
        )
        fine_grained = alignment_tokens < block_size and block_size % alignment_tokens == 0
        if fine_grained:
            full_block_hashes: BlockHashList = BlockHashListWithBlockSize(block_hashes, alignment_tokens, block_size)
        else:
            full_block_hashes = block_hashes
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in range(len(kv_cache_group_ids)))
        for block_hash in itertools.islice(full_block_hashes, max_length // block_size):
            cached_block = block_pool.get_cached_block(block_hash, kv_cache_group_ids)
            if not cached_block:
                break
            for computed, cached in zip(computed_blocks, cached_block):
                computed.append(cached)
        hit_length = len(computed_blocks[0]) * block_size
        if fine_grained:
            scale_factor = block_size // alignment_tokens
            first_partial_idx = len(computed_blocks[0]) * scale_factor
            max_partial_idx = min(
                first_partial_idx + scale_factor - 1, max_length // alignment_tokens, len(block_hashes)
            )
            for fine_idx in range(max_partial_idx - 1, first_partial_idx - 1, -1):
                cached_tail = block_pool.get_cached_block(block_hashes[fine_idx], kv_cache_group_ids)
                if not cached_tail:
                    continue
                for computed, cached in zip(computed_blocks, cached_tail):
                    computed.append(cached)
                hit_length = (fine_idx + 1) * alignment_tokens
                break
        if drop_eagle_block and hit_length > 0:
            hit_length -= min(alignment_tokens, block_size)
        hit_length -= hit_length % alignment_tokens
        num_blocks = cdiv(hit_length, block_size)
        for computed in computed_blocks:
            del computed[num_blocks:]
        return computed_blocks, hit_length

    def cache_blocks(self, request, num_tokens: int, retention_interval: int | None = None, *,
                     replay_boundaries: Sequence[int] = ()) -> None:
        """840-857: full blocks, then the prompt's partial tail when ``block_size != hash_block_size``."""
        super().cache_blocks(request, num_tokens, retention_interval=retention_interval,
                             replay_boundaries=replay_boundaries)
        if self.block_size == self.block_pool.hash_block_size:
            return
        self._cache_partial_tail_block(request, num_tokens)

    def _cache_partial_tail_block(self, request, num_tokens: int) -> None:
        """``_cache_partial_tail_block`` (859-897)."""
        target = self._partial_tail_target(request, num_tokens)
        if target is None:
            return
        block, boundary_tokens = target
        self.block_pool.cache_partial_block(
            request=request,
            block=block,
            num_tokens=boundary_tokens,
            kv_cache_group_id=self.kv_cache_group_id,
            block_size=self.block_size,
        )

    def _partial_tail_boundary(self, request) -> int:
        """The prompt's last hash-unit boundary that ``_cache_partial_tail_block`` keys (863-866)."""
        hash_block_size = self.block_pool.hash_block_size
        token_limit = request.num_prompt_tokens if self.use_eagle else request.num_prompt_tokens - 1
        return min(token_limit // hash_block_size, len(request.block_hashes)) * hash_block_size

    def _partial_tail_target(self, request, num_tokens: int) -> tuple[KVCacheBlock, int] | None:
        """The block and boundary ``_cache_partial_tail_block`` caches for ``num_tokens`` (867-891), or
        None where it returns early."""
        boundary_tokens = self._partial_tail_boundary(request)
        if boundary_tokens == 0 or boundary_tokens > num_tokens:
            return None
        if boundary_tokens % self.block_size == 0:
            return None
        blocks = self.req_to_blocks[request.request_id]
        block_idx = boundary_tokens // self.block_size
        if block_idx >= len(blocks):
            return None
        return blocks[block_idx], boundary_tokens

    def _decode_tail_event(self, request, num_computed_tokens: int, coordinator) -> int | None:
        """kvproof (decode runs): the partial tail is keyed once (``cache_partial_block`` of a block
        already keyed there is a no-op, ``block_pool.py:486-603``); before the cacheable tokens reach
        the boundary it returns early."""
        if self.block_size == self.block_pool.hash_block_size:
            return None  # 849-850: no partial tail
        hash_block_size = self.block_pool.hash_block_size
        token_limit = request.num_prompt_tokens if self.use_eagle else request.num_prompt_tokens - 1
        if len(request.block_hashes) < token_limit // hash_block_size:
            return num_computed_tokens  # the boundary still moves with the hashes
        boundary_tokens = self._partial_tail_boundary(request)
        gid = self.kv_cache_group_id
        cacheable = coordinator.decode_cacheable_tokens(num_computed_tokens, gid)
        target = self._partial_tail_target(request, cacheable)
        if target is None:
            if boundary_tokens == 0 or boundary_tokens % self.block_size == 0 or cacheable >= boundary_tokens:
                return None  # never, or only once the row grows (an allocation, itself an event)
            return coordinator.first_decode_step_cacheable(boundary_tokens, gid)
        block, boundary_tokens = target
        if self.block_pool.is_partial_block_cached(request, block, boundary_tokens, gid):
            return None
        return num_computed_tokens


class RSWAManager(FullAttentionManager):
    """``RSWAManager`` (900-943): full attention that, given the prompt length, frees the gap blocks
    between the prompt and the decode window."""

    supports_decode_runs: ClassVar[bool] = False  # kvproof: its gap removal is not modelled there

    def __init__(self, kv_cache_spec: RSWASpec, **kwargs) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.rswa_window: int = kv_cache_spec.rswa_window

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        if num_prompt_tokens is None:
            super().remove_skipped_blocks(request_id, processed_computed_tokens, num_prompt_tokens)
            return
        bs = self.block_size
        first_gap_block = cdiv(num_prompt_tokens, bs)
        window_start = max(num_prompt_tokens, processed_computed_tokens - self.rswa_window)
        last_gap_block = window_start // bs
        self._remove_blocks_in_range(request_id, first_gap_block, last_gap_block)


class SlidingWindowManager(SingleTypeKVCacheManager):
    """``SlidingWindowManager`` (946-1183)."""

    supports_decode_runs: ClassVar[bool] = True

    def __init__(self, kv_cache_spec: SlidingWindowSpec, **kwargs) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.sliding_window = kv_cache_spec.sliding_window
        self.extra_retained_tokens = kv_cache_spec.extra_retained_tokens

    @classmethod
    def _contiguous_blocks_for_hit(cls, window_size: int, block_size: int, use_eagle: bool) -> int:
        """955-966."""
        blocks = cdiv(window_size - 1, block_size)
        if use_eagle:
            blocks += 1
        return blocks

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        drop_eagle_block: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """968-1064: right-to-left search for a run of ``cdiv(W - 1, bs)`` (+1 with EAGLE) cached
        blocks; the blocks before it are nulls."""
        assert isinstance(kv_cache_spec, SlidingWindowSpec), (
            "SlidingWindowManager can only be used for sliding window groups"
        )
        assert dcp_world_size == 1, "DCP not support sliding window attn now."
        assert pcp_world_size == 1, "PCP not support sliding window attn now."
        block_hashes = resolve_block_hashes(
            block_hashes,
            block_pool.hash_block_size,
            kv_cache_spec.block_size,
            supports_fine_grained_hash_lookup=cls.supports_fine_grained_hash_lookup,
            alignment_tokens=alignment_tokens,
        )
        sliding_window_contiguous_blocks = cls._contiguous_blocks_for_hit(
            kv_cache_spec.sliding_window, kv_cache_spec.block_size, drop_eagle_block
        )
        max_num_blocks = max_length // kv_cache_spec.block_size
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple(
            [block_pool.null_block] * max_num_blocks for _ in range(len(kv_cache_group_ids))
        )
        block_size = kv_cache_spec.block_size
        num_contiguous_blocks = 0
        match_found = False
        for i in range(max_num_blocks - 1, -1, -1):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                if num_contiguous_blocks == 0 and block_size != alignment_tokens:
                    post_pop_blocks = i if drop_eagle_block else i + 1
                    if (post_pop_blocks * block_size) % alignment_tokens != 0:
                        continue
                for computed, cached in zip(computed_blocks, cached_block):
                    computed[i] = cached
                num_contiguous_blocks += 1
                if num_contiguous_blocks >= sliding_window_contiguous_blocks:
                    for computed in computed_blocks:
                        del computed[i + num_contiguous_blocks:]
                    match_found = True
                    break
            else:
                num_contiguous_blocks = 0
        if not match_found:
            for computed in computed_blocks:
                del computed[num_contiguous_blocks:]
            while block_size != alignment_tokens and len(computed_blocks[0]) * block_size % alignment_tokens != 0:
                for computed in computed_blocks:
                    computed.pop()
        if drop_eagle_block and computed_blocks[0]:
            for computed in computed_blocks:
                computed.pop()
            while block_size != alignment_tokens and len(computed_blocks[0]) * block_size % alignment_tokens != 0:
                for computed in computed_blocks:
                    computed.pop()
        hit_length = len(computed_blocks[0]) * block_size
        return computed_blocks, hit_length

    @classmethod
    def reachable_block_mask(
        cls,
        start_block: int,
        end_block: int,
        alignment_tokens: int | None,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        retention_interval: int | None = None,
        reachable_boundaries: Sequence[int] = (),
        dcp_world_size: int = 1,
        final_segment_end_block: int | None = None,
    ) -> list[bool] | None:
        """1066-1146: cache only the blocks a hit at an aligned boundary can use."""
        assert isinstance(kv_cache_spec, SlidingWindowSpec)
        if alignment_tokens is None:
            return None
        block_size = kv_cache_spec.block_size * dcp_world_size
        if alignment_tokens % block_size != 0:
            return None
        need = cls._contiguous_blocks_for_hit(
            window_size=kv_cache_spec.sliding_window, block_size=block_size, use_eagle=use_eagle
        )
        shift = 1 if use_eagle else 0
        mask = [False] * (end_block - start_block)
        segment_tokens = (
            alignment_tokens if retention_interval is None else (None if retention_interval == 0 else retention_interval)
        )
        if segment_tokens is not None:
            per_segment = segment_tokens // block_size
            if need >= per_segment:
                return None
            for i in range(start_block, end_block):
                if i >= shift and (i - shift) % per_segment >= per_segment - need:
                    mask[i - start_block] = True
            if final_segment_end_block is not None and not use_eagle:
                final_segment_size = final_segment_end_block % per_segment
                if final_segment_size:
                    final_segment_start = final_segment_end_block - final_segment_size
                    final_tail_start = max(final_segment_start, final_segment_end_block - need)
                    final_tail_end = min(end_block, final_segment_end_block)
                    for i in range(max(start_block, final_tail_start), final_tail_end):
                        mask[i - start_block] = True
        if retention_interval is not None:
            for boundary_tokens in reachable_boundaries:
                aligned = boundary_tokens // alignment_tokens * alignment_tokens
                end = aligned // block_size + shift
                for j in range(max(start_block, end - need), min(end_block, end)):
                    mask[j - start_block] = True
        return mask

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """1148-1183: tokens before the window (and the extra retained tail)."""
        return max(0, num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens)

    def min_computed_skipping(self, num_skipped_tokens: int) -> int | None:
        return num_skipped_tokens + self.sliding_window - 1 + self.extra_retained_tokens


class CircularBufferManager(FullAttentionManager):
    """``CircularBufferManager`` (1186-1273): one ring block per request, no caching, no hits."""

    supports_fine_grained_hash_lookup: ClassVar[bool] = False

    def decode_quiet_steps(self, request, num_computed_tokens: int, coordinator, lookahead_tokens: int = 0,
                           after_sampling: bool = False) -> int:
        """kvproof (decode runs): once the request holds its ring block, a decode step claims nothing,
        removes nothing and caches nothing (1186-1273)."""
        return 1 << 62 if self.req_to_blocks.get(request.request_id) else 0

    def _claim_ring_block(self, request_id: str, record_for_zeroing: bool = True) -> list[KVCacheBlock]:
        req_blocks = self.req_to_blocks[request_id]
        if req_blocks:
            return []
        new_blocks = self.block_pool.get_new_blocks(1)
        req_blocks.extend(new_blocks)
        if self._record_new_block_ids and record_for_zeroing:
            self.new_block_ids.extend(block.block_id for block in new_blocks)
        return new_blocks

    def get_num_blocks_to_allocate(self, request_id: str, num_tokens: int, new_computed_blocks, total_computed_tokens: int,
                                   num_local_computed_tokens: int, num_tokens_main_model: int,
                                   apply_admission_cap: bool = False, prefill_end: int = 0) -> int:
        return 0 if self.req_to_blocks.get(request_id) else 1

    def allocate_new_blocks(self, request_id: str, num_tokens: int, num_tokens_main_model: int) -> list[KVCacheBlock]:
        return self._claim_ring_block(request_id)

    def allocate_external_computed_blocks(self, request_id: str, num_local_computed_tokens: int,
                                          num_external_computed_tokens: int, record_for_zeroing: bool = True) -> None:
        self._claim_ring_block(request_id, record_for_zeroing)

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               drop_eagle_block, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        return tuple([] for _ in kv_cache_group_ids), 0

    def cache_blocks(self, request, num_tokens: int, retention_interval: int | None = None, *,
                     replay_boundaries: Sequence[int] = ()) -> None:
        return

    def add_local_computed_blocks(self, request_id: str, new_computed_blocks, num_local_computed_tokens: int,
                                  num_external_computed_tokens: int) -> None:
        return

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        return

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return 0


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    """``ChunkedLocalAttentionManager`` (1276-1425)."""

    supports_decode_runs: ClassVar[bool] = True

    def __init__(self, kv_cache_spec: ChunkedLocalAttentionSpec, **kwargs) -> None:
        super().__init__(kv_cache_spec, **kwargs)
        self.attention_chunk_size = kv_cache_spec.attention_chunk_size

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        drop_eagle_block: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """1282-1379: blocks before the last chunk start are nulls, then left to right."""
        assert isinstance(kv_cache_spec, ChunkedLocalAttentionSpec), (
            "ChunkedLocalAttentionManager can only be used for chunked local attention groups"
        )
        assert drop_eagle_block is False, "Hybrid KV cache is not supported for eagle + chunked local attention."
        assert dcp_world_size == 1, "DCP not support chunked local attn now."
        assert pcp_world_size == 1, "PCP not support chunked local attn now."
        assert kv_cache_spec.block_size == alignment_tokens, (
            "KV cache groups with different block sizes are not compatible with chunked local attention now"
        )
        block_hashes = resolve_block_hashes(
            block_hashes,
            block_pool.hash_block_size,
            kv_cache_spec.block_size,
            supports_fine_grained_hash_lookup=cls.supports_fine_grained_hash_lookup,
            alignment_tokens=alignment_tokens,
        )
        max_num_blocks = max_length // kv_cache_spec.block_size
        if max_length > 0:
            local_attention_start_idx = (
                max_length // kv_cache_spec.attention_chunk_size * kv_cache_spec.attention_chunk_size
            )
        else:
            local_attention_start_idx = 0
        local_attention_start_block_idx = local_attention_start_idx // kv_cache_spec.block_size
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple(
            [block_pool.null_block] * local_attention_start_block_idx for _ in range(len(kv_cache_group_ids))
        )
        for i in range(local_attention_start_block_idx, max_num_blocks):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.append(cached)
            else:
                break
        hit_length = len(computed_blocks[0]) * kv_cache_spec.block_size
        return computed_blocks, hit_length

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """1381-1425: tokens left of the current chunk."""
        return (num_computed_tokens // self.attention_chunk_size) * self.attention_chunk_size

    def min_computed_skipping(self, num_skipped_tokens: int) -> int | None:
        return cdiv(num_skipped_tokens, self.attention_chunk_size) * self.attention_chunk_size


class CrossAttentionManager(SingleTypeKVCacheManager):
    """``CrossAttentionManager`` (2138-2196): one static allocation for the encoder tokens."""

    def add_local_computed_blocks(self, request_id: str, new_computed_blocks, num_local_computed_tokens: int,
                                  num_external_computed_tokens: int) -> None:
        assert len(new_computed_blocks) == 0

    def allocate_external_computed_blocks(self, request_id: str, num_local_computed_tokens: int,
                                          num_external_computed_tokens: int, record_for_zeroing: bool = True) -> None:
        return

    def cache_blocks(self, request, num_tokens: int, retention_interval: int | None = None, *,
                     replay_boundaries: Sequence[int] = ()) -> None:
        raise ValueError("Should not be called as prefix caching is disabled.")

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool, kv_cache_spec,
                               drop_eagle_block, alignment_tokens, dcp_world_size=1, pcp_world_size=1):
        assert isinstance(kv_cache_spec, CrossAttentionSpec), (
            "CrossAttentionManager can only be used for cross-attention groups"
        )
        raise NotImplementedError("CrossAttentionManager does not support caching")


class SinkFullAttentionManager(FullAttentionManager):
    """``SinkFullAttentionManager`` (2199-2220). Its ``__init__`` takes no
    ``max_admission_blocks_per_request`` / ``needs_kv_cache_zeroing``: vLLM's
    ``get_manager_for_kv_cache_spec`` passes ``needs_kv_cache_zeroing`` and so raises ``TypeError``
    (kvproof's planner already refuses such geometries, ``plan.py: _coordinator_checks``)."""

    def __init__(self, kv_cache_spec: SinkFullAttentionSpec, block_pool: BlockPool, enable_caching: bool,
                 kv_cache_group_id: int, scheduler_block_size: int, dcp_world_size: int = 1,
                 pcp_world_size: int = 1):
        super().__init__(
            kv_cache_spec=kv_cache_spec,
            block_pool=block_pool,
            enable_caching=enable_caching,
            kv_cache_group_id=kv_cache_group_id,
            scheduler_block_size=scheduler_block_size,
            dcp_world_size=dcp_world_size,
            pcp_world_size=pcp_world_size,
        )
        sink_len = kv_cache_spec.sink_len
        assert sink_len is not None and sink_len > 0 and sink_len % self.block_size == 0

    supports_decode_runs: ClassVar[bool] = False  # kvproof: never planned (see the class docstring)
