"""Claims over runtime records."""

from __future__ import annotations

from ...logic import And
from ...rules.block_ownership import view_extent
from ...rules.layout import layer_views
from ...rules.startup_concurrency import total_blocks
from . import claim


@claim(
    id="CL003",
    text="a scheduler record every rule accepts admits one request at max_model_len",
    kind="scheduler",
    reason="SU005 refuses a pool that cannot hold one request at max_model_len besides the null block "
    "(vLLM refuses to start then: check_enough_kv_cache_memory); before SU005 this claim was refuted "
    "(docs/solver-requests.md #9)",
    by=("SU005",),
)
def admits_one_request(record):
    """The pool holds the blocks one request needs in every group at ``max_model_len``
    (``sim.demand`` through ``total_blocks``): vLLM refuses to start otherwise
    (``check_enough_kv_cache_memory``)."""
    return record.cache.num_blocks >= total_blocks(record.cache, record.resolved_config)


@claim(
    id="CL004",
    text="every layer view of an accepted worker record ends inside its backing storage",
    kind="worker",
    by=("BO001", "BO004", "BO008"),
)
def views_inside_storage(record):
    """Follows from BO001 (one storage, tensor size = storage size), BO004 (tensor region inside
    the storage) and BO008 (the view inside its page)."""
    size = record.cache.storages[0].size_bytes if record.cache.storages else 0
    checks = []
    for instance in layer_views(record):
        view, place, _num_blocks = instance.args
        checks.append(view.storage_offset_bytes + view_extent(view, place) <= size)
    return And(*checks)
