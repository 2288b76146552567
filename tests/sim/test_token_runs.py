"""``kvproof.sim.requests.token_runs``: token ids kept as runs behave as the list they stand for,
and two prefixes get the same key exactly when their token ids are equal (the property vLLM's
chained block hashes have, which the request block hasher relies on)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvproof.sim.requests.request import Request, get_request_block_hasher
from kvproof.sim.requests.token_runs import TokenRuns

# Pieces of token ids: runs that often continue one another (start = end of the last), repeats,
# single ids, so that merged runs, runs that only look alike and equal prefixes all occur.
_piece = st.one_of(
    st.tuples(st.just("run"), st.integers(0, 40), st.integers(1, 12)),
    st.tuples(st.just("ids"), st.lists(st.integers(0, 45), min_size=1, max_size=6)),
)


def _build(pieces) -> tuple[list[int], TokenRuns, TokenRuns]:
    """The ids as a list, as TokenRuns built by ``extend`` of each piece, and by ``append`` one by one."""
    ids: list[int] = []
    by_extend = TokenRuns()
    for kind, *args in pieces:
        part = range(args[0], args[0] + args[1]) if kind == "run" else args[0]
        ids.extend(part)
        by_extend.extend(part)
    by_append = TokenRuns()
    for token in ids:
        by_append.append(token)
    return ids, by_extend, by_append


@settings(max_examples=300, deadline=None)
@given(st.lists(_piece, min_size=1, max_size=6), st.lists(_piece, min_size=1, max_size=6))
def test_prefix_keys_are_equal_exactly_when_the_token_ids_are(a_pieces, b_pieces) -> None:
    a, a_runs, a_appended = _build(a_pieces)
    b, b_runs, _ = _build(b_pieces)
    assert a_runs == a and list(a_runs) == a and len(a_runs) == len(a)
    assert a_runs.runs() == a_appended.runs()  # maximal runs, however the ids arrived
    assert [a_runs[i] for i in range(-len(a), len(a))] == a[-len(a):] + a
    assert a_runs[1:5] == a[1:5] and a_runs.copy() == a_runs
    for n in range(1, len(a) + 1):
        assert a_runs.prefix_key(n) == a_appended.prefix_key(n)
        for m in range(1, len(b) + 1):
            assert (a_runs.prefix_key(n) == b_runs.prefix_key(m)) == (a[:n] == b[:m])


def test_a_copy_is_independent_and_a_run_continues_across_extend_and_append() -> None:
    ids = TokenRuns(range(10, 14))
    other = ids.copy()
    ids.append(14)  # continues the run
    ids.extend([15, 3])
    assert ids.runs() == [(10, 6), (3, 1)] and other.runs() == [(10, 4)]
    assert ids.prefix_key(6) == TokenRuns(range(10, 16)).prefix_key(6)
    assert ids.prefix_key(7) != TokenRuns([*range(10, 16), 4]).prefix_key(7)


@settings(max_examples=100, deadline=None)
@given(st.lists(_piece, min_size=1, max_size=5), st.lists(_piece, min_size=1, max_size=5),
       st.integers(1, 5), st.integers(0, 2))
def test_block_hashes_are_equal_exactly_when_the_prefixes_and_lookahead_tokens_are(a_pieces, b_pieces, block_size,
                                                                               lookahead) -> None:
    """vLLM's chain: block i's hash covers tokens [0, (i + 1) * block_size) and, with lookahead L,
    the L tokens after them as its extra keys (``kv_cache_utils.py:953-1036``)."""
    hasher = get_request_block_hasher(block_size, lookahead)
    (a, _, _), (b, _, _) = _build(a_pieces), _build(b_pieces)
    ra, rb = Request("a", a[:1], block_hasher=hasher), Request("b", b, block_hasher=hasher)
    ra.append_output_token_ids(a[1:])  # appended after the prompt: the same chain
    for request, ids in ((ra, a), (rb, b)):
        assert len(request.block_hashes) == max(0, (len(ids) - lookahead) // block_size)
    for i, ha in enumerate(ra.block_hashes):
        for j, hb in enumerate(rb.block_hashes):
            end_a, end_b = (i + 1) * block_size + lookahead, (j + 1) * block_size + lookahead
            assert (ha == hb) == (i == j and a[:end_a] == b[:end_b])
