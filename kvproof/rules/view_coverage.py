"""VC: the kernel-block views of a worker's layers cover exactly the pool's blocks.

vLLM 0.33.0 views each layer's slice of the backing storage in kernel blocks
(``v1/worker/utils.py:397-430``, ``v1/kv_cache_interface.py:360-482``): with an
allocation-time split (``kernel_block_stride == 0``) a manager block is ``ratio = block_size //
kernel_block`` consecutive kernel rows and the view holds ``num_blocks * ratio`` of them; with a
bind-time split of a packed cache (``kernel_block_stride > 0``) kernel block ``j`` of manager block
``b`` is row ``b * kernel_block_stride + j`` and the view holds ``(num_blocks - 1) *
kernel_block_stride + ratio`` rows, of stride ``stride(0) // kernel_block_stride``.
"""

from __future__ import annotations

from ..formulas.dtypes import element_bytes
from ..formulas.kernel_blocks import kernel_block_fits, kernel_blocks_on_axis, kernel_rows_per_block
from ..formulas.select import select
from ..logic import And, Or, OrDefault
from ..models.codec import ABSENT, present
from .core import Instance, binding, rule
from .layout import layer_view_lists, layer_views, places

_VIEWS = "vllm/v1/worker/utils.py:397-430 (map_kv_cache_to_kernel_blocks), vllm/v1/kv_cache_interface.py:418-482"


def spec_type_of(place):
    return place.spec.spec_type if place.spec is not None else place.group.spec_type


_STATE_SPECS = frozenset({"MambaSpec", "CircularBufferSpec"})


def is_state_spec(place):
    """The layer's spec is a Mamba or ring spec (a loaded class name is looked up)."""
    kind = place.spec.spec_type if place.spec is not None else place.group.spec_type
    if type(kind) is str:
        return kind in _STATE_SPECS
    return Or(kind == "MambaSpec", kind == "CircularBufferSpec")


@rule(
    id="VC001",
    message="layer view kernel block contradicts its cache spec: {layer}",
    over=layer_views,
    field="kernel_block_size_tokens",
    source="vllm/v1/kv_cache_interface.py:360-376 (kernel block must divide the block), "
    "vllm/v1/worker/utils.py:630-684 (Mamba and ring layers use the spec's block)",
)
def kernel_block_divides_block(view, place, num_blocks):
    """A kernel block is a positive divisor of the spec's block; a Mamba or ring layer's kernel
    block is its block."""
    return kernel_block_fits(place.block_size, view.kernel_block_size_tokens, is_state_spec(place))


@binding("worker")
def kernel_block_strides(record):
    """Every kernel block stride of a worker: per view and per attention group."""
    for instance in layer_views(record):
        yield Instance(instance.subject, (instance.args[0].kernel_block_stride,), instance.names,
                       blame=f"{instance.subject}.kernel_block_stride")
    groups = record.cache.attention_groups
    if groups not in (ABSENT, None):
        for index, group in enumerate(groups):
            subject = f"$.cache.attention_groups[{index}]"
            yield Instance(subject, (group.kernel_block_stride,), {"layer": ", ".join(group.layer_names)},
                           blame=f"{subject}.kernel_block_stride")


@rule(
    id="VC002",
    message="kernel block stride must not be negative: {layer}",
    over=kernel_block_strides,
    source="vllm/v1/worker/utils.py:397-430 (kernel_block_stride = stride(0) // page_stride >= 0)",
)
def kernel_block_stride_not_negative(stride):
    """0 marks an allocation-time split; a bind-time split has a positive stride."""
    return stride >= 0


@rule(
    id="VC003",
    message="kernel tensor block coverage contradicts pool block geometry",
    over=layer_views,
    field="shape",
    after=("VC001", "VC002"),
    source=_VIEWS,
)
def kernel_blocks_cover_pool(view, place, num_blocks):
    """Stride 0: ``num_blocks * ratio`` kernel rows; positive stride: ``(num_blocks - 1) *
    kernel_block_stride + ratio`` rows, on the block axis."""
    axis = view.block_axis
    expected = kernel_blocks_on_axis(num_blocks, place.block_size, view.kernel_block_size_tokens, view.kernel_block_stride)
    return And(axis >= 0, axis < len(view.shape), select(view.shape, axis) == expected)


@rule(
    id="VC004",
    message="layer view block stride contradicts its tensor allocation: {layer}",
    over=layer_views,
    field="stride_bytes",
    after=("VC001", "VC002", "VC003"),
    source=_VIEWS + " (view block stride = block_stride / ratio; packed: stride(0) // kernel_block_stride)",
)
def view_block_stride_matches_allocation(view, place, num_blocks):
    """One manager block of the allocation spans ``ratio`` kernel rows (stride 0) or
    ``kernel_block_stride`` page strides (bind-time split): the view's block-axis stride times
    that count is the allocation's block stride."""
    per_block = kernel_rows_per_block(place.block_size, view.kernel_block_size_tokens, view.kernel_block_stride)
    return select(view.stride_bytes, view.block_axis) * per_block == place.tensor.block_stride


@binding("worker")
def views_with_attention_groups(record):
    """Every view of a layer that an ``attention_groups`` entry lists, with those entries."""
    groups = record.cache.attention_groups
    if groups in (ABSENT, None):
        return
    listed: dict[str, list] = {}
    for group in groups:
        for name in group.layer_names:
            listed.setdefault(name, []).append(group)
    layer_places = places(record)
    for instance in layer_views(record):
        entries = listed.get(instance.names["layer"], [])
        place = layer_places[instance.names["layer"]]
        yield Instance(instance.subject, (instance.args[0], entries, place.group_index, place.block_size), instance.names)


@rule(
    id="VC005",
    message="layer view kernel blocks contradict its attention group: {layer}",
    over=views_with_attention_groups,
    after=("VC001", "VC002"),
    source="vllm/v1/worker/utils.py:261-274 (AttentionGroup.kernel_block_size, None when it is the spec's block; "
    "kernel_block_stride), " + _VIEWS,
)
def view_matches_attention_group(view, entries, group_index, block_size):
    """Each attention group that binds the layer uses the view's kernel block and kernel block
    stride, and belongs to the layer's cache group; a layer no attention group binds is refused
    when the record lists attention groups."""
    if not entries:
        return False
    return And(*[check for entry in entries for check in (
        OrDefault(entry.kernel_block_size, block_size) == view.kernel_block_size_tokens,
        entry.kernel_block_stride == view.kernel_block_stride,
        entry.kv_cache_group_id == group_index)])


@rule(
    id="VC006",
    message="mamba layer views contradict its state shapes: {layer}",
    over=layer_view_lists,
    after=("VC001", "VC002", "VC003"),
    source="vllm/v1/kv_cache_interface.py:360-376 (Mamba view (B, *shape) per state), "
    "vllm/model_executor/layers/mamba/abstract.py:72-91",
)
def mamba_views_match_state_shapes(views, place, num_blocks):
    """A Mamba layer has one view per state tensor, in order: shape ``[num_blocks, *shape_i]``
    with the state dtype's element size, block axis 0, no kernel block stride."""
    spec = place.spec
    if spec is None or spec.spec_type != "MambaSpec":
        return True
    shapes, dtypes = spec.shapes, spec.dtypes
    if shapes in (ABSENT, None) or dtypes in (ABSENT, None) or len(views) != len(shapes) or len(dtypes) != len(shapes):
        return False
    checks = []
    for view, shape, dtype in zip(views, shapes, dtypes):
        if len(view.shape) != len(shape) + 1:
            return False
        checks += [view.shape[0] == num_blocks, *[a == b for a, b in zip(view.shape[1:], shape)],
                   view.element_size_bytes == element_bytes(dtype), view.block_axis == 0, view.kernel_block_stride == 0]
    return And(*checks)



@binding("worker")
def attention_group_layers(record):
    """Every ``attention_groups`` entry, with the layers the entries before it list."""
    groups = record.cache.attention_groups
    if not present(groups):
        return
    earlier: set[str] = set()
    for index, group in enumerate(groups):
        names = list(group.layer_names)
        repeated = sorted({name for name in names if name in earlier or names.count(name) > 1})
        yield Instance(f"$.cache.attention_groups[{index}]", (names, frozenset(earlier)),
                       {"layers": ", ".join(repeated)})
        earlier.update(names)


@rule(
    id="VC008",
    message="layers are bound by more than one attention group: {layers}",
    over=attention_group_layers,
    field="layer_names",
    source="vllm/v1/worker/gpu_model_runner.py:6648-6720 (get_attn_backends_for_group: each layer of a KV cache "
    "group under one (backend, spec, num_heads_q) key; create_attn_groups: one AttentionGroup per key)",
)
def layers_bound_once(names, earlier):
    """The model runner partitions each KV cache group's layers among its attention groups, so a
    layer is in exactly one entry, once (a duplicated entry repeats its layers)."""
    return len(set(names)) == len(names) and not (set(names) & earlier)


@binding("worker")
def model_runner_kernel_blocks(record):
    """The model runner's kernel block sizes with the cache groups."""
    runner = record.cache.model_runner
    if not present(runner):
        return
    yield Instance("$.cache.model_runner.kernel_block_sizes",
                   (list(runner.kernel_block_sizes), record.cache.groups, record.cache.tensor_allocations))


@rule(
    id="VC009",
    message="model runner kernel block sizes contradict the cache groups",
    over=model_runner_kernel_blocks,
    source="vllm/v1/worker/utils.py:630-684 (prepare_kernel_block_sizes: one size per cache group; the block "
    "size for specs without layer views, for Mamba and for block-outermost packing, a divisor of it otherwise)",
)
def kernel_block_sizes_match_groups(sizes, groups, tensors):
    """One positive kernel block per group that divides the group's block size, and is the block
    size itself for a state group (Mamba, ring: no splitting) and for a group packed block-outermost
    (a tensor holding its layers has ``block_stride > layer_stride``: never split group-wide)."""
    if len(sizes) != len(groups):
        return False
    checks = []
    for size, group in zip(sizes, groups):
        names = set(group.layer_names)
        packed = Or(*[t.block_stride > t.layer_stride for t in tensors if names & set(t.layers)])
        unsplit = Or(group.kind == "state", group.spec_type == "MambaSpec", group.spec_type == "CircularBufferSpec", packed)
        checks.append(kernel_block_fits(group.block_size_tokens, size, unsplit))
    return And(*checks)
