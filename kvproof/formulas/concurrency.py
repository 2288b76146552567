"""Start-up concurrency and capacity (B.5).

``get_max_concurrency_for_kv_cache_config`` (kv_cache_utils.py:1061-1093) and
``get_kv_cache_capacity`` (1120-1128): ``num_blocks / sum_g cdiv(max_memory_usage_bytes_g,
page_g)`` over the scheduler's groups (each a group's first layer spec), the null block
included in ``num_blocks``.  Written with :mod:`kvproof.logic` helpers: on z3 terms the
quotient is an exact real and ``kv_cache_size_tokens`` its floor; concretely they are vLLM's
Python float and ``int()``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..logic import Sum, fdiv, is_symbolic, z3

__all__ = ["max_concurrency", "kv_cache_size_tokens"]


def max_concurrency(num_blocks: Any, blocks_per_request: Sequence[Any]) -> Any:
    """``num_blocks / sum(blocks_per_request)`` (kv_cache_utils.py:1076-1093)."""
    return fdiv(num_blocks, Sum(list(blocks_per_request)))


def kv_cache_size_tokens(concurrency: Any, max_model_len: Any) -> Any:
    """``int(max_concurrency * max_model_len)`` (kv_cache_utils.py:1120-1128)."""
    if is_symbolic(concurrency, max_model_len):
        return z3().ToInt(concurrency * max_model_len)
    return int(concurrency * max_model_len)
