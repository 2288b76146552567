"""Bindings and predicates that several rule families share."""

from __future__ import annotations

from ..logic import And, Or, SameScalar, checking_concretely
from ..models.codec import ABSENT
from .core import Instance, binding

__all__ = ["worker_groups", "layer_specs_of", "is_mamba_group", "layer_list", "same_list", "same_value", "scheduler_worker_pairs"]


def same_list(a, b):
    """Two (possibly nested, possibly absent) lists hold the same values, element by element."""
    if checking_concretely():
        return same_value(a, b)
    if not isinstance(a, list) or not isinstance(b, list):
        return SameScalar(a, b)
    if len(a) != len(b):
        return False
    return And(*[same_list(x, y) for x, y in zip(a, b)])


def same_value(a, b) -> bool:
    """:func:`same_list` on concrete values (the checker's path): ``SameScalar`` on scalars (the
    same type and value), element by element on lists."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        return len(a) == len(b) and all(map(same_value, a, b))
    return a == b


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


def scheduler_worker_pairs(bundle):
    """(scheduler document, worker document) of a record set with the same DP rank and phase."""
    workers = bundle.of_kind("worker")
    for scheduler in bundle.of_kind("scheduler"):
        for worker in workers:
            if worker.obj.dp_rank == scheduler.obj.dp_rank and worker.obj.phase == scheduler.obj.phase:
                yield scheduler, worker
