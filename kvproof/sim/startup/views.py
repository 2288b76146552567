"""Worker views and kernel blocks (D).

Port of the worker side of vLLM 0.33.0 for one small pool (``views.num_blocks`` blocks, 3 by
default): ``prepare_kernel_block_sizes`` and ``select_common_block_size``
(``v1/worker/utils.py:496-684``), ``AttentionGroup.create_metadata_builders`` (284-339),
``allocate_kv_cache`` / ``create_kv_cache_views`` (``v1/worker/utils.py:564-627``,
``v1/kv_cache_interface.py:418-482``) and ``map_kv_cache_to_kernel_blocks`` (397-430).  Each view
is described by its shape and strides in elements of the layer's dtype (a Mamba layer stays in
bytes), its storage offset, the kernel block size, ``kernel_block_stride`` (0 for an
allocation-time split, ``stride(0) // page_stride`` for a packed cache split at bind time) and the
kernel block ids of manager blocks 0..2.

The kernel-block arithmetic (rows of a split block, the bind-time view's length, kernel block ids)
is :mod:`kvproof.formulas.kernel_blocks`, the formulas the view rules (VC) check records with.
"""

from __future__ import annotations

from math import prod
from typing import Any

import attrs

from ...formulas.dtypes import dtype_size
from ...formulas.kernel_blocks import bind_split_rows, kernel_block_id, kernel_blocks_per_block
from ...models.geometry import Geometry, MultipleOf, present
from .grouping import KVCacheGroupSpec, per_layer_spec
from .layout import KVCacheLayout, compute_layout_strides
from .pool import get_kv_cache_config_from_groups, layer_shape_bytes
from .refusals import VllmAssertionError, VllmError, VllmStopIteration, VllmValueError, as_refusal
from .specs import AttentionSpec, EncoderOnlyAttentionSpec, KVCacheSpec, MambaSpec, UniformTypeKVCacheSpecs

__all__ = ["ViewPlan", "Backend", "plan_views", "select_common_block_size", "DEFAULT_VIEW_BLOCKS", "backend_position"]

DEFAULT_VIEW_BLOCKS = 3


@attrs.frozen
class Backend:
    """An attention backend as the geometry describes it: a name and its kernel block sizes."""

    name: str
    kernel_block_sizes: tuple

    def sizes_repr(self) -> str:
        return repr(list(self.kernel_block_sizes))


@attrs.frozen
class ViewPlan:
    """The bound KV cache view of one attention group (one backend and layer spec inside a KV
    cache group), described by its first layer's view."""

    kv_cache_group: int
    backend: str
    layers: list[str]
    spec: str
    kernel_block_size: int
    kernel_block_stride: int
    dtype: str
    shape: tuple[int, ...]  # in elements of dtype
    strides: tuple[int, ...]  # in elements of dtype
    storage_offset_bytes: int
    kernel_block_table: list[int]  # kernel block ids of manager blocks 0..2

    def to_json(self) -> dict[str, Any]:
        return {
            "kv_cache_group": self.kv_cache_group,
            "backend": self.backend,
            "layers": list(self.layers),
            "spec": self.spec,
            "kernel_block_size": self.kernel_block_size,
            "kernel_block_stride": self.kernel_block_stride,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "strides": list(self.strides),
            "storage_offset_bytes": self.storage_offset_bytes,
            "kernel_block_table": list(self.kernel_block_table),
        }


_DEFAULT_BACKEND = Backend("default", (MultipleOf(1),))


def _supported(backend: Backend, block_size: int) -> bool:
    """``_block_size_is_supported`` for one backend (utils.py:496-512)."""
    for size in backend.kernel_block_sizes:
        if isinstance(size, int):
            if block_size == size:
                return True
        elif block_size % size.base == 0:
            return True
    return False


def select_common_block_size(kv_manager_block_size: int, backends: list[Backend]) -> int:
    """``select_common_block_size`` (utils.py:515-561)."""
    if all(_supported(b, kv_manager_block_size) for b in backends):
        return kv_manager_block_size
    candidates = {
        size for b in backends for size in b.kernel_block_sizes
        if isinstance(size, int) and kv_manager_block_size % size == 0
    }
    for size in sorted(candidates, reverse=True):
        if all(_supported(b, size) for b in backends):
            return size
    raise VllmValueError(
        f"No common block size for {kv_manager_block_size} ("
        + "; ".join(f"{b.name}: {b.sizes_repr()}" for b in backends)
        + ").",
        "v1/worker/utils.py:554-561",
    )


def backend_position(layer: str, matches: list[str]) -> int | None:
    """The geometry's backend of a layer: the first ``views.backends`` entry whose ``match`` is a
    substring of its name (None: the default backend, any multiple of 1)."""
    return next((position for position, match in enumerate(matches) if match in layer), None)


def _backend_for(layer: str, backends: list[Backend], matches: list[str]) -> Backend:
    position = backend_position(layer, matches)
    return _DEFAULT_BACKEND if position is None else backends[position]


def plan_views(geometry: Geometry, plan_result, layout: KVCacheLayout) -> list[ViewPlan]:
    """Worker 0's views for ``geometry.views``; a vLLM refusal raises :class:`PlanRefusal`."""
    try:
        return _plan_views(geometry, plan_result, layout)
    except (VllmError, ZeroDivisionError) as exc:
        raise as_refusal(exc) from None


def _plan_views(geometry: Geometry, plan_result, layout: KVCacheLayout) -> list[ViewPlan]:
    views_cfg = geometry.views
    num_blocks = views_cfg.num_blocks if present(views_cfg.num_blocks) else DEFAULT_VIEW_BLOCKS
    declared = list(views_cfg.backends) if present(views_cfg.backends) else []
    backends = [Backend(b.name if present(b.name) else b.match, tuple(b.kernel_block_sizes)) for b in declared]
    matches = [b.match for b in declared]
    worker = plan_result.workers[0]
    groups: list[KVCacheGroupSpec] = worker.groups
    if not groups:
        return []
    # builder.get_kv_cache_config_from_groups(..., num_blocks) on a views.num_blocks-block pool: the
    # real pool's block count (override or memory) only scales the shapes, so num_gpu_blocks_override
    # is left out here as vLLM's own one-block probe leaves it out (kv_cache_planning.py:286-293); the
    # kernel block table is drawn for blocks 0..min(3, num_blocks)-1.
    config = get_kv_cache_config_from_groups(groups, layout, num_blocks * worker.bytes_per_block, None)
    table_rows = min(DEFAULT_VIEW_BLOCKS, num_blocks)
    num_blocks = config.num_blocks
    tensors = config.kv_cache_tensors

    # Attention groups per KV cache group: one per (backend, layer spec), in layer order
    # (gpu_model_runner.py:6657-6690).
    attn_groups: list[list[tuple[Backend, KVCacheSpec, list[str]]]] = []
    for group in groups:
        found: dict[tuple, tuple[Backend, KVCacheSpec, list[str]]] = {}
        for name in group.layer_names:
            backend = _backend_for(name, backends, matches)
            spec = per_layer_spec(group, name)
            key = (backend.name, id(backend), spec)
            if key not in found:
                found[key] = (backend, spec, [])
            found[key][2].append(name)
        attn_groups.append(list(found.values()))

    # prepare_kernel_block_sizes (utils.py:630-684)
    kernel_block_sizes: list[int] = []
    for gid, group in enumerate(groups):
        spec = group.kv_cache_spec
        if isinstance(spec, UniformTypeKVCacheSpecs):
            spec = next(iter(spec.kv_cache_specs.values()))
        if isinstance(spec, EncoderOnlyAttentionSpec):
            continue
        if not spec.has_layer_views or isinstance(spec, MambaSpec):
            kernel_block_sizes.append(spec.block_size)
        elif isinstance(spec, AttentionSpec):
            manager_bs = group.kv_cache_spec.block_size
            packed = any(
                t.block_stride > t.layer_stride for t in tensors if not set(t.layers).isdisjoint(group.layer_names)
            )
            kernel_block_sizes.append(
                manager_bs if packed else select_common_block_size(manager_bs, [b for b, _, _ in attn_groups[gid]])
            )
        else:
            raise VllmAssertionError(f"unknown kv cache spec {group.kv_cache_spec}")

    # create_metadata_builders (utils.py:284-301): a backend inside a packed group may need
    # smaller kernel blocks than the group uses.
    attn_kernel: dict[str, int | None] = {}
    attn_backend: dict[str, Backend] = {}
    for gid in range(len(groups)):
        group_kbs = kernel_block_sizes[gid] if gid < len(kernel_block_sizes) else None
        for backend, spec, names in attn_groups[gid]:
            kbs = None
            if group_kbs is not None and isinstance(spec, AttentionSpec):
                selected = select_common_block_size(group_kbs, [backend])
                if selected != spec.block_size:
                    kbs = selected
            for name in names:
                attn_kernel[name] = kbs
                attn_backend[name] = backend

    # allocate_kv_cache -> create_kv_cache_views (every tensor first) ...
    allocated: list[tuple[int, str, str | None, list[int], list[int], int, int | None]] = []
    for tensor in tensors:
        first = tensor.layers[0]
        gid = next((i for i, g in enumerate(groups) if first in g.layer_names), None)
        if gid is None:
            # A projected uniform-type group keeps every layer's spec while listing only this
            # worker's layers, so its tensor can name a layer of another worker; vLLM's next()
            # then raises StopIteration (v1/worker/utils.py:593-598).
            raise VllmStopIteration("", "v1/worker/utils.py:593-598")
        spec = per_layer_spec(groups[gid], first)
        if not spec.has_layer_views:
            continue
        kbs = kernel_block_sizes[gid] if gid < len(kernel_block_sizes) else None
        shape_bytes = layer_shape_bytes(spec, num_blocks, kbs)
        block_stride = tensor.block_stride
        ratio = shape_bytes[0] // num_blocks
        if ratio > 1:
            dense = prod(layer_shape_bytes(spec, 1)[1:])
            if block_stride != dense:
                raise VllmValueError(
                    f"The resolved KV cache layout ({layout.name}) does not store "
                    "blocks as dense, unpadded pages (block stride "
                    f"{block_stride} != page {dense}), so a manager "
                    f"block cannot be split into {ratio} kernel blocks of "
                    f"{kbs} tokens. Reduce --block-size to "
                    f"{kbs} or set VLLM_KV_CACHE_LAYOUT to a "
                    "layer-compact layout (e.g. LBNHC).",
                    "v1/kv_cache_interface.py:438-452",
                )
            if block_stride % ratio:
                raise VllmAssertionError(f"Block stride {block_stride} must divide into {ratio} equal kernel blocks.")
            block_stride //= ratio
        strides = compute_layout_strides(
            (len(tensor.layers), *shape_bytes), layout, getattr(spec, "page_size_padded", None),
            kbs is not None and kbs != spec.block_size, (tensor.layer_stride, block_stride, None, None, None),
        )
        dtype = getattr(spec, "dtype", None)
        element = dtype_size(dtype) if dtype is not None else 1
        for position, name in enumerate(tensor.layers):
            offset = tensor.offset + position * strides[0]
            shape = list(shape_bytes)
            stride = list(strides[1:])
            if element > 1:
                if stride[-1] != 1 or shape[-1] % element or any(s % element for s in stride[:-1]) or offset % element:
                    raise VllmValueError(f"cannot view the KV cache of {name} as {dtype}")
                shape[-1] //= element
                stride = [s // element for s in stride[:-1]] + [1]
                offset //= element
            allocated.append((gid, name, dtype, shape, stride, offset, kbs))

    # ... then map_kv_caches_to_kernel_blocks (utils.py:445-459), attention group by attention group
    by_layer = {entry[1]: entry for entry in allocated}
    out: list[ViewPlan] = []
    for gid, group_attn in enumerate(attn_groups):
        for backend, spec, names in group_attn:
            _, name, dtype, shape, stride, offset, kbs = by_layer[names[0]]
            element = dtype_size(dtype) if dtype is not None else 1
            attn_kbs = attn_kernel.get(name)
            kernel_block_stride = 0
            if attn_kbs is not None:
                kernel_rows = spec.get_num_kernel_states(attn_kbs)
                if shape[-2] != kernel_rows:
                    if spec.tokens_per_state <= 1 or shape[1] != 1 or stride[0] % (kernel_rows * stride[-2]):
                        raise VllmValueError(
                            f"{backend.name} needs {attn_kbs}-token "
                            f"kernel blocks, which packed {spec.block_size}-token KV cache "
                            f"blocks cannot be split into. Reduce --block-size to "
                            f"{attn_kbs} or set VLLM_KV_CACHE_LAYOUT to a "
                            "layer-compact layout (e.g. LBNHC).",
                            "v1/worker/utils.py:407-418",
                        )
                    page_stride = kernel_rows * stride[-2]
                    kernel_block_stride = stride[0] // page_stride
                    num_pages = bind_split_rows(shape[0], kernel_block_stride, shape[-2] // kernel_rows)
                    shape = [num_pages, shape[1], kernel_rows, shape[-1]]
                    stride = [page_stride, *stride[1:]]
            rows = range(table_rows)
            if attn_kbs is None:
                table = list(rows)
            else:
                per_block = kernel_blocks_per_block(spec.block_size, attn_kbs)
                table = [kernel_block_id(b, j, spec.block_size, attn_kbs, kernel_block_stride)
                         for b in rows for j in range(per_block)]
            out.append(ViewPlan(
                kv_cache_group=gid,
                backend=backend.name,
                layers=list(names),
                spec=type(spec).__name__,
                kernel_block_size=kbs if attn_kbs is None else attn_kbs,
                kernel_block_stride=kernel_block_stride,
                dtype=dtype if dtype is not None else "int8",
                shape=tuple(shape),
                strides=tuple(stride),
                storage_offset_bytes=offset * element,
                kernel_block_table=table,
            ))
    return out
