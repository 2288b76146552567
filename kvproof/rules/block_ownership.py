"""BO: block ownership and placement in the one backing storage of a worker.

vLLM 0.33.0 allocates one int8 backing (``v1/worker/utils.py:564-627``) and places layer ``l``
block ``b`` of a ``KVCacheTensor`` at ``offset + l * layer_stride + b * block_stride``
(``v1/kv_cache_interface.py:1474-1495``); tensors of different groups alias the same bytes, which
is sound because a block ID belongs to one group at a time. The rules below check that
placement with interval and modular arithmetic only, so their cost depends on layers, tensors and
views, never on ``num_blocks``:

* a page of block ``b`` and a page of block ``b'`` overlap iff ``d + (b - b') * S`` lies in
  ``(-len_p, len_q)`` (``d`` the pages' start difference, ``S`` the shared block stride): the
  integers ``k = b - b'`` that do so form one short range computed with ``div``/``cdiv``
  (:mod:`kvproof.formulas.placement`);
* a view's per-block extent is ``item + (ratio - 1) * s_axis + sum_{i != axis} (d_i - 1) * s_i``
  (:mod:`kvproof.formulas.view_extents`).
"""

from __future__ import annotations

from ..formulas.kernel_blocks import kernel_blocks_per_block
from ..formulas.placement import pages_alias_only_same_block_of_other_groups as pages_alias
from ..formulas.placement import ranges_disjoint, ranges_intersect, region_end
from ..formulas.view_extents import concrete_axis, dense_bytes, dimensions_disjoint, view_extent as extent_of
from ..logic import And, Implies, Max, concrete, symbolic_memo
from ..models.codec import ABSENT
from .core import Instance, binding, child, rule
from .layout import layer_view_lists, layer_views, places

_PLACEMENT = "vllm/v1/kv_cache_interface.py:1474-1495 (KVCacheTensor), vllm/v1/core/kv_cache_planning.py:642-741"
_VIEWS = "vllm/v1/kv_cache_interface.py:360-482 (compute_layer_kv_cache_shape_bytes, create_kv_cache_views)"


@binding("worker")
def tensor_allocations(record):
    """Every tensor allocation with the record's storages."""
    for index, tensor in enumerate(record.cache.tensor_allocations):
        yield Instance(f"$.cache.tensor_allocations[{index}]", (tensor, record.cache.storages),
                       {"layers": ", ".join(tensor.layers)})


@rule(
    id="BO001",
    message="KV cache tensors must share one backing allocation.",
    over=tensor_allocations,
    source="vllm/v1/worker/utils.py:564-627 (allocate_kv_cache; the assertion text at :580)",
)
def one_backing_allocation(tensor, storages):
    """One storage backs every tensor, and each tensor's size is that storage's size."""
    if len(storages) != 1:
        return False
    return And(tensor.storage_id == storages[0].storage_id, tensor.size == storages[0].size_bytes)


@binding("worker")
def placed_layers(record):
    """Every layer name a group, an allocation or a view map names, with its placement counts."""
    layer_places = places(record)
    allocated: dict[str, int] = {}
    for tensor in record.cache.tensor_allocations:
        for name in tensor.layers:
            allocated[name] = allocated.get(name, 0) + 1
    viewed = record.cache.layer_tensors
    names = list(layer_places) + [n for n in allocated if n not in layer_places] + [n for n in viewed if n not in layer_places]
    seen = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        yield Instance(child("$.cache.layer_tensors", name) if name in viewed else "$.cache.tensor_allocations",
                       (name in layer_places, allocated.get(name, 0), len(viewed.get(name, ()))), {"layer": name})


@rule(
    id="BO002",
    message="layer placement is missing, duplicated or unknown: {layer}",
    over=placed_layers,
    source=_PLACEMENT + " (every grouped layer in exactly one tensor; views for every layer)",
)
def layer_placed_once(grouped, allocations, views):
    """A layer of a cache group lies in exactly one tensor allocation and has views; an
    allocation or a view names only grouped layers."""
    return grouped and allocations == 1 and views > 0


@binding("worker")
def tensors_with_pages(record):
    """Every tensor allocation with its layers' runs per block (a page, or an LHBNC page's head
    chunks), their footprints, and the pool's block count."""
    layer_places = places(record)
    num_blocks = record.cache.num_blocks
    for index, tensor in enumerate(record.cache.tensor_allocations):
        placed = [layer_places[name] for name in tensor.layers if name in layer_places]
        if placed:
            runs = [length for place in placed for _, length in place.chunks(num_blocks)]
            footprints = [place.footprint(num_blocks) for place in placed]
            yield Instance(f"$.cache.tensor_allocations[{index}]", (tensor, runs, footprints, num_blocks),
                           {"layers": ", ".join(tensor.layers)})


@rule(
    id="BO003",
    message="tensor allocation page exceeds its block stride: {layers}",
    over=tensors_with_pages,
    field="block_stride",
    after=("BO001", "BO002"),
    source=_PLACEMENT + "; vllm/v1/core/kv_cache_planning.py:574-605 (bytes per block covers every page)",
)
def page_fits_block_stride(tensor, runs, footprints, num_blocks):
    """One block of a layer is a page (an LHBNC page: one chunk per head); consecutive blocks are a
    block stride apart."""
    return Max(*runs) <= tensor.block_stride


def tensor_end(tensor, footprints, num_blocks):
    """One past the last byte of the tensor's last layer's page of the last block."""
    return region_end(tensor.offset, len(tensor.layers), tensor.layer_stride, num_blocks, tensor.block_stride, footprints)


@rule(
    id="BO004",
    message="tensor allocation region exceeds its backing storage: {layers}",
    over=tensors_with_pages,
    after=("BO001", "BO002", "BO003"),
    source=_PLACEMENT,
)
def region_inside_storage(tensor, runs, footprints, num_blocks):
    """``offset + (len(layers) - 1) * layer_stride + (num_blocks - 1) * block_stride + page <=
    size``, the page being the largest page of the tensor's layers (an LHBNC page: up to the end
    of its last head chunk)."""
    return And(num_blocks > 0, tensor_end(tensor, footprints, num_blocks) <= tensor.size)


LAYER_OUTER = ("LBNHC", "LBHNC", "LHBNC")
BLOCK_OUTER = ("BLNHC", "BLHNC")


@binding("worker")
def tensors_with_layout(record):
    """Every tensor allocation with the record's layout, its first layer's spec and block count."""
    layout = record.cache.kv_cache_layout
    if layout in (ABSENT, None):
        return
    layer_places = places(record)
    for index, tensor in enumerate(record.cache.tensor_allocations):
        placed = [layer_places[name] for name in tensor.layers if name in layer_places]
        if placed:
            yield Instance(f"$.cache.tensor_allocations[{index}]", (tensor, placed[0], layout, record.cache.num_blocks),
                           {"layers": ", ".join(tensor.layers), "layout": layout})


@rule(
    id="BO010",
    message="tensor strides contradict the KV cache layout {layout}: {layers}",
    over=tensors_with_layout,
    after=("BO001", "BO002", "BO003"),
    source="vllm/v1/kv_cache_interface.py:379-415 (compute_layout_strides), "
    "vllm/v1/core/kv_cache_planning.py:642-741",
)
def strides_follow_layout(tensor, place, layout, num_blocks):
    """A layer-outermost layout (LBNHC, LBHNC, LHBNC) puts a layer's blocks inside its layer
    stride; a block-outermost compact layout (BLNHC, BLHNC) puts a tensor's layers inside one
    block stride; LHBNC and BHLNC cut a page into one chunk per head (the block stride, resp. the
    layer stride, is the page over the spec's head count)."""
    many = len(tensor.layers) > 1
    checks = []
    if layout in LAYER_OUTER and many:
        checks.append(tensor.layer_stride >= num_blocks * tensor.block_stride)
    if layout in BLOCK_OUTER and many:
        checks.append(tensor.offset + len(tensor.layers) * tensor.layer_stride <= tensor.block_stride)
    spec = place.spec
    if layout in ("LHBNC", "BHLNC") and spec is not None and spec.num_kv_heads not in (ABSENT, None):
        heads = spec.num_head_slots if spec.num_head_slots not in (ABSENT, None) else spec.num_kv_heads
        chunk = tensor.block_stride if layout == "LHBNC" else tensor.layer_stride
        checks.append(chunk * heads == place.page)
    return And(*checks)


@binding("worker")
def tensor_pairs(record):
    """Every pair of tensor allocations, with their pages."""
    with_pages = list(tensors_with_pages(record))
    for i, first in enumerate(with_pages):
        for second in with_pages[i + 1:]:
            yield Instance(first.subject, (first.args[0], first.args[2], second.args[0], second.args[2], first.args[3]),
                           {"layers": first.names["layers"], "other": second.names["layers"]})


@rule(
    id="BO005",
    message="intersecting tensor allocations have different block strides: {layers} and {other}",
    over=tensor_pairs,
    field="block_stride",
    after=("BO001", "BO002", "BO003", "BO004"),
    source=_PLACEMENT + " (tensors of one placement share the block stride)",
)
def intersecting_tensors_share_stride(tensor, footprints, other, other_footprints, num_blocks):
    """Two tensors whose byte regions intersect use one block stride."""
    start, end = tensor.offset, tensor_end(tensor, footprints, num_blocks)
    other_start, other_end = other.offset, tensor_end(other, other_footprints, num_blocks)
    return Implies(ranges_intersect(start, end, other_start, other_end), tensor.block_stride == other.block_stride)


class _Page:
    __slots__ = ("name", "group", "start", "length", "stride", "subject")

    def __init__(self, name, group, start, length, stride, subject):
        self.name, self.group, self.start, self.length, self.stride, self.subject = name, group, start, length, stride, subject


def _pages(record) -> list[_Page]:
    """Every run of bytes one block of a layer owns (one page, or one chunk per LHBNC head)."""
    out = []
    num_blocks = record.cache.num_blocks
    for name, place in places(record).items():
        if place.tensor is not None:
            start, stride = place.page_start, place.tensor.block_stride
            subject = f"$.cache.tensor_allocations[{place.tensor_index}]"
            for offset, length in place.chunks(num_blocks):
                out.append(_Page(name, place.group_index, start + offset, length, stride, subject))
    return out


def _candidate_pairs(pages: list[_Page]):
    """Pairs of pages whose byte ranges within a block stride can intersect.

    On a concrete record, pages whose positions modulo the block stride are disjoint can never
    share a byte, so they are skipped (a sweep over sorted residues, not all pairs); pages of
    different strides are left to BO005. On a symbolic record every pair is a candidate.
    """
    if not all(concrete(p.start, p.length, p.stride) for p in pages):
        for i, first in enumerate(pages):
            for second in pages[i + 1:]:
                yield first, second
        return
    by_stride: dict[int, list[_Page]] = {}
    for page in pages:
        if page.stride > 0:
            by_stride.setdefault(page.stride, []).append(page)
    for stride, members in by_stride.items():
        intervals = []
        for index, page in enumerate(members):
            residue = page.start % stride
            end = residue + page.length
            intervals.append((residue, end, index))
            if end > stride:  # wraps into the next block stride
                intervals.append((residue - stride, end - stride, index))
        # by start and end; equal ranges in page order (a page's two ranges never tie)
        intervals.sort()
        active: list[tuple[int, int]] = []
        seen: set[tuple[int, int]] = set()
        for start, end, index in intervals:
            active = [(e, i) for e, i in active if e > start]
            for _end, other in active:
                if other == index:
                    continue
                pair = (other, index) if other < index else (index, other)
                if pair not in seen:
                    seen.add(pair)
                    yield members[pair[0]], members[pair[1]]
            active.append((end, index))


@binding("worker")
def page_pairs(record):
    """Pairs of layer pages that may share bytes (see ``_candidate_pairs``)."""
    num_blocks = record.cache.num_blocks
    for first, second in _candidate_pairs(_pages(record)):
        yield Instance(first.subject, (first.start, first.length, second.start, second.length, first.stride,
                                       second.stride, first.group != second.group, num_blocks),
                       {"layer": first.name, "other": second.name})


@rule(
    id="BO006",
    message="pages of {layer} and {other} overlap, but only the same block of different groups may share bytes",
    over=page_pairs,
    after=("BO001", "BO002", "BO003", "BO004", "BO005"),
    source=_PLACEMENT + " (a block ID belongs to one group at a time; v1/core/block_pool.py)",
)
def pages_alias_only_same_block_of_other_groups(start, length, other_start, other_length, stride, other_stride,
                                                different_groups, num_blocks):
    """Pages ``p`` (block ``b``) and ``q`` (block ``b'``) overlap iff ``d + k * S`` lies in
    ``(-len_p, len_q)`` with ``d = start_p - start_q`` and ``k = b - b'`` in ``[1 - N, N - 1]``.
    No ``k != 0`` may do so, and ``k == 0`` only for pages of different groups."""
    return pages_alias(start, length, other_start, other_length, stride, other_stride, different_groups, num_blocks)


def ratio_of(view, place):
    """Kernel blocks per manager block of the view."""
    block, kernel = place.block_size, view.kernel_block_size_tokens
    if type(block) is int and type(kernel) is int:  # the checker's path
        return kernel_blocks_per_block(block, kernel)
    return symbolic_memo(kernel_blocks_per_block, block, kernel)


def view_memo(name, view, place, compute):
    """``compute(element size, shape, strides, block axis, ratio)`` of a view, remembered per
    record for plain values: the layers of a group share a handful of view shapes (the GLM worker's
    169 views have five), and BO007, BO008 and BO009 each ask. Each view's content key is kept by
    its id (with the view, so the id stays its own). A view whose values may be symbolic is
    remembered by its terms (:func:`~kvproof.logic.symbolic_memo`)."""
    memo = place.memo
    seen = memo.get(id(view))
    if seen is None or seen[0] is not view:
        ratio = ratio_of(view, place)
        values = (view.element_size_bytes, view.block_axis, ratio)
        plain = concrete(*values, *view.shape, *view.stride_bytes)
        seen = memo[id(view)] = (view, (*values, tuple(view.shape), tuple(view.stride_bytes)) if plain else None)
    content = seen[1]
    if content is None:  # symbolic: remembered by its terms for the process (a mutation shares its base's)
        return symbolic_memo(compute, view.element_size_bytes, tuple(view.shape), tuple(view.stride_bytes),
                             concrete_axis(view.block_axis), ratio_of(view, place))
    key = (name, content)
    known = memo.get(key)
    if known is None:
        element, axis, ratio, shape, strides = content
        known = memo[key] = compute(element, shape, strides, axis, ratio)
    return known


def view_extent(view, place):
    """Bytes one manager block of the view spans, from its first byte."""
    return view_memo("extent", view, place, extent_of)


@rule(
    id="BO007",
    message="layer view dimensions overlap: {layer}",
    over=layer_views,
    after=("VC001", "VC002", "VC003", "VC004"),
    source=_VIEWS,
)
def view_dimensions_disjoint(view, place, num_blocks):
    """Within one manager block, element index vectors map to distinct bytes: taking the
    non-block dimensions from the smallest stride up, each stride clears the span of those before
    it, and the kernel rows of a split block clear one row."""
    if len(view.shape) != len(view.stride_bytes):
        return False
    return view_memo("disjoint", view, place, dimensions_disjoint)


@rule(
    id="BO008",
    message="layer view exceeds its page: {layer}",
    over=layer_views,
    field="storage_offset_bytes",
    after=("BO001", "BO002", "BO003", "BO004", "VC001", "VC002", "VC003", "VC004", "BO007"),
    source=_VIEWS + "; " + _PLACEMENT,
)
def view_inside_page(view, place, num_blocks):
    """A view lies in its layer's page: it starts in the page of block 0 of its tensor, and one
    manager block of it ends inside that page."""
    offset = view.storage_offset_bytes - place.page_start
    return And(view.storage_id == place.tensor.storage_id, offset >= 0,
               offset + view_extent(view, place) <= place.footprint(num_blocks))


@rule(
    id="BO009",
    message="views of one layer overlap: {layer}",
    over=layer_view_lists,
    after=("BO007", "BO008"),
    source=_VIEWS,
)
def views_of_a_layer_disjoint(views, place, num_blocks):
    """The views of one layer (a Mamba layer's state tensors) occupy disjoint bytes of its page."""
    if len(views) < 2:
        return True  # no pair
    starts = [view.storage_offset_bytes for view in views]
    return ranges_disjoint(starts, [start + view_extent(view, place) for start, view in zip(starts, views)])


@rule(
    id="VC007",
    message="dense bytes of the views of {layer} exceed its spec page",
    over=layer_view_lists,
    after=("BO007", "BO008", "BO009"),
    expect="dead",
    reason="killed by the view-extent rules: BO007 (no overlapping dimensions, so dense bytes <= extent), BO008 "
    "(each extent inside the page) and BO009 (the extents of one layer are disjoint); seed 001 removed this refusal "
    "after a proof and a 400,000-input fuzz run",
    source=_VIEWS,
)
def dense_bytes_fit_page(views, place, num_blocks):
    """The elements of one manager block of all views of a layer fit in its page."""
    dense = 0
    for view in views:
        dense = dense + view_memo("dense", view, place, _dense_bytes)
    return dense <= place.page


def _dense_bytes(element_size, shape, strides, axis, ratio):
    return dense_bytes(element_size, shape, axis, ratio)
