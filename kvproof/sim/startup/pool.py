"""The shared block pool (B.3): bytes per block, ``num_blocks`` and the tensor placement.

Port of ``_get_kv_cache_bytes_per_block`` (kv_cache_planning.py:574-605),
``validate_kv_cache_layout`` (608-639), ``get_kv_cache_config_from_groups`` (642-741) and
``_project_kv_cache_groups_to_worker`` (1413-1458).  The arithmetic (bytes per block, ``num_blocks``,
tensor sizes, layer block strides, the split of a block into kernel blocks) lives in
:mod:`kvproof.formulas`, which the rules share.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from ...formulas.kernel_blocks import allocation_split_rows, kernel_blocks_per_block
from ...formulas.pages import layer_block_stride
from ...formulas.pool import bytes_per_block_block_outermost, bytes_per_block_layer_outermost, num_blocks_for_memory, \
    tensor_size
from .grouping import KVCacheGroupSpec, per_layer_spec
from .layout import DIM_B, DIM_L, KVCacheLayout, compute_layout_strides
from .refusals import VllmAssertionError, VllmValueError, nonzero
from .specs import KVCacheSpec, UniformTypeKVCacheSpecs

__all__ = [
    "KVCacheTensor", "KVCacheConfig", "get_kv_cache_bytes_per_block", "validate_kv_cache_layout",
    "get_kv_cache_config_from_groups", "project_groups_to_worker", "layer_shape_bytes",
]


@dataclass
class KVCacheTensor:
    """``KVCacheTensor`` (kv_cache_interface.py:1474-1495): layer ``l`` block ``b`` starts at
    ``offset + l * layer_stride + b * block_stride`` in a backing of ``size`` bytes."""

    size: int
    layers: list[str]
    layer_stride: int
    block_stride: int
    offset: int = 0


@dataclass
class KVCacheConfig:
    """``KVCacheConfig`` of one worker (the fields the start-up plan sets)."""

    num_blocks: int
    kv_cache_tensors: list[KVCacheTensor]
    kv_cache_groups: list[KVCacheGroupSpec]
    bytes_per_block: int = 0
    layout: KVCacheLayout | None = None
    extra: dict = field(default_factory=dict)


# --- the port --------------------------------------------------------------------------------


def _block_stride(spec: KVCacheSpec) -> int:
    """``_get_layer_block_stride`` (kv_cache_planning.py:567-569) of a layer's spec."""
    return layer_block_stride(spec.page_size_bytes, nonzero(spec.get_block_stride_alignment()))


def get_kv_cache_bytes_per_block(groups: list[KVCacheGroupSpec], layout: KVCacheLayout) -> int:
    """``_get_kv_cache_bytes_per_block`` (kv_cache_planning.py:574-605)."""
    if not layout.is_block_outermost:
        return bytes_per_block_layer_outermost([[_block_stride(per_layer_spec(g, n)) for n in g.layer_names]
                                                for g in groups])
    pages = [[per_layer_spec(g, n).page_size_bytes for n in g.layer_names] for g in groups]
    if not max(sum(p) for p in pages) > 0:
        raise VllmAssertionError("", "v1/core/kv_cache_planning.py:593")
    alignments = [per_layer_spec(g, n).get_block_stride_alignment() for g in groups for n in g.layer_names]
    return bytes_per_block_block_outermost(pages, nonzero(math.lcm(*alignments)))


def validate_kv_cache_layout(layout: KVCacheLayout, groups: list[KVCacheGroupSpec]) -> None:
    """``validate_kv_cache_layout`` (kv_cache_planning.py:608-639)."""
    page_sizes = {per_layer_spec(g, n).page_size_bytes for g in groups for n in g.layer_names}
    if len(page_sizes) == 1:
        return
    if not layout.is_block_compact or (len(groups) > 1 and layout.is_layer_compact):
        raise VllmValueError(
            f"KV cache layout {layout.name} cannot express this model's "
            f"mixed page sizes ({sorted(page_sizes)}); a backend should "
            "declare block-outermost supported layouts (e.g. BLHNC), or "
            "set VLLM_KV_CACHE_LAYOUT=BLHNC.",
            "v1/core/kv_cache_planning.py:630-639",
        )


def layer_shape_bytes(spec: KVCacheSpec, num_blocks: int, kernel_block_size: int | None = None) -> tuple[int, int, int, int]:
    """``compute_layer_kv_cache_shape_bytes`` (kv_cache_interface.py:360-376): ``(B, H, N, C)``."""
    bs = kernel_block_size if kernel_block_size is not None else spec.block_size
    if spec.block_size % bs != 0:
        raise VllmAssertionError(f"Kernel block size {bs} must divide KV cache block size {spec.block_size}.")
    return (allocation_split_rows(num_blocks, kernel_blocks_per_block(spec.block_size, bs)), spec.num_heads,
            spec.get_num_kernel_states(bs), spec.state_content_size_bytes)


def get_kv_cache_config_from_groups(
    groups: list[KVCacheGroupSpec], layout: KVCacheLayout, available_memory: int, num_gpu_blocks_override: int | None
) -> KVCacheConfig:
    """``get_kv_cache_config_from_groups`` (kv_cache_planning.py:642-741)."""
    if not groups:
        return KVCacheConfig(num_blocks=1, kv_cache_tensors=[], kv_cache_groups=groups, layout=layout)
    validate_kv_cache_layout(layout, groups)
    bytes_per_block = get_kv_cache_bytes_per_block(groups, layout)
    interleaved_block_stride = bytes_per_block if layout.is_block_outermost else None
    num_blocks = num_blocks_for_memory(available_memory, nonzero(bytes_per_block))
    if num_gpu_blocks_override is not None:
        num_blocks = num_gpu_blocks_override
    size = tensor_size(bytes_per_block, num_blocks)

    tensors = []
    for group in groups:
        group_spec = group.kv_cache_spec
        layers_by_spec: dict[KVCacheSpec, list[str]] = defaultdict(list)
        if isinstance(group_spec, UniformTypeKVCacheSpecs):
            for name, spec in group_spec.kv_cache_specs.items():
                layers_by_spec[spec].append(name)
        elif group.layer_names:
            layers_by_spec[group_spec].extend(group.layer_names)
        byte_offset = 0
        for spec, names in layers_by_spec.items():
            block_stride = interleaved_block_stride
            padded_page = _block_stride(spec)
            if block_stride is None and padded_page != spec.page_size_bytes:
                if not layout.is_block_compact:
                    raise VllmAssertionError(f"{layout.name} cannot pad pages", "v1/core/kv_cache_planning.py:706-712")
                block_stride = padded_page
            shape = (len(names), *layer_shape_bytes(spec, num_blocks))
            strides = compute_layout_strides(
                shape, layout, getattr(spec, "page_size_padded", None), False, (None, block_stride, None, None, None)
            )
            layer_stride, block_stride = strides[DIM_L], strides[DIM_B]
            tensors.append(KVCacheTensor(size, names, layer_stride, block_stride, byte_offset))
            byte_offset += len(names) * (spec.page_size_bytes if layout.is_block_outermost else layer_stride)
    return KVCacheConfig(num_blocks, tensors, groups, bytes_per_block, layout)


def project_groups_to_worker(
    global_groups: list[KVCacheGroupSpec], worker_layers: set[str] | dict
) -> list[KVCacheGroupSpec]:
    """``_project_kv_cache_groups_to_worker`` (kv_cache_planning.py:1413-1458)."""
    projected = []
    for group in global_groups:
        names = [name for name in group.layer_names if name in worker_layers]
        if len(names) == len(group.layer_names):
            projected.append(group)
            continue
        spec = group.kv_cache_spec
        if names and isinstance(spec, UniformTypeKVCacheSpecs):
            spec = UniformTypeKVCacheSpecs(
                block_size=spec.block_size, kv_cache_specs={name: spec.kv_cache_specs[name] for name in names}
            )
        projected.append(KVCacheGroupSpec(names, spec, is_eagle_group=group.is_eagle_group))
    return projected
