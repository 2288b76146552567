"""vLLM 0.33.0's ``MambaManager``, ported (``v1/core/single_type_kv_cache_manager.py:1428-2135``).

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text (empty, as vLLM raises it)
must not depend on pytest, which rewrites the asserts of every module of a distribution that
ships a pytest plugin (kvproof does: ``kvproof.pytest_plugin``).

Paths are relative to the ``vllm/`` package; line numbers are those of 0.33.0. A subclass of
:class:`kvproof.sim.requests.managers.SingleTypeKVCacheManager` (the port of vLLM's base class, 49-736), with
vLLM's attribute and method names, so the coordinators in ``kv_manager.py`` call it exactly as vLLM's
coordinators call vLLM's manager.

Ported (all of the class except the parts listed below):

| method | vLLM lines |
|---|---|
| ``has_positionally_stable_blocks``, ``__init__`` | 1428-1467 |
| ``find_longest_cache_hit`` (right to left, one state block; fine-grained per hash unit) | 1469-1546 |
| ``reachable_block_mask`` (sparse retention: ``retention_interval`` None / 0 / > 0) | 1548-1606 |
| ``_remove_blocks_in_range`` (align: skip null gaps, remember retired prefix) | 1608-1627 |
| ``remove_skipped_blocks`` (free the state of two steps ago, ``last_state_block_idx``) | 1629-1657 |
| ``_needs_internal_checkpoint`` | 1659-1690 |
| ``get_num_blocks_to_allocate`` (``num_gpu_blocks + 1`` retry; none: ``+ k`` blocks; align: row ``cdiv(N, bs) + k``, per-step physical cap ``1 + partial + checkpoint (+ k first)``) | 1692-1795 |
| ``allocate_new_blocks`` (nulls, speculative-block relocation, checkpoint column, partial-hit CoW) | 1797-1923 |
| ``_relocate_speculative_block`` | 1925-1934 |
| ``finalize_partial_tail_offload`` | 1936-1950 |
| ``pop_blocks_for_free`` | 1952-1969 |
| ``get_num_skipped_tokens`` (``num_computed_tokens - 1``) | 1971-1976 |
| ``cache_blocks`` (``cached_blocks_this_step``; align: ``_cache_partial_tail_block``) | 1978-2023 |
| ``new_step_starts`` | 2025-2026 |
| ``_cache_partial_tail_block`` (checkpoint re-keying, prompt tail, shared-prefix junction) | 2028-2135 |

Also ported: ``get_mamba_prefill_checkpoint_position`` and ``is_mamba_prefill_checkpoint_valid``
(``v1/kv_cache_interface.py:1169-1210``), which the manager calls.

Modes: ``MambaCacheMode = Literal["align", "none"]`` (``config/cache.py:176``). vLLM 0.33.0 has **no
"all" mode** (``CacheConfig(mamba_cache_mode="all")`` is a pydantic ``ValidationError``); the manager
itself only distinguishes ``"align"`` from anything else (``!= "align"`` takes the none path, as in vLLM).

Left out: KV cache events and metrics (the block pool port has none, ``block_pool.py``; the manager
emits none of its own). Nothing else: neither changes which blocks a request holds or how many are free.

Kept although kvproof never exercises it (no KV connector, no DCP):

* the KV-connector boundary-state hand-off, recorded exactly as vLLM records it
  (``_pending_boundary_state_offloads``: 1895-1910 in ``allocate_new_blocks``, 2010-2023 in
  ``cache_blocks``, 1964-1968 in ``pop_blocks_for_free``; the list lives on the base class and nothing
  in kvproof drains it), with ``_producer_partial_tail_reqs`` and ``finalize_partial_tail_offload``;
* DCP / PCP: vLLM's asserts ``dcp_world_size == 1`` / ``pcp_world_size == 1`` (1485-1486);
* ``shared_prefix_checkpoint`` (``CacheConfig.enable_mamba_shared_prefix_checkpoint``, set by
  ``KVCacheManager`` only with EAGLE groups and partial hash hits, ``kv_cache_manager.py:188-197``):
  the junction branch of ``_cache_partial_tail_block`` (2098-2102) and the junction exemption of a
  transient checkpoint (2066-2070) are ported, but they need a request whose ``shared_prefix_boundary`` was set by
  ``get_computed_blocks`` (an uncached common prefix, hybrid coordinator); the vLLM-trace tests
  (``tests/sim/test_mamba_manager.py``) never set one, so these lines are untested.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from .block_pool import (
    BlockHashList,
    BlockHashWithGroupId,
    BlockPool,
    KVCacheBlock,
    resolve_block_hashes,
)
from .managers import SingleTypeKVCacheManager, cdiv
from ..startup.specs import KVCacheSpec, MambaSpec

__all__ = [
    "MambaManager",
    "get_mamba_prefill_checkpoint_position",
    "is_mamba_prefill_checkpoint_valid",
]


def get_mamba_prefill_checkpoint_position(
    num_tokens: int,
    hash_block_size: int,
    drop_eagle_block: bool,
    num_hash_lookahead_tokens: int = 0,
) -> int:
    """``get_mamba_prefill_checkpoint_position`` (``v1/kv_cache_interface.py:1169-1186``): the
    reusable Mamba checkpoint boundary for a prefill of ``num_tokens``."""
    proof_limit = num_tokens if drop_eagle_block else num_tokens - max(1, num_hash_lookahead_tokens)
    checkpoint_position = proof_limit // hash_block_size * hash_block_size
    if drop_eagle_block:
        checkpoint_position -= hash_block_size
    return max(checkpoint_position, 0)


def is_mamba_prefill_checkpoint_valid(
    query_start: int,
    query_end: int,
    checkpoint_position: int,
    hash_block_size: int,
    mamba_block_size: int,
    checkpoint_alignment: int | None,
) -> bool:
    """``is_mamba_prefill_checkpoint_valid`` (``v1/kv_cache_interface.py:1189-1210``): whether a
    backend can export the checkpoint in this query."""
    if checkpoint_alignment is None:
        return False
    assert checkpoint_alignment > 0
    initial_state_col = (query_start - 1) // mamba_block_size
    checkpoint_col = cdiv(query_end, mamba_block_size) - 2
    return (
        query_start % hash_block_size == 0
        and checkpoint_col > initial_state_col
        and query_start + hash_block_size <= checkpoint_position
        and query_start < checkpoint_position < query_end
        and (checkpoint_position - query_start) % checkpoint_alignment == 0
    )


class MambaManager(SingleTypeKVCacheManager):
    """``MambaManager`` (1428-2135)."""

    supports_fine_grained_hash_lookup: ClassVar[bool] = True

    @property
    def has_positionally_stable_blocks(self) -> bool:
        # 1431-1435: align mode nulls interior states and relocates speculative blocks in place.
        return self.mamba_cache_mode != "align"

    def __init__(self, kv_cache_spec: MambaSpec, block_pool: BlockPool, **kwargs) -> None:
        # 1437-1467
        super().__init__(kv_cache_spec, block_pool, **kwargs)
        self.mamba_cache_mode = kv_cache_spec.mamba_cache_mode
        assert self.mamba_cache_mode == "align" or not self.enable_caching, (
            "Mamba prefix caching requires mamba_cache_mode='align'"
        )
        self.num_speculative_blocks: int = kv_cache_spec.num_speculative_blocks
        self.has_prefill_checkpoint_blocks = (
            self.mamba_cache_mode == "align" and kv_cache_spec.num_prefill_checkpoint_blocks > 0
        )
        # Mamba checkpoints follow EAGLE's global replay boundary (set by the coordinator, 177-181).
        self.drop_eagle_checkpoint_block = False
        self.cached_blocks_this_step: set[BlockHashWithGroupId] = set()
        if self.mamba_cache_mode == "align":
            # Index of the state block allocated in the previous step, per request.
            self.last_state_block_idx: dict[str, int] = {}
            self._num_retired_blocks: dict[str, int] = {}
            # Requests that have been allocated blocks.
            self._allocated_block_reqs: set[str] = set()
            # (checkpoint position, reserved block index) of the current allocation.
            self._checkpoints: dict[str, tuple[int, int]] = {}
            # Producers of their own last-prompt-boundary partial tail (connector hand-off).
            self._producer_partial_tail_reqs: dict[str, tuple[KVCacheBlock, int]] = {}

    # -- prefix-cache lookup --------------------------------------------------------------------

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
        """1469-1546: from right to left, the last cached state block whose end is a multiple of
        ``alignment_tokens``; the blocks before it are nulls. With ``alignment_tokens < block_size``
        (fine-grained partial hits) every hash unit boundary is probed. ``drop_eagle_block`` is
        unused: draft models have no Mamba layers."""
        assert isinstance(kv_cache_spec, MambaSpec), "MambaManager can only be used for mamba groups"
        assert dcp_world_size == 1, "DCP not support mamba now."
        assert pcp_world_size == 1, "PCP not support mamba now."
        block_hashes = resolve_block_hashes(
            block_hashes,
            block_pool.hash_block_size,
            kv_cache_spec.block_size,
            supports_fine_grained_hash_lookup=cls.supports_fine_grained_hash_lookup,
            alignment_tokens=alignment_tokens,
        )
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in range(len(kv_cache_group_ids)))
        hit_length = 0

        block_size = kv_cache_spec.block_size
        if alignment_tokens < block_size and block_size % alignment_tokens == 0:
            # 1500-1520: fine-grained, one probe per hash unit.
            hash_block_size = alignment_tokens
            scale_factor = block_size // hash_block_size
            max_num_partial_units = min(max_length // hash_block_size, len(block_hashes))
            for fine_idx in range(max_num_partial_units - 1, -1, -1):
                num_tokens = (fine_idx + 1) * hash_block_size
                block_hash = block_hashes[fine_idx]
                if cached_block := block_pool.get_cached_block(block_hash, kv_cache_group_ids):
                    block_idx = fine_idx // scale_factor
                    for computed, cached in zip(computed_blocks, cached_block):
                        computed.extend([block_pool.null_block] * block_idx)
                        computed.append(cached)
                    hit_length = num_tokens
                    break
            return computed_blocks, hit_length

        # 1522-1546: one probe per block, the hit end aligned to alignment_tokens.
        max_num_blocks = max_length // block_size
        for i in range(max_num_blocks - 1, -1, -1):
            if cached_block := block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids):
                if block_size != alignment_tokens and (i + 1) * block_size % alignment_tokens != 0:
                    continue
                for computed, cached in zip(computed_blocks, cached_block):
                    computed.extend([block_pool.null_block] * i)
                    computed.append(cached)
                hit_length = (i + 1) * block_size
                break
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
        """1548-1606: sparse state retention. ``retention_interval`` None: dense (every block);
        0: only the ``reachable_boundaries`` states; > 0: also one state per interval segment."""
        if retention_interval is None or alignment_tokens is None:
            return None
        assert isinstance(kv_cache_spec, MambaSpec)
        block_size = kv_cache_spec.block_size
        mask = [False] * (end_block - start_block)

        # (1) Segment-boundary states: block i ends at token (i + 1) * block_size.
        segment_tokens = None if retention_interval == 0 else retention_interval
        if segment_tokens is not None:
            per_segment = segment_tokens // block_size
            if per_segment <= 1:
                return None
            first_boundary = (start_block + per_segment) // per_segment * per_segment - 1
            for i in range(first_boundary - start_block, len(mask), per_segment):
                mask[i] = True

        # (2) The replay boundary and any shared-prefix junction: the state block ending there.
        for boundary_tokens in reachable_boundaries:
            aligned = boundary_tokens // alignment_tokens * alignment_tokens
            boundary_block = aligned // block_size - 1
            if start_block <= boundary_block < end_block:
                mask[boundary_block - start_block] = True
        return mask

    # -- freeing --------------------------------------------------------------------------------

    def _remove_blocks_in_range(self, request_id: str, first_block: int, last_block: int) -> None:
        """1608-1627: align mode frees every non-null block of ``[first, last)`` (null gaps between
        states are skipped, not a stop) and never revisits the retired prefix."""
        if self.mamba_cache_mode != "align":
            return super()._remove_blocks_in_range(request_id, first_block, last_block)
        blocks = self.req_to_blocks.get(request_id, [])
        first_block = max(first_block, self._num_retired_blocks.get(request_id, 0))
        last_block = min(last_block, len(blocks))
        if first_block >= last_block:
            return
        freed: list[KVCacheBlock] = []
        for i in range(last_block - 1, first_block - 1, -1):
            if blocks[i].is_null:
                continue
            freed.append(blocks[i])
            blocks[i] = self._null_block
        if freed:
            self.block_pool.free_blocks(freed)
        self._num_retired_blocks[request_id] = last_block

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int,
                              num_prompt_tokens: int | None = None) -> None:
        """1629-1657: the base removal (the ``(processed - 1) // bs`` whole blocks below the live
        state), then in align mode the state block of two steps ago (``last_state_block_idx``) once
        it lies below column ``cdiv(processed, bs) - 1``."""
        assert isinstance(self.kv_cache_spec, MambaSpec)
        super().remove_skipped_blocks(request_id, processed_computed_tokens, num_prompt_tokens)
        if self.mamba_cache_mode == "align":
            last_state_block_idx = self.last_state_block_idx.get(request_id)
            if (
                last_state_block_idx is not None
                and last_state_block_idx < cdiv(processed_computed_tokens, self.block_size) - 1
            ):
                blocks = self.req_to_blocks[request_id]
                if blocks[last_state_block_idx] is not self._null_block:
                    self.block_pool.free_blocks([blocks[last_state_block_idx]])
                    blocks[last_state_block_idx] = self._null_block

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """1971-1976: only the state after the last computed token is needed."""
        return num_computed_tokens - 1

    # -- allocation -----------------------------------------------------------------------------

    def _needs_internal_checkpoint(self, request_id: str, query_start: int, query_end: int,
                                   checkpoint_position: int, prefill_end: int) -> bool:
        """1659-1690: reserve a prefill checkpoint block at column ``cdiv(query_end, bs) - 2``."""
        assert isinstance(self.kv_cache_spec, MambaSpec)
        checkpoint_idx = cdiv(query_end, self.block_size) - 2
        blocks = self.req_to_blocks[request_id]
        return (
            self.has_prefill_checkpoint_blocks
            and query_end >= prefill_end
            and is_mamba_prefill_checkpoint_valid(
                query_start=query_start,
                query_end=query_end,
                checkpoint_position=checkpoint_position,
                hash_block_size=self.block_pool.hash_block_size,
                mamba_block_size=self.block_size,
                checkpoint_alignment=self.kv_cache_spec.prefill_checkpoint_alignment,
            )
            and checkpoint_idx >= 0
            and (
                checkpoint_idx >= len(blocks)
                or blocks[checkpoint_idx].is_null
                or (
                    request_id in self._allocated_block_reqs
                    and checkpoint_idx >= len(blocks) - self.num_speculative_blocks
                )
            )
        )

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
        """1692-1795."""
        assert isinstance(self.kv_cache_spec, MambaSpec)
        if len(new_computed_blocks) > 0 and new_computed_blocks[-1].block_hash in self.cached_blocks_this_step:
            # 1704-1712: a state cached by another request in this step is not written yet; report
            # more blocks than the pool has so the request waits for the next step.
            return self.block_pool.num_gpu_blocks + 1
        if self.mamba_cache_mode != "align":
            # 1713-1729: k extra blocks for speculative decoding (MTP / EAGLE).
            if self.num_speculative_blocks > 0:
                num_tokens += self.kv_cache_spec.block_size * self.num_speculative_blocks
            return super().get_num_blocks_to_allocate(
                request_id, num_tokens, new_computed_blocks, total_computed_tokens,
                num_local_computed_tokens, num_tokens_main_model,
                apply_admission_cap=apply_admission_cap, prefill_end=prefill_end,
            )
        # 1730-1795: lookahead tokens get no blocks (draft models have no Mamba layers).
        num_tokens = num_tokens_main_model
        num_required_blocks = cdiv(num_tokens, self.block_size) + self.num_speculative_blocks
        num_new_blocks = num_required_blocks - len(new_computed_blocks) - len(self.req_to_blocks[request_id])
        has_partial_hit = (
            self._has_partial_local_hit(new_computed_blocks, num_local_computed_tokens)
            or request_id in self._partial_hit_reqs
        )
        if has_partial_hit:
            num_new_blocks = max(num_new_blocks, 0) + 1
        # Keyed on the chunk end, like the worker's compute_mamba_prefill_checkpoints (only asked
        # where _needs_internal_checkpoint's first two conditions hold: it is pure).
        checkpoint_position = 0
        if self.has_prefill_checkpoint_blocks and num_tokens >= prefill_end:
            checkpoint_position = get_mamba_prefill_checkpoint_position(
                num_tokens,
                self.cache_hit_alignment_tokens,
                self.drop_eagle_checkpoint_block,
                num_hash_lookahead_tokens=self.block_pool.num_hash_lookahead_tokens,
            )
            if not self._needs_internal_checkpoint(
                request_id, total_computed_tokens, num_tokens, checkpoint_position, prefill_end
            ):
                checkpoint_position = 0
        checkpoint_block = int(checkpoint_position > 0)
        if not apply_admission_cap:
            if checkpoint_position > 0:
                checkpoint_idx = cdiv(num_tokens, self.block_size) - 2
                self._checkpoints[request_id] = (checkpoint_position, checkpoint_idx)
            else:
                self._checkpoints.pop(request_id, None)
        if num_new_blocks > 0:
            blocks_allocated = request_id in self._allocated_block_reqs
            physical_block_cap = 1 + int(has_partial_hit) + checkpoint_block
            if not blocks_allocated:
                physical_block_cap += self.num_speculative_blocks
            num_new_blocks = min(num_new_blocks, physical_block_cap)
        num_evictable_computed_blocks = self._get_num_evictable_blocks(new_computed_blocks)
        return num_new_blocks + num_evictable_computed_blocks

    def allocate_new_blocks(self, request_id: str, num_tokens: int, num_tokens_main_model: int) -> list[KVCacheBlock]:
        """1797-1923."""
        assert isinstance(self.kv_cache_spec, MambaSpec)
        if self.mamba_cache_mode != "align":
            # 1801-1808
            if self.num_speculative_blocks > 0:
                num_tokens += self.block_size * self.num_speculative_blocks
            return super().allocate_new_blocks(request_id, num_tokens, num_tokens_main_model)
        # 1809-1923
        num_tokens = num_tokens_main_model
        req_blocks: list[KVCacheBlock] = self.req_to_blocks[request_id]
        num_required_blocks = cdiv(num_tokens, self.block_size) + self.num_speculative_blocks
        checkpoint_block = int(request_id in self._checkpoints)
        partial_hit = self._partial_hit_reqs.get(request_id)
        has_partial_hit = partial_hit is not None
        # num_required_blocks may be below len(req_blocks) after an over-allocation.
        if num_required_blocks <= len(req_blocks) and not has_partial_hit and not checkpoint_block:
            self._allocated_block_reqs.add(request_id)
            return []
        prev_block_len = len(req_blocks)
        blocks_allocated = request_id in self._allocated_block_reqs
        # The running state lives in the last (1 + k) blocks.
        if blocks_allocated:
            self.last_state_block_idx[request_id] = prev_block_len - 1 - self.num_speculative_blocks
        elif prev_block_len > 0:
            # A new request with a prefix hit: the last block holds the hit state.
            self.last_state_block_idx[request_id] = prev_block_len - 1

        num_skipped_blocks = num_required_blocks - self.num_speculative_blocks - 1
        if prev_block_len < num_skipped_blocks:
            # Nulls up to the state column, except the internal checkpoint column.
            null_end = num_skipped_blocks - checkpoint_block
            req_blocks.extend([self._null_block for _ in range(prev_block_len, null_end)])

        if blocks_allocated:
            # Relocate the exclusively owned speculative scratch blocks this step leaves behind;
            # in a checkpoint step the one at the checkpoint column stays (the worker exports there).
            for block_idx in range(prev_block_len - self.num_speculative_blocks, prev_block_len):
                if block_idx < num_skipped_blocks - checkpoint_block:
                    self._relocate_speculative_block(req_blocks, block_idx)
                else:
                    break
        num_new_blocks = max(num_required_blocks - len(req_blocks), 0)
        if has_partial_hit:
            num_new_blocks = max(num_new_blocks, 0) + 1
        max_new_blocks = 1 + int(has_partial_hit) + checkpoint_block
        if not blocks_allocated:
            max_new_blocks += self.num_speculative_blocks
        assert num_new_blocks <= max_new_blocks
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        returned_blocks = req_blocks[prev_block_len:]
        if partial_hit is not None:
            block_idx, source_block = partial_hit
            cow_block = new_blocks[0]
            new_blocks = new_blocks[1:]
            if blocks_allocated:
                # A running request's worker block table is append-only: it stays on source_block and
                # the cache entry moves to cow_block, filled by the queued copy.
                assert req_blocks[block_idx] is source_block
                self.block_pool.move_block_hashes(source_block, cow_block)
                self._pending_cow_copies.append((source_block, cow_block))
                source_block.ref_cnt += 1
                producer_tail = self._producer_partial_tail_reqs.pop(request_id, None)
                if producer_tail is not None:
                    marker_block, boundary_tokens = producer_tail
                    assert marker_block is source_block
                    self._pending_boundary_state_offloads.append(
                        (request_id, self.kv_cache_group_id, cow_block, boundary_tokens)
                    )
                if cow_block.block_hash is not None:
                    # Filled only by this step's copy: defer same-step hits on it.
                    self.cached_blocks_this_step.add(cow_block.block_hash)
            else:
                self._apply_cow(request_id, block_idx, source_block, cow_block)
                returned_blocks = [cow_block] + returned_blocks
        req_blocks.extend(new_blocks)
        self._allocated_block_reqs.add(request_id)
        self._partial_hit_reqs.pop(request_id, None)
        returned_blocks.extend(new_blocks)
        return returned_blocks

    def _relocate_speculative_block(self, req_blocks: list[KVCacheBlock], block_idx: int) -> None:
        """1925-1934: move a speculative scratch block to the end of the row, null its column."""
        block = req_blocks[block_idx]
        assert self.block_pool.is_block_writable(block), (
            "Speculative Mamba blocks must be exclusively owned and unhashed before relocation"
        )
        req_blocks.append(block)
        req_blocks[block_idx] = self._null_block

    def finalize_partial_tail_offload(self, request_id: str, num_computed_tokens: int, num_in_flight_tokens: int):
        """1936-1950 (connector hand-off; kvproof has no connector)."""
        if self.mamba_cache_mode != "align":
            return None
        producer_tail = self._producer_partial_tail_reqs.pop(request_id, None)
        if producer_tail is None:
            return None
        source_block, boundary_tokens = producer_tail
        if num_in_flight_tokens != 0 or num_computed_tokens != boundary_tokens:
            return None
        return self.kv_cache_group_id, source_block, boundary_tokens

    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """1952-1969."""
        if self.mamba_cache_mode == "align":
            self._allocated_block_reqs.discard(request_id)
            self.last_state_block_idx.pop(request_id, None)
            self._num_retired_blocks.pop(request_id, None)
            self._checkpoints.pop(request_id, None)
            self._producer_partial_tail_reqs.pop(request_id, None)
            self._pending_boundary_state_offloads = [
                entry for entry in self._pending_boundary_state_offloads if entry[0] != request_id
            ]
        return super().pop_blocks_for_free(request_id)

    # -- caching --------------------------------------------------------------------------------

    def cache_blocks(self, request, num_tokens: int, retention_interval: int | None = None, *,
                     replay_boundaries: Sequence[int] = ()) -> None:
        """1978-2023: the base caching (sparse per ``reachable_block_mask``), then in align mode the
        partial tail / checkpoint re-keying; every state cached in this step is remembered so a
        same-step hit on it is deferred (``get_num_blocks_to_allocate``)."""
        num_cached_blocks_before = self.num_cached_block.get(request.request_id, 0)
        super().cache_blocks(request, num_tokens, retention_interval=retention_interval,
                             replay_boundaries=replay_boundaries)
        num_cached_blocks_after = self.num_cached_block.get(request.request_id, 0)
        if self.mamba_cache_mode == "align":
            partial_hash = self._cache_partial_tail_block(request, num_tokens, retention_interval=retention_interval)
            if partial_hash is not None:
                self.cached_blocks_this_step.add(partial_hash)
        if num_cached_blocks_after > num_cached_blocks_before:
            blocks = self.req_to_blocks[request.request_id]
            for idx in range(num_cached_blocks_before, num_cached_blocks_after):
                block = blocks[idx]
                if block.is_null or block.block_hash is None:
                    continue
                self.cached_blocks_this_step.add(block.block_hash)
                if self.mamba_cache_mode == "align":
                    assert block.block_hash_num_tokens is not None
                    self._pending_boundary_state_offloads.append(
                        (request.request_id, self.kv_cache_group_id, block, block.block_hash_num_tokens)
                    )

    def new_step_starts(self) -> None:
        """2025-2026."""
        self.cached_blocks_this_step.clear()

    def _cache_partial_tail_block(self, request, num_tokens: int,
                                  retention_interval: int | None) -> BlockHashWithGroupId | None:
        """2028-2135: re-key a reserved checkpoint block at its exported boundary, or register the
        prompt's last hash-unit boundary (or a shared-prefix junction) inside the current state block."""
        hash_block_size = self.block_pool.hash_block_size
        checkpoint = self._checkpoints.get(request.request_id)
        if checkpoint is not None:
            checkpoint_position, checkpoint_idx = checkpoint
            blocks = self.req_to_blocks[request.request_id]
            assert 0 <= checkpoint_idx < len(blocks)
            checkpoint_block = blocks[checkpoint_idx]
            is_prompt_checkpoint = checkpoint_position == get_mamba_prefill_checkpoint_position(
                request.num_prompt_tokens,
                self.cache_hit_alignment_tokens,
                self.drop_eagle_checkpoint_block,
                num_hash_lookahead_tokens=self.block_pool.num_hash_lookahead_tokens,
            )
            is_retained_checkpoint = False
            if checkpoint_position % self.block_size == 0:
                block_idx = checkpoint_position // self.block_size - 1
                retained = self.reachable_block_mask(
                    block_idx,
                    block_idx + 1,
                    self.cache_hit_alignment_tokens,
                    self.kv_cache_spec,
                    self.drop_eagle_checkpoint_block,
                    retention_interval=retention_interval,
                )
                is_retained_checkpoint = retained is None or retained[0]
            if (
                not is_prompt_checkpoint
                and not is_retained_checkpoint
                and checkpoint_position != _shared_prefix_boundary(request)
            ):
                # A transient state overwrites this slot: neither it nor a full-block hash
                # registered earlier in this step is reusable.
                self.block_pool._maybe_evict_cached_block(checkpoint_block)
                return None
            if checkpoint_block.block_hash_num_tokens == checkpoint_position:
                return None
            return self.block_pool.cache_partial_block(
                request=request,
                block=checkpoint_block,
                num_tokens=checkpoint_position,
                kv_cache_group_id=self.kv_cache_group_id,
                block_size=self.block_size,
                replace_existing_hashes=True,
            )
        target = self._prompt_tail_target(request, num_tokens)
        if target is None:
            return None
        block_idx, source_block = target
        partial_hash = self.block_pool.cache_partial_block(
            request=request,
            block=source_block,
            num_tokens=num_tokens,
            kv_cache_group_id=self.kv_cache_group_id,
            block_size=self.block_size,
        )
        if partial_hash is not None and num_tokens % self.block_size:
            # The next step's forward overwrites source_block: the upcoming CoW keeps the state.
            self._partial_hit_reqs[request.request_id] = (block_idx, source_block)
            self.num_cached_block[request.request_id] = block_idx
            self._producer_partial_tail_reqs[request.request_id] = (source_block, num_tokens)
        return partial_hash


    def _prompt_tail_target(self, request, num_tokens: int) -> tuple[int, KVCacheBlock] | None:
        """The state block ``_cache_partial_tail_block`` keys at the prompt's last hash-unit boundary
        (or a shared-prefix junction) for ``num_tokens``, with its column (2080-2118), or None where
        it returns early."""
        hash_block_size = self.block_pool.hash_block_size
        if num_tokens <= 0 or num_tokens % hash_block_size != 0:
            return None
        latest_prompt_hash_boundary = get_mamba_prefill_checkpoint_position(
            request.num_prompt_tokens,
            hash_block_size,
            self.drop_eagle_checkpoint_block,
            num_hash_lookahead_tokens=self.block_pool.num_hash_lookahead_tokens,
        )
        shared_prefix_boundary = _shared_prefix_boundary(request)
        if num_tokens != latest_prompt_hash_boundary and not (
            self.shared_prefix_checkpoint
            and num_tokens == shared_prefix_boundary
            and request.num_computed_tokens < num_tokens <= request.num_prompt_tokens
        ):
            return None

        block_idx = cdiv(num_tokens, self.block_size) - 1
        blocks = self.req_to_blocks[request.request_id]
        if block_idx >= len(blocks):
            return None
        source_block = blocks[block_idx]
        if source_block.is_null:
            return None
        # Already keyed here by a hit or an earlier step.
        if source_block.block_hash_num_tokens == num_tokens:
            return None
        return block_idx, source_block

    # -- kvproof: decode runs (docs/requests.md, "Decode runs") ----------------------------------

    supports_decode_runs: ClassVar[bool] = True

    @property
    def decode_step_max_blocks(self) -> int:  # the align cap 1 + partial + checkpoint (+ k), 1786-1790
        return 3 + self.num_speculative_blocks

    def _decode_extra_blocks(self) -> int:
        return self.num_speculative_blocks  # 1716-1719, 1740-1742, 1801-1806: k speculative blocks

    def min_computed_skipping(self, num_skipped_tokens: int) -> int | None:
        return num_skipped_tokens + 1  # get_num_skipped_tokens(c) = c - 1

    def decode_quiet_steps(self, request, num_computed_tokens: int, coordinator, lookahead_tokens: int = 0,
                           after_sampling: bool = False) -> int:
        """kvproof (decode runs), :meth:`SingleTypeKVCacheManager.decode_quiet_steps` for Mamba. The
        none mode is the base accounting with ``k`` speculative blocks and no caching. In align mode a
        decode step at computed count ``c`` (no checkpoint: a one-token query never holds one,
        ``is_mamba_prefill_checkpoint_valid``) changes the group only when: the row needs a block
        (``cdiv(c + 1, bs) + k > len(row)``, 1740-1742); the base removal reaches a block past the
        retired prefix (``(c - 1) // bs > retired``, 1608-1627); the state of two steps ago leaves
        column ``cdiv(c, bs) - 1`` (1645-1657); a new full block is cacheable; or the prompt-tail
        keying acts (2080-2135), which only a change of the cacheable tokens can bring. A pending
        checkpoint or partial hit, a request not yet allocated, and the shared-prefix junction
        (which reads the computed tokens) end the run at once."""
        if self.mamba_cache_mode != "align":
            return super().decode_quiet_steps(request, num_computed_tokens, coordinator, lookahead_tokens,
                                              after_sampling)
        request_id = request.request_id
        blocks = self.req_to_blocks.get(request_id)
        if (
            not blocks
            or request_id in self._partial_hit_reqs
            or request_id in self._checkpoints
            or request_id not in self._allocated_block_reqs
            or self.shared_prefix_checkpoint
        ):
            return 0
        c = num_computed_tokens
        bs = self.block_size
        end = (len(blocks) - self.num_speculative_blocks) * bs  # lookahead tokens get no Mamba blocks (1731-1736)
        retired = self._num_retired_blocks.get(request_id, 0)
        if len(blocks) > retired:
            end = min(end, (retired + 1) * bs + 1)
        last_state_block_idx = self.last_state_block_idx.get(request_id)
        if last_state_block_idx is not None and not blocks[last_state_block_idx].is_null:
            end = min(end, (last_state_block_idx + 1) * bs + 1)
        if coordinator is not None:
            gid = self.kv_cache_group_id
            if self._prefix_cacheable:
                end = min(end, coordinator.first_decode_step_caching(
                    (self.num_cached_block.get(request_id, 0) + 1) * bs, gid, after_sampling))
            cacheable = coordinator.decode_cacheable_tokens(c, gid)
            if self._prompt_tail_target(request, cacheable) is not None:
                return 0
            end = min(end, coordinator.first_decode_step_cacheable(cacheable + 1, gid))
        return max(end - c, 0)


def _shared_prefix_boundary(request) -> int:
    """``request.shared_prefix_boundary`` (``v1/request.py``); 0 when the request object has none."""
    return getattr(request, "shared_prefix_boundary", 0)
