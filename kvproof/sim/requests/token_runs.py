"""A request's token ids as runs of consecutive integers, and the exact key of each prefix.

The workload's token ids (``docs/requests.md``) are a few runs of consecutive integers per request:
a shared prefix, the request's own prompt tokens, its output tokens. ``TokenRuns`` stores them so
(appending a token that continues the last run costs one comparison) and gives the key of any
prefix in O(1): the prefix's maximal runs. Two prefixes have equal keys exactly when their token
ids are equal, which is all vLLM's block hashes are used for (``hash_block_tokens`` chained over the
prefix, ``v1/core/kv_cache_utils.py:707-737``, with no collision), so the keys stand in for them
(``request.get_request_block_hasher``) without hashing a token.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["PrefixKey", "TokenRuns"]

#: The key of a token prefix: ``(closed, start, n)``, ``closed`` the flat ``(first id, length)``
#: pairs of the prefix's maximal runs before the last one, ``start`` the last run's first id and
#: ``n`` the prefix length. The maximal runs of a sequence are unique and give it back, so equal
#: keys are equal token ids and the reverse.
PrefixKey = tuple[tuple[int, ...], int, int]


class TokenRuns:
    """A list of token ids kept as maximal runs of consecutive integers (the part of ``list`` a
    ``Request`` uses: ``len``, ``append``, ``extend``, iteration, indexing, ``==``, ``copy``)."""

    __slots__ = ("_starts", "_offsets", "_closed", "_len", "_next")

    def __init__(self, token_ids: Iterable[int] = ()) -> None:
        self._starts: list[int] = []  # first id of each run
        self._offsets: list[int] = []  # position of each run's first token
        self._closed: list[tuple[int, ...]] = []  # per run: the (first id, length) pairs of the runs before it
        self._len = 0
        self._next: int | None = None  # the id that would continue the last run
        self.extend(token_ids)

    def copy(self) -> TokenRuns:
        other = TokenRuns.__new__(TokenRuns)
        other._starts = self._starts.copy()
        other._offsets = self._offsets.copy()
        other._closed = self._closed.copy()
        other._len = self._len
        other._next = self._next
        return other

    def append(self, token_id: int) -> None:
        if token_id != self._next:
            self._new_run(token_id)
        self._len += 1
        self._next = token_id + 1

    def extend(self, token_ids: Iterable[int]) -> None:
        if isinstance(token_ids, range) and token_ids.step == 1:
            if token_ids:  # a run at once
                if token_ids.start != self._next:
                    self._new_run(token_ids.start)
                self._len += len(token_ids)
                self._next = token_ids.stop
            return
        for token_id in token_ids:
            self.append(token_id)

    def _new_run(self, start: int) -> None:
        if self._starts:
            last = len(self._starts) - 1
            self._closed.append(self._closed[last] + (self._starts[last], self._len - self._offsets[last]))
        else:
            self._closed.append(())
        self._starts.append(start)
        self._offsets.append(self._len)

    def runs(self) -> list[tuple[int, int]]:
        """The maximal runs, ``(first id, length)`` each."""
        ends = self._offsets[1:] + [self._len]
        return [(s, e - o) for s, o, e in zip(self._starts, self._offsets, ends)]

    def prefix_key(self, n: int) -> PrefixKey:
        """The key of the first ``n`` tokens (``0 < n <= len``)."""
        j = bisect_left(self._offsets, n) - 1
        return (self._closed[j], self._starts[j], n)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:
        for start, length in self.runs():
            yield from range(start, start + length)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("token index out of range")
        j = bisect_left(self._offsets, index + 1) - 1
        return self._starts[j] + index - self._offsets[j]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenRuns):
            return self._len == other._len and self.runs() == other.runs()
        if isinstance(other, (list, tuple, range)):
            return self._len == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like list

    def __repr__(self) -> str:
        return f"TokenRuns({self.runs()!r})"
