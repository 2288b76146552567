"""Hypothesis strategies over record sets and the profiles ``kvproof import`` writes for them.

:func:`profile_of` is the product importer's (:mod:`kvproof.importer`, docs/import.md).

Strategies (public):

* :func:`record_sets`: what vLLM 0.33.0 would write for a generated geometry
  (:func:`kvproof.fuzz.strategies.geometries`, planned by :mod:`kvproof.sim` and written by
  :func:`kvproof.sim.synth.synthesize`); geometries vLLM refuses are skipped.
* :func:`profiles`: the importer's profile of such a record set.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from ..importer import profile_of as imported
from ..models import record as r
from ..models.geometry import load_geometry
from ..models.profile import Profile
from ..rules.record_sets import pool_block_bytes
from ..sim import PlanRefusal
from ..sim.synth import synthesize
from .strategies import geometries

__all__ = ["profile_of", "record_sets", "profiles"]

def profile_of(scheduler: r.SchedulerRecord, workers: list[r.WorkerRecord], *, model: str = "kvproof/synthesized") -> Profile:
    """The product importer's profile (:func:`kvproof.importer.profile_of`) of one scheduler and
    its workers; ``ValueError`` where the import gate refuses pool blocks that differ across
    ranks (RS010)."""
    if len({pool_block_bytes(worker.cache) for worker in workers}) != 1:
        raise ValueError("RS010: the workers' pool blocks differ")
    return imported(scheduler, workers, model=model)


@st.composite
def record_sets(draw, **geometry_options: Any):
    """A :class:`kvproof.sim.synth.SynthesizedRecords` for a geometry vLLM 0.33.0 starts with."""
    document = draw(geometries(**geometry_options))
    try:
        return synthesize(load_geometry(json.dumps(document)))
    except PlanRefusal:
        assume(False)


@st.composite
def profiles(draw, **geometry_options: Any):
    """The importer's :class:`kvproof.models.profile.Profile` of a generated record set."""
    synthesized = draw(record_sets(**geometry_options))
    try:
        return profile_of(synthesized.scheduler, synthesized.workers)
    except ValueError:  # pool blocks that differ across stages: the import gate refuses them (RS010)
        assume(False)
