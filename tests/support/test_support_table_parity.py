"""Parity of the SS rules where their settings are stated: the concrete verdict equals the z3
verdict on shapes made from the SS fixtures (the example records state none of the settings)."""

from __future__ import annotations

import json
from pathlib import Path

from kvproof.fuzz import parity
from kvproof.rules.registry import all_rules
from kvproof.solver.shapes import shrink_record

RULES = all_rules()
SS = [rule for rule in RULES if rule.family == "SS"]
FIXTURES = Path(__file__).resolve().parents[1] / "rules"
CASES = ("SS008/recoverssm_prefix_caching_on_v1", "SS014/flashinfer_buffer_below_query_len",
         "SS012/good_flashinfer_mtp_with_prefix_caching_at_the_pr", "SS020/triton_with_a_kv_connector")


def _shapes():
    out = []
    for case in CASES:
        tree = json.loads((FIXTURES / f"{case}.json").read_text())
        out.append(parity.build_shape(case, [("scheduler", "scheduler.json", shrink_record(tree, [0], 1), "checked")], RULES))
    return out


def test_ss_rules_agree_between_the_worlds_on_stated_settings() -> None:
    shapes = _shapes()
    for shape in shapes:
        result = parity.compare(shape, {}, RULES)
        assert [m.to_json() for m in result.mismatches if parity.known_id(m) is None] == []
    report = parity.run_parity(shapes, RULES, examples=200, seed=16)
    assert [m.to_json() for m in report.failures] == []
    assert report.never_compared(SS) == []
