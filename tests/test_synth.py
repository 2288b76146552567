"""``kvproof synth``: the records vLLM 0.33.0 would write, which every rule must accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.models.codec import dumps, unstructure
from kvproof.models.documents import load_bytes
from kvproof.models.geometry import load_geometry
from kvproof.rules.check import check
from kvproof.sim import PlanRefusal
from kvproof.sim.synth import synthesize

GEOMETRIES = sorted((Path(__file__).resolve().parents[1] / "examples" / "geometries").glob("*.json"))


def _records(geometry_path: Path):
    synthesized = synthesize(load_geometry(geometry_path.read_bytes(), str(geometry_path)))
    return synthesized, [load_bytes(dumps(unstructure(rec)), f"synth/{name}") for name, rec in synthesized.files()]


@pytest.mark.parametrize("path", [p for p in GEOMETRIES if "refusal" not in p.name], ids=lambda p: p.stem)
def test_synthesized_records_are_accepted(path: Path) -> None:
    synthesized, documents = _records(path)
    assert check(documents) == []
    scheduler = synthesized.scheduler
    assert scheduler.cache.num_blocks == synthesized.plan.num_blocks
    assert scheduler.cache.kv_cache_max_concurrency == synthesized.plan.max_concurrency


def test_plain_model_records_carry_vllm_numbers() -> None:
    synthesized, _ = _records(next(p for p in GEOMETRIES if "plain-32" in p.name))
    assert synthesized.scheduler.cache.num_blocks == 10_240
    assert synthesized.scheduler.cache.kv_cache_max_concurrency == 20.0
    assert synthesized.scheduler.cache.kv_cache_size_tokens == 163_840


def test_glm_like_records_have_the_packed_groups() -> None:
    synthesized, _ = _records(next(p for p in GEOMETRIES if "glm-like" in p.name))
    worker = synthesized.workers[0]
    assert [len(g.layer_names) for g in worker.cache.groups][:4] == [9, 9, 8, 8]
    assert worker.cache.tensor_allocations[0].block_stride == 7_468_032


def test_refused_geometry_exits_1_with_vllm_text(tmp_path, capsys) -> None:
    path = next(p for p in GEOMETRIES if "refusal" in p.name)
    with pytest.raises(PlanRefusal):
        synthesize(load_geometry(path.read_bytes()))
    assert main(["synth", str(path), "-o", str(tmp_path / "out")]) == 1
    assert "(1.0 GiB KV cache is needed" in capsys.readouterr().out


def test_synth_cli_writes_records_that_check_accepts(tmp_path, capsys) -> None:
    path = next(p for p in GEOMETRIES if "bamba-like-align" in p.name)
    assert main(["synth", str(path), "-o", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == ["scheduler-dp0.json", "worker-dp0-tp0-pp0.json"]
    assert json.loads((tmp_path / "scheduler-dp0.json").read_text())["kind"] == "scheduler"
    assert main(["check", str(tmp_path)]) == 0


def test_synth_bad_geometry_exits_2(tmp_path, capsys) -> None:
    bad = tmp_path / "g.json"
    bad.write_text('{"layers": [], "unknown": 1}')
    assert main(["synth", str(bad), "-o", str(tmp_path / "out")]) == 2


def _edge(document: dict, edge: str, draw) -> dict:
    """A generated geometry pushed to an edge vLLM may or may not start with (issue #13 item 6)."""
    from hypothesis import strategies as st

    document = json.loads(json.dumps(document))
    if edge == "no layers":  # attention-free
        document["layers"] = []
        document.pop("workers", None)
    elif edge == "stepped range":  # [start, stop, step] (item 8): every other index
        for entry in document["layers"]:
            if "range" in entry:
                start, stop = entry["range"]
                entry["range"] = [start, start + 2 * (stop - start), 2]
                document.pop("workers", None)
                break
    elif edge == "tiny max_model_len":
        document["max_model_len"] = draw(st.integers(1, 40))
    elif edge == "tiny pool":
        document["num_gpu_blocks_override"] = draw(st.integers(1, 3))
    elif edge == "tiny memory" and not isinstance(document.get("available_memory_bytes"), list):
        document["available_memory_bytes"] = draw(st.integers(1, 10**6))
    elif edge == "one-token blocks":
        document["block_size"] = 1
    elif edge == "tiny batch":
        document["max_num_batched_tokens"] = draw(st.integers(1, 64))
        document["max_num_seqs"] = 1
    return document


EDGES = ["none", "no layers", "stepped range", "tiny max_model_len", "tiny pool", "tiny memory", "one-token blocks",
         "tiny batch"]


def _synthesized_or_refused(document: dict) -> None:
    """Synth either refuses the geometry (vLLM refuses to start: exit 1; kvproof's records cannot
    hold it: exit 2) or every record it writes passes every rule."""
    from kvproof.commands.synth import records_for
    from kvproof.diagnostics import InputError
    from kvproof.fuzz.explained import known_synth_refusal

    try:
        geometry = load_geometry(json.dumps(document))
    except InputError:
        return  # an edit that made the geometry itself invalid
    try:
        synthesized = records_for(geometry)
    except (PlanRefusal, InputError):
        return
    records = [load_bytes(dumps(unstructure(rec)), f"synth/{name}") for name, rec in synthesized.files()]
    diagnostics = check(records)
    known = known_synth_refusal({d.rule for d in diagnostics}, synthesized.plan) if diagnostics else None
    if known and known[0] == "F019":
        return  # vLLM 0.33.0's own block aliasing, a documented finding BO005 reports (docs/fuzz-findings.md)
    assert diagnostics == [], (json.dumps(document), [d.render() for d in diagnostics[:5]])


def test_every_synthesized_record_of_a_generated_geometry_is_accepted() -> None:
    """Property: whatever geometry the strategies generate (also pushed to the edges above),
    :func:`_synthesized_or_refused` holds."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kvproof.fuzz.strategies import geometries

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.data())
    def run(data) -> None:
        _synthesized_or_refused(_edge(data.draw(geometries()), data.draw(st.sampled_from(EDGES)), data.draw))

    run()


#: A tail ring of vLLM 0.33.0's GLM-5 indexer (models/glm5next/common/attention.py:125-179).
RING = {"name": "model.layers.{i}.self_attn.indexer.tail_cache", "index": 0, "spec": "CircularBufferSpec",
        "block_size": 4, "num_kv_heads": 2, "head_size": 128, "head_size_v": 0, "dtype": "bfloat16",
        "dcp_sharded": False}

#: Examples the property once failed on, as Hypothesis drew them (it cannot pin a ``st.data()``
#: draw with ``@example``). "ring split": the views backend ``match: "attn"`` bound the tail ring
#: to 16-token kernel blocks (two pipeline stages, HMA off; neither matters), and synth wrote
#: records VC001 refuses.
PINNED = {
    "ring split": {
        "name": "hypothesis:mla",
        "layers": [{"name": "model.layers.{i}.self_attn.indexer.k_cache", "index": 0, "spec": "MLAAttentionSpec",
                    "num_kv_heads": 1, "head_size": 128, "dtype": "uint8", "max_tp_shards": 1,
                    "cache_role": "indexer"},
                   RING,
                   {"name": "model.layers.{i}.self_attn.attn", "index": 0, "spec": "MLAAttentionSpec",
                    "num_kv_heads": 1, "head_size": 512, "dtype": "bfloat16", "max_tp_shards": 1,
                    "is_index_group_leader": True}],
        "max_model_len": 512, "enable_prefix_caching": True,
        "workers": [["model.layers.0.self_attn.indexer.k_cache"],
                    ["model.layers.0.self_attn.indexer.tail_cache", "model.layers.0.self_attn.attn"]],
        "available_memory_bytes": 202137, "prefix_match_unit": 16, "max_num_batched_tokens": 256,
        "async_scheduling": False, "tp": 2, "disable_hybrid_kv_cache_manager": True, "layer_order": "as_listed",
        "original_max_model_len": -1,
        "views": {"num_blocks": 1, "backends": [{"match": "attn", "kernel_block_sizes": [16]}]},
    },
}


@pytest.mark.parametrize("name", PINNED)
def test_a_pinned_generated_geometry_is_synthesized_or_refused(name: str) -> None:
    _synthesized_or_refused(PINNED[name])


def test_a_ring_split_into_kernel_blocks_is_refused(tmp_path, capsys) -> None:
    """vLLM's kernel-block selection would split a ring whose backend needs 16-token kernel blocks
    (the conformance golden ring_split_by_view_backend), but no vLLM 0.33.0 ring backend does:
    synth writes no record VC001 refuses (exit 2, the backend's path)."""
    geometry = tmp_path / "g.json"
    geometry.write_text(json.dumps({
        "layers": [RING, {"name": "model.layers.{i}.self_attn.attn", "index": 0, "spec": "FullAttentionSpec",
                          "num_kv_heads": 1, "head_size": 128, "dtype": "bfloat16"}],
        "block_size": 32, "max_model_len": 512, "available_memory_bytes": 1 << 24,
        "views": {"num_blocks": 1, "backends": [{"match": "attn", "kernel_block_sizes": [16]}]}}))
    assert main(["synth", str(geometry), "-o", str(tmp_path / "out")]) == 2
    text = capsys.readouterr().out
    assert text.startswith(
        f"{geometry}: LD002 $.views.backends[0].kernel_block_sizes: binds the ring layer "
        "model.layers.0.self_attn.indexer.tail_cache (CircularBufferSpec, 32-token blocks) to 16-token kernel blocks")
    assert "v1/attention/backends/mla/indexer.py:325-327" in text
    assert not (tmp_path / "out").exists()


def test_generated_views_leave_a_tail_ring_to_a_backend_of_any_multiple() -> None:
    """The strategies bind a drawn views backend to the layers ``attn`` names but the tail rings,
    which keep a backend accepting any multiple of 1, as every vLLM 0.33.0 ring backend does."""
    from hypothesis import find, settings

    from kvproof.fuzz.strategies import engine_settings

    model = {"layers": [RING, {"name": "model.layers.{i}.self_attn.attn", "index": 1, "spec": "FullAttentionSpec",
                               "num_kv_heads": 1, "head_size": 128, "dtype": "bfloat16"}]}
    drawn = find(engine_settings(model),
                 lambda s: "views" in s and s["views"]["backends"][-1]["kernel_block_sizes"] == [16],
                 settings=settings(max_examples=5000, database=None))
    ring = "model.layers.0.self_attn.indexer.tail_cache"
    assert next(b for b in drawn["views"]["backends"] if b["match"] in ring)["kernel_block_sizes"] == [{"MultipleOf": 1}]
    assert next(b for b in drawn["views"]["backends"] if b["match"] in "model.layers.1.self_attn.attn") == {
        "match": "attn", "kernel_block_sizes": [16]}


def test_an_attention_free_geometry_is_refused_with_vllm_source(tmp_path, capsys) -> None:
    """`"layers": []` used to synthesize records check refuses with SU001 (exit 0)."""
    geometry = tmp_path / "g.json"
    document = json.loads(GEOMETRIES[0].read_text())
    geometry.write_text(json.dumps({**document, "layers": []}))
    out = tmp_path / "out"
    assert main(["synth", str(geometry), "-o", str(out)]) == 2
    text = capsys.readouterr().out
    assert text.startswith(f"{geometry}: LD002 $.layers: the geometry has no KV cache layers: vLLM 0.33.0 starts")
    assert "vllm/v1/engine/core.py:298-314" in text
    assert not out.exists()


def test_a_spec_the_records_cannot_hold_is_refused(tmp_path, capsys) -> None:
    """Cross-attention layers (finding F020): vLLM plans them, SC001 refuses their records."""
    attention = {"spec": "FullAttentionSpec", "num_kv_heads": 1, "head_size": 128, "dtype": "bfloat16"}
    geometry = tmp_path / "g.json"
    geometry.write_text(json.dumps({
        "layers": [{"name": "model.layers.{i}.self_attn.attn", "index": 2, **attention},
                   {"name": "model.layers.{i}.encoder_attn.attn", "range": [0, 2], **attention,
                    "spec": "CrossAttentionSpec"}],
        "block_size": 16, "max_model_len": 512, "available_memory_bytes": 1 << 26}))
    assert main(["synth", str(geometry), "-o", str(tmp_path / "out")]) == 2
    assert (f"{geometry}: LD002 $.layers[1].spec: vLLM 0.33.0 plans CrossAttentionSpec layers "
            "(model.layers.0.encoder_attn.attn), but kvproof's record format has no cache kind") in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
