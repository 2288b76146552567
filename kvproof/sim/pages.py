"""Page sizes of vLLM 0.33.0's KV cache specs, as formulas that run on ints and on z3 terms.

Every function here is written with :mod:`kvproof.logic` helpers so the rules and the solver can
call it with symbolic sizes.  ``tokens_per_state`` may be an ``int``, a ``Fraction`` (concrete
only) or a z3 Int.  Sources: ``vllm/v1/kv_cache_interface.py``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..logic import If, Sum, div, is_symbolic, round_up

__all__ = [
    "num_kernel_states", "attention_state_content_size_bytes", "attention_unpadded_page_size_bytes",
    "padded_page_size_bytes", "mamba_state_size_bytes", "uniform_type_page_size_bytes",
    "layer_block_stride",
]


def num_kernel_states(kernel_block_size: Any, tokens_per_state: Any) -> Any:
    """``KVCacheSpec.get_num_kernel_states`` (kv_cache_interface.py:272-275):
    ``kbs // tokens_per_state`` when ``tokens_per_state > 0``, else 1.

    ``int // Fraction(a, b)`` is ``floor(kbs * b / a)``, written as an integer division so it
    also runs on a symbolic ``kbs``.
    """
    if isinstance(tokens_per_state, Fraction):
        if tokens_per_state > 0:
            return div(kernel_block_size * tokens_per_state.denominator, tokens_per_state.numerator)
        return 1
    if is_symbolic(tokens_per_state):
        return If(tokens_per_state > 0, div(kernel_block_size, tokens_per_state), 1)
    if tokens_per_state > 0:
        return div(kernel_block_size, tokens_per_state)
    return 1


def attention_state_content_size_bytes(
    head_size: Any, head_size_v: Any, dtype_size: Any, state_content_bytes: Any = None
) -> Any:
    """``AttentionSpec.state_content_size_bytes`` (585-590): the packed override if set,
    else ``(head_size + head_size_v) * dtype_size``."""
    if state_content_bytes is not None:
        return state_content_bytes
    return (head_size + head_size_v) * dtype_size


def attention_unpadded_page_size_bytes(
    num_heads: Any, block_size: Any, tokens_per_state: Any, state_content_size_bytes: Any
) -> Any:
    """``AttentionSpec.unpadded_page_size_bytes`` (592-594):
    ``num_heads * num_states(block_size) * state_content_size_bytes``."""
    return num_heads * num_kernel_states(block_size, tokens_per_state) * state_content_size_bytes


def padded_page_size_bytes(unpadded: Any, page_size_padded: Any = None) -> Any:
    """``page_size_bytes`` of attention (596-601) and Mamba (1120-1129) specs: the padded size
    if one is set (vLLM asserts it is not smaller), else the unpadded size."""
    if page_size_padded is None:
        return unpadded
    return page_size_padded


def mamba_state_size_bytes(state_sizes_bytes: list[Any]) -> Any:
    """``MambaSpec.state_content_size_bytes`` (1109-1114): ``sum(prod(shape) * dtype_size)``;
    the caller passes one ``prod(shape) * dtype_size`` per state tensor."""
    return Sum(state_sizes_bytes)


def uniform_type_page_size_bytes(layer_pages: list[Any]) -> Any:
    """``UniformTypeKVCacheSpecs.page_size_bytes`` (1318-1320): the sum of the layer pages."""
    return Sum(layer_pages)


def layer_block_stride(page_size_bytes: Any, block_stride_alignment: Any) -> Any:
    """``_get_layer_block_stride`` (kv_cache_planning.py:567-569): the page rounded up to the
    layer's ``get_block_stride_alignment()``."""
    return round_up(page_size_bytes, block_stride_alignment)
