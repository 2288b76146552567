"""Bindings, names and predicates that several rule families share (a family module imports
these, the arithmetic of :mod:`kvproof.formulas` and its own helpers, never another family's)."""

from __future__ import annotations

from ..formulas.pool import bytes_per_block_of_backing
from ..logic import And, Or, SameScalar, Sum
from ..models.codec import ABSENT
from .core import Instance, binding

__all__ = [
    "worker_groups", "layer_specs_of", "is_mamba_group", "layer_list", "same_list", "scheduler_worker_pairs",
    "scheduler_name", "worker_name", "pool_block_bytes",
]


def same_list(a, b):
    """Two (possibly nested, possibly absent) lists hold the same values, element by element
    (``SameScalar`` on scalars: the same type and value)."""
    if not isinstance(a, list) or not isinstance(b, list):
        return SameScalar(a, b)
    if len(a) != len(b):
        return False
    return And(*[same_list(x, y) for x, y in zip(a, b)])


def layer_list(names) -> str:
    """How a message names the layers of a group."""
    return ", ".join(names)


def layer_specs_of(group) -> list:
    """The layer specs of a worker group in layer order (empty without hybrid evidence)."""
    specs = group.layer_specs
    if specs is ABSENT or specs is None:
        return []
    return [specs[name] for name in group.layer_names if name in specs]


def is_mamba_group(group):
    """The group holds Mamba (incl. KDA/GDN) state: its spec or one of its layer specs is a MambaSpec."""
    return Or(group.spec_type == "MambaSpec", *[spec.spec_type == "MambaSpec" for spec in layer_specs_of(group)])


@binding("worker")
def worker_groups(record):
    """Every cache group of a worker record."""
    for index, group in enumerate(record.cache.groups):
        yield Instance(f"$.cache.groups[{index}]", (group,), {"layers": layer_list(group.layer_names)})


def scheduler_name(record) -> str:
    """How a message names a scheduler record."""
    phase = record.phase if record.phase not in (ABSENT, None) else None
    return f"{phase + ' ' if phase else ''}scheduler dp{record.dp_rank}"


def worker_name(record) -> str:
    """How a message names a worker record."""
    phase = record.phase if record.phase not in (ABSENT, None) else None
    return f"{phase + ' ' if phase else ''}worker dp{record.dp_rank} tp{record.tp_rank} pp{record.pp_rank}"


def pool_block_bytes(cache):
    """``allocated_cache_bytes // num_blocks``: the bytes one block ID costs on a worker."""
    return bytes_per_block_of_backing(Sum(*[storage.size_bytes for storage in cache.storages]), cache.num_blocks)


def scheduler_worker_pairs(bundle):
    """(scheduler document, worker document) of a record set with the same DP rank and phase."""
    workers = bundle.of_kind("worker")
    for scheduler in bundle.of_kind("scheduler"):
        for worker in workers:
            if worker.obj.dp_rank == scheduler.obj.dp_rank and worker.obj.phase == scheduler.obj.phase:
                yield scheduler, worker
