"""The state support table (kvproof/sim/startup/state_support.py), its z3 proofs and the SS rules that
report it: the rules refuse exactly the table's refused rows, with the row's text and path."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import attrs
import pytest

from kvproof.models.codec import ABSENT
from kvproof.models.documents import load_bytes
from kvproof.rules.check import check
from kvproof.rules.registry import get_rule
from kvproof.rules.state_support import RecordView
from kvproof.sim.startup import state_support as table
from kvproof.solver import state_support as proofs

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER = ROOT / "examples" / "minimax-m27-tp4" / "scheduler-dp0.json"
ARCHITECTURES = {"other": "JambaForCausalLM", "replayssm": "NemotronHForCausalLM", "kda": "KimiK3ForConditionalGeneration"}
METHODS = {"none": None, "eagle": "eagle3", "mtp": "nemotron_h_mtp", "other": "ngram"}


def test_the_table_is_proved_total_disjoint_and_every_row_reachable() -> None:
    result = proofs.prove_table()
    assert result.proved, "\n".join(result.lines())
    assert len(result.rows) == len(table.ROWS) and set(result.totality) == set(table.REVISIONS)
    for row_result in result.rows:  # the solver's witness is decided by its row in the concrete table
        assert table.decide(row_result.witness) is row_result.row


def test_a_missing_row_is_a_gap_and_a_doubled_row_an_overlap(monkeypatch) -> None:
    triton = next(r for r in table.ROWS if r.name == "Triton ReplaySSM" and r.revision == table.REVISION_0_33_0)
    monkeypatch.setattr(proofs, "ROWS", tuple(r for r in table.ROWS if r is not triton))
    gap = proofs.prove_table()
    assert gap.totality[table.REVISION_PR_55688] == "total"
    witness = gap.totality[table.REVISION_0_33_0]
    assert witness != "total" and table.decide(witness) is triton
    monkeypatch.setattr(proofs, "ROWS", table.ROWS + (attrs.evolve(triton, name="twin"),))
    assert [(a, b) for a, b, _ in proofs.prove_table().overlaps] == [("0.33.0:Triton ReplaySSM", "0.33.0:twin")]


def test_every_refusal_has_rows_and_every_rule_its_refusal() -> None:
    assert sorted(table.REFUSALS) == [f"SS{n:03d}" for n in range(5, 21)]
    for rule_id, refusal in table.REFUSALS.items():
        assert table.rows_of(rule_id), rule_id
        assert get_rule(rule_id).message == refusal.text and get_rule(rule_id).field == refusal.field
    assert {row.rule for row in table.ROWS} - {None} == set(table.REFUSALS)


def _record(settings: dict, mode_stated: bool, defaults_absent: bool) -> bytes:
    doc = json.loads(SCHEDULER.read_text())
    config = doc["resolved_config"]
    config.update(vllm_revision=settings["revision"], use_replayssm=settings["use_replayssm"],
                  architecture=ARCHITECTURES[settings["architecture"]], mamba_backend=settings["mamba_backend"],
                  use_v2_model_runner=settings["model_runner"] == "V2",
                  num_speculative_tokens=settings["num_speculative_tokens"],
                  replayssm_buffer_len=settings["replayssm_buffer_len"],
                  pipeline_parallel_size=settings["pipeline_parallel_size"],
                  max_in_flight_tokens=8192 * settings["pipeline_parallel_size"],
                  is_kv_transfer_instance=settings["kv_connector"],
                  mamba_stochastic_rounding=settings["stochastic_rounding"])
    if defaults_absent:  # an absent key takes vLLM's default (kvproof/rules/state_support.py)
        for key, default in (("vllm_revision", "0.33.0"), ("mamba_backend", "triton"), ("replayssm_buffer_len", 16),
                             ("pipeline_parallel_size", 1), ("is_kv_transfer_instance", False),
                             ("mamba_stochastic_rounding", False), ("use_replayssm", False)):
            if config[key] == default:
                del config[key]
    if METHODS[settings["speculative"]] is not None:
        config["speculative_method"] = METHODS[settings["speculative"]]
    mode = settings["mamba_cache_mode"]
    if mode_stated or mode == "all":
        config["mamba_cache_mode"] = doc["prefix_caching"]["mamba_cache_mode"] = mode
    else:  # absent: the mode follows prefix caching (models/config.py:763-787)
        del config["mamba_cache_mode"]
        config["enable_prefix_caching"] = doc["prefix_caching"]["enable_prefix_caching"] = mode == "align"
    return json.dumps(doc).encode()


def _points():
    axes = dict(table.AXES)
    spec = [("none", 0), ("eagle", 2), ("mtp", 1), ("mtp", 3), ("other", 1)]
    grid = itertools.product(*(axes[a] for a in axes if a != "speculative"), spec, (3, 16, 17), (1, 2))
    names = [a for a in axes if a != "speculative"]
    for values in grid:
        settings = dict(zip(names, values[:len(names)]))
        (settings["speculative"], settings["num_speculative_tokens"]), settings["replayssm_buffer_len"], \
            settings["pipeline_parallel_size"] = values[len(names):]
        if settings["revision"] == table.REVISION_0_33_0 and settings["mamba_cache_mode"] == "all":
            continue
        yield settings


def test_the_rules_refuse_exactly_the_refused_rows_with_their_text_and_path() -> None:
    points = list(_points())
    sample = random.Random(16).sample(points, 600)
    refused = set()
    for number, settings in enumerate(sample):
        row = table.decide(settings)
        document = load_bytes(_record(settings, mode_stated=number % 2 == 0, defaults_absent=number % 3 == 1), "ss.json")
        report = [(d.rule, d.path, d.message) for d in check([document])]
        if row.supported:
            assert report == [], (row.name, settings, report)
            continue
        refused.add(row.rule)
        text = table.refusal_text(row.rule, ARCHITECTURES[settings["architecture"]], settings["num_speculative_tokens"],
                                  settings["replayssm_buffer_len"])
        assert report == [(row.rule, f"$.resolved_config.{table.REFUSALS[row.rule].field}", text)], (row.name, settings)
    assert refused == set(table.REFUSALS)


@pytest.mark.parametrize("prefix_caching, mode", [(True, "align"), (False, "none")])
def test_an_absent_mode_follows_prefix_caching(prefix_caching, mode) -> None:
    config = attrs.evolve(load_bytes(SCHEDULER.read_bytes(), "s.json").obj.resolved_config,
                          mamba_cache_mode=ABSENT, enable_prefix_caching=prefix_caching)
    view = RecordView(config)
    assert [m for m in table.AXES["mamba_cache_mode"] if view.is_("mamba_cache_mode", m)] == [mode]


def test_the_docs_hold_the_table_as_it_is() -> None:
    doc = (ROOT / "docs" / "state-storage.md").read_text()
    for revision in table.REVISIONS:
        assert "\n".join(table.markdown_rows(revision)) in doc, revision
