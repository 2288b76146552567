"""Shared facts about a worker record's physical layout: which group, spec, page and tensor
allocation each layer has, and the bindings over layer views and pages.

Everything here is structure (names, list positions); values stay in the rule bodies.
"""

from __future__ import annotations


import weakref

from ..models.codec import ABSENT
from .core import Instance, binding, child

__all__ = ["LayerPlace", "places", "layer_views", "layer_view_lists", "UNIFORM_GROUP"]

UNIFORM_GROUP = "UniformTypeKVCacheSpecs"


class LayerPlace:
    """Where a layer lives: its group, its spec (or None), its page, its tensor and position."""

    __slots__ = ("name", "group_index", "group", "spec", "page", "block_size", "tensor_index", "tensor", "position",
                 "path")

    def __init__(self, name, group_index, group, spec, page, block_size):
        self.name, self.group_index, self.group, self.spec = name, group_index, group, spec
        self.page, self.block_size = page, block_size
        self.tensor_index = self.tensor = self.position = None
        #: JSON path of the layer's view list
        self.path = child("$.cache.layer_tensors", name)

    @property
    def page_start(self):
        """Byte offset of the layer's page of block 0 in the backing storage."""
        return self.tensor.offset + self.position * self.tensor.layer_stride


def places(record) -> dict[str, LayerPlace]:
    """Every layer of a worker record by name (first group and first allocation win)."""
    cached = _CACHE.get(id(record))
    if cached is not None and cached[0]() is record:
        return cached[1]
    out: dict[str, LayerPlace] = {}
    for index, group in enumerate(record.cache.groups):
        specs = group.layer_specs if group.layer_specs not in (ABSENT, None) else {}
        for name in group.layer_names:
            if name in out:
                continue
            spec = specs.get(name)
            if spec is not None:
                page, block = spec.page_size_bytes, spec.block_size
            else:
                page, block = group.page_size_bytes, group.block_size_tokens
            out[name] = LayerPlace(name, index, group, spec, page, block)
    for t_index, tensor in enumerate(record.cache.tensor_allocations):
        for position, name in enumerate(tensor.layers):
            place = out.get(name)
            if place is not None and place.tensor is None:
                place.tensor_index, place.tensor, place.position = t_index, tensor, position
    _CACHE[id(record)] = (weakref.ref(record, lambda _ref, key=id(record): _CACHE.pop(key, None)), out)
    return out


#: Places per record (by identity): every layout rule asks for them, the record is immutable in use.
_CACHE: dict[int, tuple] = {}


@binding("worker")
def layer_views(record):
    """Every view of every grouped layer that has a tensor allocation, with its place."""
    num_blocks = record.cache.num_blocks
    for name, place in places(record).items():
        if place.tensor is None:
            continue
        for index, view in enumerate(record.cache.layer_tensors.get(name, ())):
            yield Instance(f"{place.path}[{index}]", (view, place, num_blocks), {"layer": name})


@binding("worker")
def layer_view_lists(record):
    """The list of views of every grouped layer that has a tensor allocation, with its place."""
    num_blocks = record.cache.num_blocks
    for name, place in places(record).items():
        if place.tensor is None:
            continue
        yield Instance(place.path, (record.cache.layer_tensors.get(name, []), place, num_blocks), {"layer": name})
