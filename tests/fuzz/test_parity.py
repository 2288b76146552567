"""Parity: the concrete verdict of every rule equals its z3 verdict on the same values."""

from __future__ import annotations

import attrs
import pytest
import z3
from fuzz_helpers import CAMPAIGN
from hypothesis import given

from kvproof.fuzz import parity
from kvproof.logic import is_symbolic
from kvproof.rules.core import Instance, binding
from kvproof.rules.registry import all_rules

RULES = all_rules()


@pytest.fixture(scope="module")
def shapes(record_sets):
    """Small shapes: each example profile group, and a worker + scheduler of one group of each
    example (all shapes under HYPOTHESIS_PROFILE=campaign)."""
    templates = parity.shapes_from_sets(list(record_sets.values()), probe=True)
    if not CAMPAIGN:
        seen_sets: set[str] = set()
        chosen = []
        for name, documents in templates:
            example = name.split(" ")[0]
            kind = "profile" if "profile" in name else ("probe" if "+probe" in name else "records")
            if (example, kind) not in seen_sets and (kind != "probe" or example.startswith("minimax")):
                seen_sets.add((example, kind))
                chosen.append((name, documents))
        templates = chosen
    return [parity.build_shape(name, documents, RULES) for name, documents in templates]


def test_exact_strings_are_not_read_as_escapes() -> None:
    assert z3.simplify(z3.StringVal("\\u{4d}ambaSpec") == z3.StringVal("MambaSpec")).eq(z3.BoolVal(True))
    assert z3.simplify(parity.exact_string("\\u{4d}ambaSpec") == z3.StringVal("MambaSpec")).eq(z3.BoolVal(False))
    assert parity.exact_string("é\x00x").as_string() == z3.StringVal("é\\u{0}x").as_string()


def test_template_input_agrees(shapes) -> None:
    for shape in shapes:
        result = parity.compare(shape, {}, RULES)
        unexplained = [m for m in result.mismatches if parity.known_id(m) is None]
        assert unexplained == [], (shape.name, [m.to_json() for m in unexplained])
        assert result.instances > 0


def test_random_inputs_agree(shapes) -> None:
    @given(parity.input_strategy(shapes))
    def check_input(drawn) -> None:
        index, values = drawn
        result = parity.compare(shapes[index], values, RULES)
        unexplained = [m for m in result.mismatches if parity.known_id(m) is None]
        assert unexplained == [], [m.to_json() for m in unexplained]

    check_input()


def test_a_body_that_differs_between_the_worlds_is_caught(record_sets) -> None:
    @binding("profile")
    def memories(profile):
        yield Instance("$.resources.runtime_memory", (profile.resources.runtime_memory,))

    def body(memory):
        # "holds" symbolically, "fails" concretely when the context is long: a planted difference
        return True if is_symbolic(memory.max_model_len) else memory.max_model_len < 4096

    planted = attrs.evolve(RULES[-1], id="PF999", over=memories, body=body)
    templates = [t for t in parity.shapes_from_sets([record_sets["minimax-m27-tp4"]]) if "profile" in t[0]]
    shape = parity.build_shape(*templates[0], [planted])
    result = parity.compare(shape, {}, [planted])
    assert [(m.rule, m.kind, m.concrete, m.symbolic) for m in result.mismatches] == [("PF999", "mismatch", False, True)]


def test_the_campaign_is_deterministic_for_a_seed(shapes) -> None:
    first = parity.run_parity(shapes[:2], RULES, 8, seed=3)
    second = parity.run_parity(shapes[:2], RULES, 8, seed=3)
    assert [m.to_json() for m in first.mismatches] == [m.to_json() for m in second.mismatches]
    assert first.instances == second.instances
