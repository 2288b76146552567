"""Shared facts about a worker record's physical layout: which group, spec, page and tensor
allocation each layer has, and the bindings over layer views and pages.

Everything here is structure (names, list positions); values stay in the rule bodies.
"""

from __future__ import annotations

from ..logic import div, is_symbolic
from ..models.codec import ABSENT
from .core import Instance, binding, child, identity_cache

__all__ = ["LayerPlace", "places", "layer_views", "layer_view_lists", "UNIFORM_GROUP"]

UNIFORM_GROUP = "UniformTypeKVCacheSpecs"


class LayerPlace:
    """Where a layer lives: its group, its spec (or None), its page, its tensor and position."""

    __slots__ = ("name", "group_index", "group", "spec", "page", "block_size", "tensor_index", "tensor", "position",
                 "path", "head_outer", "memo")

    def __init__(self, name, group_index, group, spec, page, block_size, memo):
        self.name, self.group_index, self.group, self.spec = name, group_index, group, spec
        self.page, self.block_size = page, block_size
        self.tensor_index = self.tensor = self.position = None
        #: JSON path of the layer's view list
        self.path = child("$.cache.layer_tensors", name)
        #: None for block-compact layouts, else the head-split layout's name
        self.head_outer = None
        #: Plain values the rules derive from the views of the record's places, shared by every place
        #: of one record (places are cached per record, and a record is not changed while it is
        #: checked; see ``block_ownership.view_memo``).
        self.memo = memo

    @property
    def page_start(self):
        """Byte offset of the layer's page of block 0 in the backing storage."""
        return self.tensor.offset + self.position * self.tensor.layer_stride

    # A block-compact layout (LBNHC, LBHNC, BLNHC, BLHNC) stores a block's page as one run of
    # bytes. LHBNC and BHLNC put the heads outside the layer's (layer, block) cell: a block's page
    # is one chunk per head, ``num_blocks * block_stride`` apart in LHBNC and ``len(layers) *
    # layer_stride`` apart in BHLNC (vLLM allows them only for uniform, unpadded pages:
    # kv_cache_planning.py:608-639, 706-712; kv_cache_interface.py:379-415).

    def chunks(self, num_blocks) -> list:
        """``(offset from the page start, length)`` of the runs one block of the layer owns."""
        if self.head_outer is None:
            return [(0, self.page)]
        if self.head_outer == "LHBNC":
            length, head_stride = self.tensor.block_stride, num_blocks * self.tensor.block_stride
        else:  # BHLNC
            length, head_stride = self.tensor.layer_stride, len(self.tensor.layers) * self.tensor.layer_stride
        heads = div(self.page, length)
        if is_symbolic(heads):
            raise TypeError("a head-split page's head count must be pinned in a symbolic document's shape")
        return [(h * head_stride, length) for h in range(max(heads, 1))]

    def footprint(self, num_blocks):
        """Bytes from the page start to the end of the last run one block of the layer owns."""
        if self.head_outer is None:
            return self.page
        last, length = self.chunks(num_blocks)[-1]
        return last + length


# Every layout rule asks for a record's places, and the record is immutable in use: they are
# computed once per record (by identity; dropped with the record).
@identity_cache
def places(record) -> dict[str, LayerPlace]:
    """Every layer of a worker record by name (first group and first allocation win)."""
    out: dict[str, LayerPlace] = {}
    memo: dict = {}
    for index, group in enumerate(record.cache.groups):
        specs = group.layer_specs if group.layer_specs not in (ABSENT, None) else {}
        for name in group.layer_names:
            if name in out:
                continue
            spec = specs.get(name)
            if spec is not None:
                page, block = spec.page_size_bytes, spec.block_size
            elif len({s.page_size_bytes for s in specs.values()}) == 1:
                # a layer whose spec is missing (SC007) in a group of equal pages: that page
                page, block = next(iter(specs.values())).page_size_bytes, group.block_size_tokens
            else:
                page, block = group.page_size_bytes, group.block_size_tokens
            out[name] = LayerPlace(name, index, group, spec, page, block, memo)
    layout = record.cache.kv_cache_layout
    head_outer = layout if layout in ("LHBNC", "BHLNC") else None
    for t_index, tensor in enumerate(record.cache.tensor_allocations):
        for position, name in enumerate(tensor.layers):
            place = out.get(name)
            if place is not None and place.tensor is None:
                place.tensor_index, place.tensor, place.position = t_index, tensor, position
                place.head_outer = head_outer
    return out


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
