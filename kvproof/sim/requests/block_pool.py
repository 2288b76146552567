"""vLLM 0.33.0's block pool, ported (``v1/core/block_pool.py``, ``v1/core/kv_cache_utils.py``).

PYTEST_DONT_REWRITE: the port's bare asserts are vLLM's, so their text (empty, as vLLM raises it)
must not depend on pytest, which rewrites the asserts of every module of a distribution that
ships a pytest plugin (kvproof does: ``kvproof.pytest_plugin``).

Paths are relative to the ``vllm/`` package. Ported:

* ``KVCacheBlock`` (``v1/core/kv_cache_utils.py:161-224``), ``null_head_len`` / ``trim_null_head``
  (227-250), ``FreeKVCacheBlockQueue`` (258-519), ``BlockHashListWithBlockSize`` (1157-1230),
  ``resolve_block_hashes`` (1233-1263), ``make_block_hash_with_group_id`` (60-80);
* ``BlockHashToBlockMap`` (``v1/core/block_pool.py:36-134``) and ``BlockPool`` (137-945):
  ``get_cached_block``, ``cache_full_blocks``, ``cache_partial_block``, ``get_new_blocks``,
  ``touch``, ``free_blocks``, ``get_num_free_blocks``, ``get_usage``, ``reset_prefix_cache``,
  ``move_block_hashes``, ``is_block_writable``.

Not ported: KV cache events (``enable_kv_cache_events``, ``take_events``, ``emit_cached_block_events``),
the metrics collector, ``unpin_blocks`` / reuse watchers (offloading connectors), ``evict_blocks``
(KV connectors), cross-pool frees (HiSparse host pools): none of them changes which block ids a
request gets or how many blocks are free.

Scale: vLLM builds ``num_gpu_blocks`` ``KVCacheBlock`` objects up front
(``block_pool.py:176-182``). Here a block object is created the first time the pool hands it out;
the never-used ids ``[next_fresh, num_gpu_blocks)`` sit in the free queue as one run (a marker node
at the place vLLM's initial queue order puts them), so the allocation order is vLLM's exactly and the
cost is O(blocks actually handled), not O(num_gpu_blocks).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A block hash (``BlockHash``): vLLM's is sha256 of the parent hash and the block's token ids; here
#: it is the exact key of the token prefix the block closes (``token_runs.PrefixKey``, made by the
#: request block hasher, ``request.py``): equal exactly when vLLM's are, and only compared.
BlockHash = Hashable
#: ``BlockHashWithGroupId``: vLLM packs the group id into the bytes; a tuple is equivalent here.
BlockHashWithGroupId = tuple[BlockHash, int]


def make_block_hash_with_group_id(block_hash: BlockHash, group_id: int) -> BlockHashWithGroupId:
    """``make_block_hash_with_group_id`` (``kv_cache_utils.py:60-70``)."""
    return (block_hash, group_id)


def get_block_hash(key: BlockHashWithGroupId) -> BlockHash:
    return key[0]


def get_group_id(key: BlockHashWithGroupId) -> int:
    return key[1]


@dataclass(slots=True, eq=False)
class KVCacheBlock:
    """``KVCacheBlock`` (``kv_cache_utils.py:161-224``). Identity equality, as vLLM's (``eq`` would
    compare ids; blocks of one pool are unique per id, so the two agree)."""

    block_id: int
    ref_cnt: int = 0
    _block_hash: BlockHashWithGroupId | None = None
    _block_hash_num_tokens: int | None = None
    prev_free_block: KVCacheBlock | None = field(default=None, repr=False)
    next_free_block: KVCacheBlock | None = field(default=None, repr=False)
    is_null: bool = False

    @property
    def block_hash(self) -> BlockHashWithGroupId | None:
        return self._block_hash

    @property
    def block_hash_num_tokens(self) -> int | None:
        return self._block_hash_num_tokens

    def set_block_hash(self, block_hash: BlockHashWithGroupId, num_tokens: int | None = None) -> None:
        assert self._block_hash is None and self._block_hash_num_tokens is None, (
            "The block already has a hash. This should not happen."
        )
        self._block_hash = block_hash
        self._block_hash_num_tokens = num_tokens

    def reset_hash(self) -> None:
        self._block_hash = None
        self._block_hash_num_tokens = None

    def __repr__(self) -> str:
        return f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, hashed={self._block_hash is not None})"


def null_head_len(blocks: Sequence[KVCacheBlock]) -> int:
    """``null_head_len`` (``kv_cache_utils.py:227-244``): number of leading null blocks (binary search
    over the usual leading-null run, checked, else a linear scan)."""
    if not blocks or not blocks[0].is_null:
        return 0
    lo = leading_null_run(blocks)
    if blocks[:lo].count(blocks[0]) == lo:
        return lo
    return next(i for i, b in enumerate(blocks) if not b.is_null)


def leading_null_run(blocks: Sequence[KVCacheBlock]) -> int:
    """The binary search of ``null_head_len``: exact when the row's nulls form one leading run (a
    sliding-window or chunked-local row, or a row without nulls). O(log n)."""
    if not blocks or not blocks[0].is_null:
        return 0
    lo, hi = 1, len(blocks)
    while lo < hi:
        mid = (lo + hi) // 2
        if blocks[mid].is_null:
            lo = mid + 1
        else:
            hi = mid
    return lo


def trim_null_head(blocks):
    """``trim_null_head`` (``kv_cache_utils.py:247-250``)."""
    nhl = null_head_len(blocks)
    return blocks[nhl:] if nhl else blocks


class _FreshRun(KVCacheBlock):
    """The marker node standing for the never-allocated ids in the free queue."""

    __slots__ = ()


class FreeKVCacheBlockQueue:
    """``FreeKVCacheBlockQueue`` (``kv_cache_utils.py:258-519``): a doubly linked list of free blocks
    in eviction order (head = evicted / reused first).

    vLLM starts with every block linked in id order. Here the list starts as
    ``fake_head -> fresh-run marker -> fake_tail``; the marker stands for ids
    ``[pool.next_fresh_id, pool.num_gpu_blocks)`` in that order. ``popleft`` materializes the next
    fresh id when it reaches the marker; an exhausted marker is transparent. ``prepend_n`` and
    ``append_n`` put blocks before / after everything, as in vLLM, so the queue order is always
    vLLM's.
    """

    def __init__(self, pool: BlockPool) -> None:
        self._pool = pool
        self.num_free_blocks = pool.num_gpu_blocks
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        self._fresh = _FreshRun(block_id=-2)
        self.fake_free_list_head.next_free_block = self._fresh
        self._fresh.prev_free_block = self.fake_free_list_head
        self._fresh.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self._fresh

    def _unlink(self, block: KVCacheBlock) -> None:
        prev_block = block.prev_free_block
        next_block = block.next_free_block
        if prev_block is None or next_block is None:
            raise RuntimeError(f"remove() called on an invalid block: {block}")
        prev_block.next_free_block = next_block
        next_block.prev_free_block = prev_block
        block.prev_free_block = block.next_free_block = None

    def popleft(self) -> KVCacheBlock:
        """``popleft`` (311-345)."""
        node = self.fake_free_list_head.next_free_block
        while True:
            if node is self.fake_free_list_tail or node is None:
                assert self.num_free_blocks == 0, (
                    f"num_free_blocks ({self.num_free_blocks}) is out of sync with the free list."
                )
                raise ValueError("No free blocks available")
            if node is self._fresh:
                if self._pool.next_fresh_id < self._pool.num_gpu_blocks:
                    block = self._pool._materialize_fresh()
                    self.num_free_blocks -= 1
                    return block
                node = node.next_free_block
                continue
            self._unlink(node)
            self.num_free_blocks -= 1
            return node

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """``popleft_n`` (347-389): one walk from the head; a stretch of never-allocated ids is
        materialized at once. An exhausted marker walked past leaves the list (it never refills)."""
        if n == 0:
            return []
        assert self.num_free_blocks >= n
        head = self.fake_free_list_head
        tail = self.fake_free_list_tail
        fresh = self._fresh
        pool = self._pool
        out: list[KVCacheBlock] = []
        need = n
        node = head.next_free_block
        while need:
            if node is fresh:
                available = pool.num_gpu_blocks - pool.next_fresh_id
                if available:
                    take = need if need < available else available
                    out.extend(pool._materialize_fresh_n(take))
                    need -= take
                    if not need:
                        break  # the marker stays first
                node = fresh.next_free_block
                fresh.prev_free_block = fresh.next_free_block = None
                continue
            if node is tail or node is None:
                raise ValueError("No free blocks available")
            out.append(node)
            next_block = node.next_free_block
            node.prev_free_block = node.next_free_block = None
            node = next_block
            need -= 1
        head.next_free_block = node
        node.prev_free_block = head
        self.num_free_blocks -= n
        return out

    def remove(self, block: KVCacheBlock) -> None:
        """``remove`` (391-412)."""
        self._unlink(block)
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """``append`` (414-436)."""
        self.append_n([block])

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """``prepend_n`` (438-457): blocks go to the front, in the given order."""
        if not blocks:
            return
        first_block = self.fake_free_list_head.next_free_block
        assert first_block is not None
        prev_block = self.fake_free_list_head
        for block in blocks:
            block.prev_free_block = prev_block
            prev_block.next_free_block = block
            prev_block = block
        prev_block.next_free_block = first_block
        first_block.prev_free_block = prev_block
        self.num_free_blocks += len(blocks)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """``append_n`` (459-484): blocks go to the back, in the given order."""
        if not blocks:
            return
        tail = self.fake_free_list_tail
        last_block = tail.prev_free_block
        assert last_block is not None
        for block in blocks:
            block.prev_free_block = last_block
            last_block.next_free_block = block
            last_block = block
        last_block.next_free_block = tail
        tail.prev_free_block = last_block
        self.num_free_blocks += len(blocks)

    def get_all_free_block_ids(self) -> list[int]:
        """The free queue's block ids in eviction order (``get_all_free_blocks``, 486-505; testing
        only: O(num_free_blocks))."""
        ret: list[int] = []
        node = self.fake_free_list_head.next_free_block
        while node is not None and node is not self.fake_free_list_tail:
            if node is self._fresh:
                ret.extend(range(self._pool.next_fresh_id, self._pool.num_gpu_blocks))
            else:
                ret.append(node.block_id)
            node = node.next_free_block
        return ret


class BlockHashToBlockMap:
    """``BlockHashToBlockMap`` (``block_pool.py:36-134``): hash key -> one block or {id: block}."""

    def __init__(self) -> None:
        self._cache: dict[BlockHashWithGroupId, KVCacheBlock | dict[int, KVCacheBlock]] = {}
        #: kvproof (decode runs): block hashes whose keys are watched, and how often a watched key
        #: was inserted or popped since (a waiting request's prefix hit can only change then).
        self.watched: set[BlockHash] | None = None
        self.watched_changes = 0

    def get_one_block(self, key: BlockHashWithGroupId) -> KVCacheBlock | None:
        blocks = self._cache.get(key)
        if blocks is None:
            return None
        if isinstance(blocks, KVCacheBlock):
            return blocks
        return next(iter(blocks.values()))

    def contain(self, key: BlockHashWithGroupId, block_id: int) -> bool:
        blocks = self._cache.get(key)
        if blocks is None:
            return False
        if isinstance(blocks, KVCacheBlock):
            return blocks.block_id == block_id
        return block_id in blocks

    def insert(self, key: BlockHashWithGroupId, block: KVCacheBlock) -> None:
        if self.watched is not None and key[0] in self.watched:
            self.watched_changes += 1
        blocks = self._cache.get(key)
        if blocks is None:
            self._cache[key] = block
        elif isinstance(blocks, KVCacheBlock):
            self._cache[key] = {blocks.block_id: blocks, block.block_id: block}
        else:
            blocks[block.block_id] = block

    def pop(self, key: BlockHashWithGroupId, block_id: int) -> KVCacheBlock | None:
        blocks = self._cache.pop(key, None)
        if blocks is None:
            return None
        if self.watched is not None and key[0] in self.watched:
            self.watched_changes += 1
        if isinstance(blocks, KVCacheBlock):
            if blocks.block_id == block_id:
                return blocks
            self._cache[key] = blocks
            return None
        block = blocks.pop(block_id, None)
        if len(blocks) > 0:
            self._cache[key] = blocks
        return block

    def __len__(self) -> int:
        return len(self._cache)


class BlockHashListWithBlockSize:
    """``BlockHashListWithBlockSize`` (``kv_cache_utils.py:1157-1230``): the hash of a
    ``target_block_size`` block is the last ``hash_block_size`` hash inside it."""

    def __init__(self, block_hashes: list[BlockHash], hash_block_size: int, target_block_size: int):
        self.block_hashes = block_hashes
        assert target_block_size % hash_block_size == 0
        self.scale_factor = target_block_size // hash_block_size

    def __len__(self) -> int:
        return len(self.block_hashes) // self.scale_factor

    def __getitem__(self, idx):
        if isinstance(idx, int):
            if idx < 0:
                idx += len(self)
            return self._get_value_at(idx)
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            return [self._get_value_at(i) for i in range(start, stop, step)]
        raise TypeError(f"Invalid index type: {type(idx)!r}")

    def __iter__(self):
        for i in range(len(self)):
            yield self._get_value_at(i)

    def _get_value_at(self, idx: int) -> BlockHash:
        return self.block_hashes[(idx + 1) * self.scale_factor - 1]


BlockHashList = list[BlockHash] | BlockHashListWithBlockSize


def resolve_block_hashes(
    block_hashes: BlockHashList,
    hash_block_size: int,
    block_size: int,
    *,
    supports_fine_grained_hash_lookup: bool = False,
    alignment_tokens: int | None = None,
) -> BlockHashList:
    """``resolve_block_hashes`` (``kv_cache_utils.py:1233-1263``)."""
    if block_size == hash_block_size:
        return block_hashes
    if isinstance(block_hashes, BlockHashListWithBlockSize):
        assert block_hashes.scale_factor == block_size // hash_block_size
        return block_hashes
    if (
        supports_fine_grained_hash_lookup
        and alignment_tokens is not None
        and alignment_tokens < block_size
        and block_size % alignment_tokens == 0
    ):
        return block_hashes
    assert block_size % hash_block_size == 0
    return BlockHashListWithBlockSize(block_hashes, hash_block_size, block_size)


class BlockPool:
    """``BlockPool`` (``block_pool.py:137-945``).

    Args:
        num_gpu_blocks: blocks in the pool (block 0 is the null block).
        enable_caching: prefix caching on.
        hash_block_size: the granularity of ``Request.block_hashes``.
    """

    def __init__(self, num_gpu_blocks: int, enable_caching: bool, hash_block_size: int,
                 num_hash_lookahead_tokens: int = 0):
        assert isinstance(num_gpu_blocks, int) and num_gpu_blocks > 0
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        # Materialized blocks by id (vLLM: ``self.blocks``, a list of all of them).
        self._blocks: list[KVCacheBlock] = []  # by id: ids are handed out fresh in order
        self.next_fresh_id = 0
        self.free_block_queue = FreeKVCacheBlockQueue(self)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.cached_block_hashes_by_block: dict[int, set[BlockHashWithGroupId]] = {}
        # block_pool.py:190-193: block 0 is the null block, popped at start-up and never freed.
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True

    # -- lazy block objects -------------------------------------------------------------------

    def _materialize_fresh(self) -> KVCacheBlock:
        block = KVCacheBlock(self.next_fresh_id)
        self._blocks.append(block)
        self.next_fresh_id += 1
        return block

    def _materialize_fresh_n(self, n: int) -> list[KVCacheBlock]:
        blocks = [KVCacheBlock(block_id) for block_id in range(self.next_fresh_id, self.next_fresh_id + n)]
        self._blocks.extend(blocks)
        self.next_fresh_id += n
        return blocks

    def get_block(self, block_id: int) -> KVCacheBlock:
        """``self.blocks[block_id]`` for an id the pool has handed out."""
        return self._blocks[block_id]

    # -- lookup and caching -------------------------------------------------------------------

    def get_cached_block(self, block_hash: BlockHash, kv_cache_group_ids: list[int]) -> list[KVCacheBlock] | None:
        """``get_cached_block`` (202-228)."""
        cached_blocks = []
        for group_id in kv_cache_group_ids:
            block = self.cached_block_hash_to_block.get_one_block(make_block_hash_with_group_id(block_hash, group_id))
            if not block:
                return None
            cached_blocks.append(block)
        return cached_blocks

    def cache_full_blocks(self, request, blocks: list[KVCacheBlock], num_cached_blocks: int, num_full_blocks: int,
                          block_size: int, kv_cache_group_id: int, block_mask: list[bool] | None = None) -> None:
        """``cache_full_blocks`` (230-356), without KV events."""
        if num_cached_blocks >= num_full_blocks:
            return
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        assert block_mask is None or len(block_mask) == len(new_full_blocks)
        block_hashes = resolve_block_hashes(request.block_hashes, self.hash_block_size, block_size)
        hash_map = self.cached_block_hash_to_block
        cache = hash_map._cache
        for i, blk in enumerate(new_full_blocks):
            if blk.is_null or (block_mask is not None and not block_mask[i]):
                continue
            block_hash = block_hashes[num_cached_blocks + i]
            num_hash_tokens = (num_cached_blocks + i + 1) * block_size
            key = (block_hash, kv_cache_group_id)  # make_block_hash_with_group_id
            if blk._block_hash is not None:
                # Partial -> full promotion of the same block (292-301).
                assert blk.block_hash_num_tokens is not None and blk.block_hash_num_tokens < num_hash_tokens
                self._remove_cached_block_hashes(blk)
            elif cache.setdefault(key, blk) is blk:
                # _insert_block_hash of an unhashed block under a new key (just inserted): it becomes
                # the primary hash
                blk._block_hash = key
                blk._block_hash_num_tokens = num_hash_tokens
                if hash_map.watched is not None and block_hash in hash_map.watched:
                    hash_map.watched_changes += 1
                continue
            self._insert_block_hash(key, blk, num_tokens=num_hash_tokens)

    def cache_partial_block(self, request, block: KVCacheBlock, num_tokens: int, kv_cache_group_id: int,
                            block_size: int, replace_existing_hashes: bool = False) -> BlockHashWithGroupId | None:
        """``cache_partial_block`` (486-603), without KV events."""
        if block.is_null:
            return None
        assert block_size % self.hash_block_size == 0
        assert num_tokens % self.hash_block_size == 0
        num_hash_blocks = num_tokens // self.hash_block_size
        assert 0 < num_hash_blocks <= len(request.block_hashes)
        key = self._partial_key(request, num_hash_blocks, kv_cache_group_id)
        already_cached = block.block_hash == key or self.cached_block_hash_to_block.contain(key, block.block_id)
        if replace_existing_hashes or (
            not already_cached
            and block.block_hash is not None
            and block.block_hash_num_tokens is not None
            and block.block_hash_num_tokens < num_hash_blocks * self.hash_block_size
        ):
            self._remove_cached_block_hashes(block)
        self._insert_block_hash(key, block, num_tokens=num_hash_blocks * self.hash_block_size)
        return key

    @staticmethod
    def _partial_key(request, num_hash_blocks: int, kv_cache_group_id: int) -> BlockHashWithGroupId:
        return make_block_hash_with_group_id(request.block_hashes[num_hash_blocks - 1], kv_cache_group_id)

    def is_partial_block_cached(self, request, block: KVCacheBlock, num_tokens: int, kv_cache_group_id: int) -> bool:
        """kvproof: whether ``cache_partial_block(request, block, num_tokens, group)`` (without
        ``replace_existing_hashes``) would leave the pool as it is: a null block, or one already
        keyed at that boundary (its ``already_cached``, 539-543, then ``_insert_block_hash``'s early
        returns)."""
        if block.is_null:
            return True
        key = self._partial_key(request, num_tokens // self.hash_block_size, kv_cache_group_id)
        return block.block_hash == key or self.cached_block_hash_to_block.contain(key, block.block_id)

    def _remove_cached_block_hashes(self, block: KVCacheBlock) -> list[BlockHashWithGroupId]:
        """``_remove_cached_block_hashes`` (630-649)."""
        if block.block_id not in self.cached_block_hashes_by_block:  # the usual case: one hash at most
            key = block._block_hash
            if key is None:
                return []
            block._block_hash = block._block_hash_num_tokens = None
            return [key] if self.cached_block_hash_to_block.pop(key, block.block_id) is not None else []
        block_hashes: list[BlockHashWithGroupId] = []
        if block.block_hash is not None:
            block_hashes.append(block.block_hash)
        block_hashes.extend(self.cached_block_hashes_by_block.pop(block.block_id, ()))
        if not block_hashes:
            return []
        removed = [h for h in block_hashes if self.cached_block_hash_to_block.pop(h, block.block_id) is not None]
        block.reset_hash()
        return removed

    def _insert_block_hash(self, key: BlockHashWithGroupId, block: KVCacheBlock, num_tokens: int | None) -> None:
        """``_insert_block_hash`` (666-686)."""
        if block.block_hash == key:
            return
        if self.cached_block_hash_to_block.contain(key, block.block_id):
            return
        if block.block_hash is None:
            block.set_block_hash(key, num_tokens=num_tokens)
        else:
            self.cached_block_hashes_by_block.setdefault(block.block_id, set()).add(key)
        self.cached_block_hash_to_block.insert(key, block)

    def move_block_hashes(self, src_block: KVCacheBlock, dst_block: KVCacheBlock) -> None:
        """``move_block_hashes`` (688-704)."""
        assert dst_block.block_hash is None
        assert dst_block.block_id not in self.cached_block_hashes_by_block
        num_tokens = src_block.block_hash_num_tokens
        for key in self._remove_cached_block_hashes(src_block):
            self._insert_block_hash(key, dst_block, num_tokens=num_tokens)

    # -- allocation ---------------------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """``get_new_blocks`` (706-740): pop from the head; a reused cached block loses its hashes."""
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        ret = self.free_block_queue.popleft_n(num_blocks)
        caching = self.enable_caching
        by_block = self.cached_block_hashes_by_block
        evict = self._remove_cached_block_hashes  # _maybe_evict_cached_block without its bool()
        for block in ret:
            # _maybe_evict_cached_block of a block without hashes does nothing: skipped
            if caching and (block._block_hash is not None or block.block_id in by_block):
                evict(block)
            assert block.ref_cnt == 0
            block.ref_cnt = 1
        return ret

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """``_maybe_evict_cached_block`` (769-790)."""
        return bool(self._remove_cached_block_hashes(block))

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """``touch`` (792-810): a hit block with ref 0 leaves the free queue."""
        for block in blocks:
            if block.is_null:
                continue
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1

    def is_block_writable(self, block: KVCacheBlock) -> bool:
        """``is_block_writable`` (812-814)."""
        return not block.is_null and block.ref_cnt == 1 and block.block_hash is None

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """``free_blocks`` (816-849): blocks reaching ref 0 without a hash (or with caching off) go
        to the FRONT of the free queue (LIFO reuse), hashed ones to the BACK (LRU eviction)."""
        blocks_to_evict_last = []
        blocks_to_evict_first = []
        for block in ordered_blocks:
            if block.is_null:
                continue
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if block.block_hash is None or not self.enable_caching:
                    blocks_to_evict_first.append(block)
                else:
                    blocks_to_evict_last.append(block)
        self.free_block_queue.prepend_n(blocks_to_evict_first)
        self.free_block_queue.append_n(blocks_to_evict_last)

    def reset_prefix_cache(self) -> bool:
        """``reset_prefix_cache`` (871-910)."""
        if self.num_gpu_blocks - self.get_num_free_blocks() != 1:
            return False
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.cached_block_hashes_by_block.clear()
        for block in self._blocks:
            block.reset_hash()
        return True

    def get_num_free_blocks(self) -> int:
        """``get_num_free_blocks`` (912-919)."""
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """``get_usage`` (921-932)."""
        total_gpu_blocks = self.num_gpu_blocks - 1
        if not total_gpu_blocks:
            return 0
        return 1.0 - (self.get_num_free_blocks() / total_gpu_blocks)
