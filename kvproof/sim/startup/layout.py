"""KV cache layouts (B.9): the ``KVCacheLayout`` enum, its resolution and its strides.

Sources: ``vllm/v1/kv_cache_layout.py``, ``vllm/v1/attention/backends/utils.py:229-383``
(``get_supported_kv_cache_layouts``, ``resolve_kv_cache_layout``) and
``vllm/v1/kv_cache_interface.py:379-415`` (``compute_layout_strides``).
"""

from __future__ import annotations

from collections import defaultdict
from enum import Enum
from math import prod
from typing import Iterable, Sequence

from ...models.geometry import LAYOUT_ALIASES
from .refusals import VllmAssertionError, VllmValueError
from .specs import AttentionSpec

__all__ = [
    "KVCacheLayout", "DEFAULT_LAYOUT_PREFERENCE", "layout_from_name", "get_supported_kv_cache_layouts",
    "resolve_kv_cache_layout", "compute_layout_strides", "DIM_L", "DIM_B", "DIM_H", "DIM_N", "DIM_C",
]

DIM_L, DIM_B, DIM_H, DIM_N, DIM_C = 0, 1, 2, 3, 4


class KVCacheLayout(Enum):
    """``KVCacheLayout``: each value is the stride permutation of logical ``[L, B, H, N, C]``."""

    LBHNC = (0, 1, 2, 3, 4)
    LBNHC = (0, 1, 3, 2, 4)
    LHBNC = (0, 2, 1, 3, 4)
    BLHNC = (1, 0, 2, 3, 4)
    BLNHC = (1, 0, 3, 2, 4)
    BHLNC = (1, 2, 0, 3, 4)

    @property
    def stride_order(self) -> tuple[int, ...]:
        return self.value

    @property
    def is_layer_compact(self) -> bool:
        return self.value[DIM_L] == 0

    @property
    def is_block_compact(self) -> bool:
        return set(self.value[:2]) == {DIM_L, DIM_B}

    @property
    def is_block_outermost(self) -> bool:
        return self.value[0] == DIM_B


DEFAULT_LAYOUT_PREFERENCE = (
    KVCacheLayout.LBNHC,
    KVCacheLayout.LBHNC,
    KVCacheLayout.BLNHC,
    KVCacheLayout.BLHNC,
    KVCacheLayout.BHLNC,
    KVCacheLayout.LHBNC,
)


def layout_from_name(name: str) -> KVCacheLayout:
    """``_layout_from_name`` (vllm/config/cache.py:33-41), with the NHD/HND aliases."""
    name = LAYOUT_ALIASES.get(name, name)
    try:
        return KVCacheLayout[name]
    except KeyError:
        raise VllmValueError(
            f"Unknown KV cache layout {name!r}. Valid layouts: {[m.name for m in KVCacheLayout]}"
        ) from None


def _names(layouts: Iterable[KVCacheLayout]) -> list[str]:
    return [layout.name for layout in layouts]


def get_supported_kv_cache_layouts(declarations: Sequence[Sequence[KVCacheLayout] | None]) -> list[KVCacheLayout]:
    """``get_supported_kv_cache_layouts`` (backends/utils.py:243-278): one declaration per
    backend (None = any layout works)."""
    lists = [list(layouts) for layouts in declarations if layouts is not None] or [list(DEFAULT_LAYOUT_PREFERENCE)]
    first = lists[0]
    if all(layouts == first for layouts in lists[1:]):
        return list(first)
    priorities: dict[KVCacheLayout, int] = defaultdict(int)
    for layouts in lists:
        priorities[layouts[0]] += 1
    supported = set.intersection(*map(set, lists))
    candidates = sorted((m for m in KVCacheLayout if m in supported), key=lambda m: priorities[m], reverse=True)
    if not candidates:
        raise VllmValueError(
            f"No KV cache layout satisfies every supported set: {list(map(_names, lists))}."
        )
    return candidates


def resolve_kv_cache_layout(
    forced: str | None,
    supported_names: list[str],
    specs: Sequence,
    num_workers: int = 1,
) -> KVCacheLayout:
    """``resolve_kv_cache_layout`` (backends/utils.py:293-383).

    ``forced`` is a layout already set on ``cache_config`` (wins outright); ``supported_names``
    the worker's list of supported layouts, most preferred first; ``specs`` every layer spec.
    ``VLLM_KV_CACHE_LAYOUT`` and KV connectors are not modelled (a forced layout stands for them).
    """
    if forced is not None:
        return layout_from_name(forced)
    candidates = [layout_from_name(name) for name in supported_names]
    view_specs = [spec for spec in specs if spec.has_layer_views]
    hnc_shapes = {(spec.num_heads, spec.num_states, spec.page_size_bytes) for spec in view_specs}
    if len(hnc_shapes) > 1:
        candidates = [m for m in candidates if m.is_block_compact]
        if not candidates:
            raise VllmValueError(
                "Specs with mixed HNC shapes need a block-compact layout, but "
                f"none is in every supported set: {[supported_names] * num_workers}."
            )
    dcp_sharding = {
        spec.dcp_sharded for spec in view_specs if isinstance(spec, AttentionSpec) and spec.uses_slot_mapping
    }
    page_sizes = {spec.page_size_bytes for spec in view_specs}
    if len(dcp_sharding) > 1 and len(page_sizes) > 1:
        candidates = [m for m in candidates if m.is_block_outermost]
        if not candidates:
            raise VllmValueError(
                "DCP with a replicated draft and mixed KV page sizes requires "
                f"a block-outer KV cache layout; supported sets: {[supported_names] * num_workers}."
            )
    return candidates[0]


def compute_layout_strides(
    shape_lbhnc: tuple[int, int, int, int, int],
    layout: KVCacheLayout,
    padded_page_size: int | None = None,
    kernel_split: bool = False,
    fixed_strides: tuple[int | None, ...] = (None,) * 5,
) -> tuple[int, ...]:
    """``compute_layout_strides`` (kv_cache_interface.py:379-415): byte strides of the logical
    ``[L, B, H, N, C]`` axes.  ``shape_lbhnc`` is ``(num_layers, *compute_layer_kv_cache_shape_bytes)``;
    ``kernel_split`` is true when a kernel block size other than the spec's block size is used."""
    shape = shape_lbhnc
    order = layout.stride_order
    page_grid_end = None
    if padded_page_size is not None:
        if kernel_split:
            raise VllmAssertionError("Padded KV pages do not support kernel block splitting.")
        page_grid_end = max(order.index(DIM_L), order.index(DIM_B)) + 1
        page_grid_shape = tuple(shape[dim] for dim in order[:page_grid_end])
        if prod(page_grid_shape) != shape[DIM_L] * shape[DIM_B]:
            raise VllmAssertionError(
                "Page padding requires dimensions outside the page tail to be L, B, "
                f"or singleton; got {layout.name} with shape {tuple(shape)}."
            )
    strides = [0] * 5
    current = 1
    for physical_idx, dim in reversed(tuple(enumerate(order))):
        if padded_page_size is not None and physical_idx == page_grid_end - 1:
            current = max(current, padded_page_size)
            if current % padded_page_size != 0:
                raise VllmAssertionError("")
        strides[dim] = fixed_strides[dim] or current
        current = strides[dim] * shape[dim]
    return tuple(strides)
