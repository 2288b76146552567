"""Issue 15's acceptance over the conformance geometries: for every record set that ``kvproof synth``
writes from them, ``import`` then ``check`` accepts, and every single-field edit of the imported
profile that changes a value the importer derives is refused next to its records.

The edits are the mutation campaign's (kvproof/fuzz/mutate.py). By default a seeded sample of each
profile's derived-value edits runs; KVPROOF_SLOW=1 runs every one.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from kvproof.diagnostics import InputError
from kvproof.fuzz.mutate import apply, document_class, edits
from kvproof.importer import Phase, run_import
from kvproof.models.codec import dumps, unstructure
from kvproof.models.documents import load_bytes, load_tree
from kvproof.models.geometry import load_geometry
from kvproof.rules.check import check
from kvproof.sim import PlanRefusal
from kvproof.sim.synth import synthesize

GEOMETRIES = Path(__file__).resolve().parents[1] / "conformance" / "geometries"
CASES = sorted(p for p in GEOMETRIES.glob("*.json") if not p.name.endswith(".expected.json"))
SLOW = os.environ.get("KVPROOF_SLOW") == "1"
SAMPLE = 10

#: The (class, field) pairs the importer derives from the records (docs/import.md's table); the
#: utilization only where a record states it (else it is vLLM's default, said so in provenance).
DERIVED = {
    ("Resources", name) for name in ("cache_layout", "max_num_tokens", "max_batch_size", "cache_groups", "runtime_memory")
} | {
    ("CacheGroup", name) for name in ("name", "kind", "num_layers", "block_size_tokens", "page_size_bytes",
                                      "sliding_window", "blocks_per_request", "prefill_checkpoint_blocks",
                                      "prefill_checkpoint_alignment")
} | {
    ("RuntimeMemory", name) for name in ("kv_cache_bytes", "max_model_len", "enable_prefix_caching", "mamba_cache_mode",
                                         "hash_block_size_tokens")
}


def _imported(geometry: Path):
    """(records, profile tree) of the geometry's synthesized record set, or None when vLLM
    refuses to start it, kvproof synth writes none for it or a known finding refuses them."""
    from kvproof.commands.synth import split_ring

    loaded = load_geometry(geometry.read_text(), str(geometry))
    try:
        records = synthesize(loaded)
    except PlanRefusal:
        return None
    if split_ring(loaded, records):
        return None  # kvproof synth writes no records for it
    documents = tuple(load_bytes(dumps(unstructure(record)), f"phase/{name}") for name, record in records.files())
    result = run_import([Phase("phase", documents, ())], model="kvproof/synthesized")
    if result.diagnostics:
        from kvproof.fuzz.explained import known_synth_refusal

        assert known_synth_refusal({d.rule for d in result.diagnostics}, records.plan), \
            [d.render() for d in result.diagnostics]
        return None
    return list(documents), json.loads(result.text)


def _derived_edits(profile: dict, seed: str) -> list:
    out = []
    original = dumps(profile)
    for edit in edits("phase/profile.json", document_class("profile"), profile):
        if (edit.site.owner, edit.site.field) in DERIVED and dumps(apply(profile, edit)) != original:
            out.append(edit)
    if not SLOW and len(out) > SAMPLE:
        out = [out[i] for i in sorted(random.Random(seed).sample(range(len(out)), SAMPLE))]
    return out


@pytest.mark.parametrize("geometry", CASES, ids=lambda p: p.stem)
def test_every_derived_value_edit_of_the_imported_profile_is_refused(geometry: Path) -> None:
    imported = _imported(geometry)
    if imported is None:
        return
    records, profile = imported
    assert check(records + [load_tree(profile, "phase/profile.json")]) == []  # import, then check: accepted
    planned = _derived_edits(profile, geometry.stem)
    assert planned, "no edit of a derived value"
    accepted = []
    for edit in planned:
        try:
            document = load_tree(apply(profile, edit), "phase/profile.json")
        except InputError:
            continue  # the loader refuses it
        if not check(records + [document]):
            accepted.append(edit.describe())
    assert accepted == []


def test_an_edit_of_a_derived_value_is_refused_and_one_of_free_text_is_not() -> None:
    """The test above can fail: an edit outside DERIVED (the description) is accepted."""
    records, profile = _imported(GEOMETRIES / "plain_32_two_workers.json")
    edited = dict(profile, description="another text")
    assert check(records + [load_tree(edited, "phase/profile.json")]) == []
    groups = [dict(g) for g in profile["resources"]["cache_groups"]]
    groups[0]["num_layers"] += 1
    edited = dict(profile, resources=dict(profile["resources"], cache_groups=groups))
    assert [d.rule for d in check(records + [load_tree(edited, "phase/profile.json")])] == ["PA004"]
