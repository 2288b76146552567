"""The importer model (kvproof.fuzz.importer) and the record-set / profile strategies."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from kvproof.fuzz.explained import known_synth_refusal
from kvproof.fuzz.importer import profile_of, record_sets
from kvproof.models.codec import dumps, unstructure
from kvproof.models.documents import load_bytes, load_path
from kvproof.rules.check import check

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "glm53flash-tp4"


def test_glm_example_profile_is_the_importers_profile_of_its_records() -> None:
    workers = [load_path(p).obj for p in sorted(EXAMPLE.glob("worker-*.json"))]
    scheduler = load_path(EXAMPLE / "scheduler-dp0.json").obj
    mine = unstructure(profile_of(scheduler, workers))["resources"]
    shipped = json.loads((EXAMPLE / "profile.json").read_text())["resources"]
    assert mine["cache_groups"] == shipped["cache_groups"]
    for key in ("kv_cache_bytes", "max_model_len", "enable_prefix_caching", "mamba_cache_mode", "hash_block_size_tokens"):
        assert mine["runtime_memory"][key] == shipped["runtime_memory"][key], key
    # seed 001: 13,696 usable blocks of 13,516,800 bytes
    assert mine["runtime_memory"]["kv_cache_bytes"] == 13696 * 13516800


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(record_sets())
def test_every_imported_profile_is_accepted(synthesized) -> None:
    try:
        profile = profile_of(synthesized.scheduler, synthesized.workers)
    except ValueError:  # pool blocks that differ across stages (RS010)
        return
    document = load_bytes(dumps(unstructure(profile)), "synth/profile.json")
    diagnostics = check([document])
    chunked = any((g.spec.spec_type if g.spec else g.spec_type) == "ChunkedLocalAttentionSpec"
                  for g in synthesized.scheduler.cache.groups)
    dcp = max(w.resolved_config.decode_context_parallel_size or 1 for w in synthesized.workers)
    if (chunked or dcp > 1) and {d.rule for d in diagnostics} == {"CA001"}:
        # a profile has no chunk or DCP field: a chunked-local group reads as full attention and
        # a DCP rank as holding the whole context, which can need more than vLLM's pool holds;
        # the import gate refuses it (docs/import.md, "What a profile cannot say")
        return
    assert diagnostics == [], [d.render() for d in diagnostics]


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(record_sets())
def test_every_record_set_from_the_strategy_is_accepted(synthesized) -> None:
    records = [load_bytes(dumps(unstructure(rec)), f"synth/{name}") for name, rec in synthesized.files()]
    diagnostics = check(records)
    if diagnostics and known_synth_refusal({d.rule for d in diagnostics}, synthesized.plan):
        return
    assert diagnostics == [], [d.render() for d in diagnostics[:5]]
