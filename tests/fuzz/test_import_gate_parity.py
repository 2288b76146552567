"""Parity of the import gate's rules (RS, PA, CA, CK004): the concrete verdict equals the z3 verdict
on the record sets the solver searches (kvproof/solver/shapes.py: a worker and its scheduler at
TP 1, two workers, one rank twice, two schedulers, a profile next to its records, with and without
a raw cache config), and every one of those rules is compared on some input."""

from __future__ import annotations

import pytest

from kvproof.fuzz import parity
from kvproof.rules.registry import all_rules
from kvproof.solver.encode import role_of
from kvproof.solver.shapes import Bound, base_shapes

RULES = all_rules()
NEW = [rule for rule in RULES if rule.family in ("RS", "PA", "CA") or rule.id == "CK004"]

#: One-layer record sets of the example with the fewest groups (MiniMax), and GLM's KDA group with
#: two layers (CK004 reads the layers' Mamba type, RS012 a hybrid worker).
SHAPES = (
    "bundle+profile minimax-m27-tp4 groups[0] layers<=1",
    "bundle+profile minimax-m27-tp4 groups[0] layers<=1 raw_cache_config",
    "bundle+profile minimax-m27-tp4 groups[0] layers<=1 workers=2",
    "bundle+profile minimax-m27-tp4 groups[0] layers<=1 one group more",
    "bundle+profile minimax-m27-tp4 groups[0] layers<=1 without runtime_memory",
    "bundle minimax-m27-tp4 groups[0] layers<=1 workers=2 one rank",
    "bundle minimax-m27-tp4 groups[0] layers<=1 schedulers=2",
    "bundle+profile glm53flash-tp4 groups[0, 4] layers<=1",
)


@pytest.fixture(scope="module")
def shapes():
    by_name = {shape.name: shape for shape in base_shapes("bundle", Bound())}
    missing = [name for name in SHAPES if name not in by_name]
    assert missing == [], f"the solver no longer builds {missing}"
    return [parity.build_shape(name, [(kind, file, tree, role_of(file)) for kind, file, tree in by_name[name].documents],
                               RULES) for name in SHAPES]


def test_every_new_rule_has_a_z3_verdict(shapes) -> None:
    for shape in shapes:
        errors = {rule.id: shape.encoded[rule.id] for rule in NEW if isinstance(shape.encoded.get(rule.id), str)}
        assert errors == {}, (shape.name, errors)


def test_templates_agree(shapes) -> None:
    for shape in shapes:
        result = parity.compare(shape, {}, RULES)
        assert result.loaded, shape.name
        assert [m.to_json() for m in result.mismatches if parity.known_id(m) is None] == [], shape.name


def test_random_inputs_agree_and_reach_every_new_rule(shapes) -> None:
    report = parity.run_parity(shapes, RULES, examples=300, seed=15)
    assert [m.to_json() for m in report.failures] == []
    assert report.never_compared(NEW) == []


def _leaf(shape: parity.ParityShape, suffix: str) -> int:
    (index,) = [i for i, leaf in enumerate(shape.leaves) if leaf.name.endswith(suffix)]
    return index


@pytest.mark.parametrize(("suffix", "tag", "value", "rule", "holds"), [
    # a raw cache config without the utilization (or null) judges nothing; another value is refused
    ("scheduler-dp0.json:$.raw_cache_config.gpu_memory_utilization", "ABSENT_T", None, "PA016", True),
    ("scheduler-dp0.json:$.raw_cache_config.gpu_memory_utilization", "NULL_T", None, "PA016", True),
    ("scheduler-dp0.json:$.raw_cache_config.gpu_memory_utilization", "FLOAT_T", 0.5, "PA016", False),
    ("profile.json:$.resources.runtime_memory.gpu_memory_utilization", "FLOAT_T", 0.5, "PA016", False),
    # the pool block and the usable blocks
    ("profile.json:$.resources.runtime_memory.kv_cache_bytes", None, 1015808, "PA011", False),
    ("worker-dp0-tp0-pp0.json:$.cache.num_blocks", None, 7, "PA011", False),
    # raw twins of the resolved settings
    ("scheduler-dp0.json:$.raw_cache_config.block_size", "INT_T", 32, "RS013", False),
    ("scheduler-dp0.json:$.raw_cache_config.block_size", "ABSENT_T", None, "RS013", True),
])
def test_targeted_inputs_agree(shapes, suffix, tag, value, rule, holds) -> None:
    from kvproof.models.codec import ABSENT
    from kvproof.solver import symbolic

    shape = shapes[SHAPES.index("bundle+profile minimax-m27-tp4 groups[0] layers<=1 raw_cache_config")]
    tag_value = getattr(symbolic, tag) if tag else None
    if tag == "ABSENT_T":
        value = ABSENT
    result = parity.compare(shape, {_leaf(shape, suffix): (tag_value, value)}, RULES)
    assert result.loaded
    assert [m.to_json() for m in result.mismatches if parity.known_id(m) is None] == []
    verdicts = [(c, s) for r, _subject, c, s in result.verdicts if r == rule]
    assert verdicts and all(c == s for c, s in verdicts)
    assert all(c for c, _ in verdicts) is holds  # the input reaches the rule's comparison
