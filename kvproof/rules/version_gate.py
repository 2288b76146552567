"""VG: hybrid cache evidence is trusted only from exactly vLLM 0.33.0.

The hybrid keys (layer specs, state evidence, kernel-block views) describe vLLM 0.33.0's planning
(``v1/core/kv_cache_planning.py``); another release plans differently (0.31.0 had other
checkpoint and block rules), so a record with that evidence from another version is refused. A
plain record, whose groups hold no layer specs, imports for every version.
"""

from __future__ import annotations

from ..models.codec import ABSENT
from .core import Instance, binding, rule

HYBRID_EVIDENCE_VERSION = "0.33.0"


def has_hybrid_evidence(record) -> bool:
    """A cache group holds layer specs (a worker's ``layer_specs``, a scheduler's ``spec``)."""
    for group in record.cache.groups:
        specs = group.layer_specs if record.kind == "worker" else group.spec
        if specs is not ABSENT and specs is not None:
            return True
    return False


@binding("worker", "scheduler")
def hybrid_records(record):
    """A record that holds hybrid evidence (presence of the evidence is the document's shape)."""
    if has_hybrid_evidence(record):
        yield Instance("$.runtime", (record.runtime,), {"version": record.runtime.version})


@rule(
    id="VG001",
    message="hybrid cache evidence requires vLLM 0.33.0; the record names vLLM {version}",
    over=hybrid_records,
    field="version",
    source="vllm/v1/core/kv_cache_planning.py:1607-1657 (0.33.0 planning; the evidence describes it)",
)
def hybrid_evidence_from_0_33_0(runtime):
    """Exactly "0.33.0": 0.33.0.post1, 0.33.1, 0.33 and 0.34.0 are other releases."""
    return runtime.version == HYBRID_EVIDENCE_VERSION
