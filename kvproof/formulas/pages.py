"""Page sizes of vLLM 0.33.0's KV cache specs (``vllm/v1/kv_cache_interface.py``).

One page formula per spec class family:

* the attention family -- full, sliding-window, chunked-local, sink, cross-attention, encoder-only,
  MLA, hidden-state, the DeepSeek indexer (an MLA spec with ``cache_role="indexer"`` and a packed
  ``state_content_bytes``) and the ring buffer: ``num_heads x num_states x state_content_size``
  (579-601); the MLA classes default ``head_size_v`` to 0 (728-812, 1007-1090), the others to
  ``head_size`` (551-577);
* Mamba-like state (Mamba, GDN, KDA, short conv): ``sum(prod(shape) x dtype_size)`` (1106-1129);
* a uniform-type group: the sum of its layers' pages (1318-1320).

Either page may be padded (``page_size_padded``, never below the unpadded page). An optional
operand (``page_size_padded``, ``state_content_bytes``) may be ``None``, a record's absent field
or a solver leaf: it is read with :func:`kvproof.logic.OrDefault` and ``Present``, so the
simulator's ``None`` and a symbolic record's optional field take the same formula.
``tokens_per_state`` may be an ``int``, a ``Fraction`` (concrete only) or a z3 Int.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

from ..logic import If, Implies, Or, OrDefault, Present, Sum, ValueOf, div, is_symbolic, round_up

__all__ = [
    "MLA_CLASSES", "num_kernel_states", "default_head_size_v", "attention_state_content_size_bytes",
    "attention_unpadded_page_size_bytes", "padded_page_size_bytes", "padding_fits", "state_tensor_bytes",
    "mamba_state_size_bytes", "uniform_type_page_size_bytes", "layer_block_stride",
]

#: The spec classes whose ``head_size_v`` defaults to 0 (a latent cache holds no separate V).
MLA_CLASSES = ("MLAAttentionSpec", "HiddenStateCacheSpec", "SlidingWindowMLASpec")


def _unset(value: Any) -> bool:
    """An optional operand that holds nothing: ``None``, or a record's absent field (a solver leaf
    is neither: its presence is a term, read with ``Present``/``OrDefault``)."""
    return value is None or type(value).__name__ == "Absent"


def num_kernel_states(kernel_block_size: Any, tokens_per_state: Any) -> Any:
    """``KVCacheSpec.get_num_kernel_states`` (kv_cache_interface.py:272-275):
    ``kbs // tokens_per_state`` when ``tokens_per_state > 0``, else 1.

    ``int // Fraction(a, b)`` is ``floor(kbs * b / a)``, written as an integer division so it
    also runs on a symbolic ``kbs``.
    """
    if type(tokens_per_state) is int and type(kernel_block_size) is int:  # the common case: no helper call
        return kernel_block_size // tokens_per_state if tokens_per_state > 0 else 1
    if isinstance(tokens_per_state, Fraction):
        if tokens_per_state > 0:
            return div(kernel_block_size * tokens_per_state.denominator, tokens_per_state.numerator)
        return 1
    if is_symbolic(tokens_per_state):
        return If(tokens_per_state > 0, div(kernel_block_size, tokens_per_state), 1)
    if tokens_per_state > 0:
        return div(kernel_block_size, tokens_per_state)
    return 1


def default_head_size_v(spec_class: Any, head_size: Any) -> Any:
    """``head_size_v`` of a spec that does not state it: 0 for the MLA classes, else ``head_size``
    (``AttentionSpec.__post_init__``, 574-577)."""
    if type(spec_class) is str:
        return 0 if spec_class in MLA_CLASSES else head_size
    return If(Or(*[spec_class == name for name in MLA_CLASSES]), 0, head_size)


def attention_state_content_size_bytes(
    head_size: Any, head_size_v: Any, dtype_size: Any, state_content_bytes: Any = None
) -> Any:
    """``AttentionSpec.state_content_size_bytes`` (585-590): the packed override if set (an
    indexer's), else ``(head_size + head_size_v) * dtype_size``."""
    if _unset(state_content_bytes):
        return (head_size + head_size_v) * dtype_size
    if type(state_content_bytes) is int:
        return state_content_bytes
    return OrDefault(state_content_bytes, (head_size + head_size_v) * dtype_size)


def attention_unpadded_page_size_bytes(
    num_heads: Any, block_size: Any, tokens_per_state: Any, state_content_size_bytes: Any
) -> Any:
    """``AttentionSpec.unpadded_page_size_bytes`` (592-594):
    ``num_heads * num_states(block_size) * state_content_size_bytes``."""
    return num_heads * num_kernel_states(block_size, tokens_per_state) * state_content_size_bytes


def padded_page_size_bytes(unpadded: Any, page_size_padded: Any = None) -> Any:
    """``page_size_bytes`` of attention (596-601) and Mamba (1120-1129) specs: the padded size
    if one is set, else the unpadded size."""
    if _unset(page_size_padded):
        return unpadded
    if type(page_size_padded) is int:
        return page_size_padded
    return OrDefault(page_size_padded, unpadded)


def padding_fits(unpadded: Any, page_size_padded: Any = None) -> Any:
    """vLLM's assertion on a padded page (598, 1127): it is not smaller than the unpadded one."""
    if _unset(page_size_padded):
        return True
    if type(page_size_padded) is int:
        return page_size_padded >= unpadded
    return Implies(Present(page_size_padded), ValueOf(page_size_padded) >= unpadded)


def state_tensor_bytes(shape: Sequence[Any], dtype_size: Any) -> Any:
    """``prod(shape) * dtype_size``: the bytes of one Mamba state tensor of one block."""
    out = 1
    for size in shape:
        out = out * size
    return out * dtype_size


def mamba_state_size_bytes(state_sizes_bytes: list[Any]) -> Any:
    """``MambaSpec.state_content_size_bytes`` (1109-1114): ``sum(prod(shape) * dtype_size)``;
    the caller passes one :func:`state_tensor_bytes` per state tensor."""
    return Sum(*state_sizes_bytes)


def uniform_type_page_size_bytes(layer_pages: list[Any]) -> Any:
    """``UniformTypeKVCacheSpecs.page_size_bytes`` (1318-1320): the sum of the layer pages."""
    return Sum(layer_pages)


def layer_block_stride(page_size_bytes: Any, block_stride_alignment: Any) -> Any:
    """``_get_layer_block_stride`` (kv_cache_planning.py:567-569): the page rounded up to the
    layer's ``get_block_stride_alignment()``."""
    return round_up(page_size_bytes, block_stride_alignment)
