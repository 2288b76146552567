"""The checker's mode gives the verdicts a plain evaluation of the same bodies gives, on every
binding instance of every fixture, example and a sample of mutated GLM records.

Inside :class:`kvproof.logic.concrete_only` (the checker) the logic helpers skip their tests for z3
terms; outside it they make them. A rule has one body (no ``checking_concretely()`` branch); the
formulas' plain-Python fast paths are proved equal to their helper expressions in
tests/formulas/test_formula_fast_paths.py, and the z3 verdicts by the parity fuzzer."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kvproof.logic import concrete_bool, concrete_only
from kvproof.models.documents import load_bytes, load_path
from kvproof.rules.check import bundles
from kvproof.rules.core import binding_memo
from kvproof.rules.registry import all_rules

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "rules").glob("*/*.json"))
GLM = sorted((ROOT / "examples" / "glm53flash-tp4").glob("*-dp0*.json"))


def _verdicts(documents, fast: bool) -> list[tuple[str, str, bool]]:
    groups = bundles(tuple(documents))
    out = []
    for rule in all_rules():
        targets = [bundle for bundle in groups] if "bundle" in rule.over.kinds else []
        targets += [d.obj for d in documents if d.kind in rule.over.kinds and d.role != "probe"]
        for target in targets:
            with binding_memo():
                instances = list(rule.over(target))
            for instance in instances:
                out.append((rule.id, instance.subject, _judge(rule, instance, fast)))
    return out


def _judge(rule, instance, fast: bool):
    """The verdict; an instance whose prerequisite failed (the checker never judges it) may raise,
    and then both paths must raise alike."""
    try:
        if fast:
            with concrete_only():
                verdict = rule.body(*instance.args)
        else:
            verdict = rule.body(*instance.args)
        return verdict is True or concrete_bool(verdict)
    except (AttributeError, TypeError, KeyError, ZeroDivisionError) as exc:
        return f"raises {type(exc).__name__}"


def _load(path: Path):
    try:
        return load_path(str(path))
    except Exception:  # noqa: BLE001 - a fixture refused by the loader has no instances to judge
        return None


def _assert_same(documents) -> None:
    documents = [d for d in documents if d is not None and d.kind in ("worker", "scheduler", "profile")]
    if documents:
        assert _verdicts(documents, fast=True) == _verdicts(documents, fast=False)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fast_paths_agree_on_every_fixture(path: Path) -> None:
    _assert_same([_load(path)])


def test_fast_paths_agree_on_the_glm_set() -> None:
    _assert_same([_load(path) for path in GLM])


def _mutants(count: int, seed: int = 11):
    """Single integer edits of the GLM worker and scheduler (an integer leaf set to 0, 1, +-1 or x2)."""
    rng = random.Random(seed)
    trees = [(path.name, json.loads(path.read_text())) for path in GLM[:1] + GLM[-1:]]
    for _ in range(count):
        name, tree = rng.choice(trees)
        tree = json.loads(json.dumps(tree))
        leaves = []

        def walk(node, parent, key):
            if isinstance(node, dict):
                for k, v in node.items():
                    walk(v, node, k)
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, node, i)
            elif type(node) is int:
                leaves.append((parent, key, node))

        walk(tree, None, None)
        parent, key, value = rng.choice(leaves)
        parent[key] = rng.choice([0, 1, value + 1, max(value - 1, 0), value * 2])
        yield load_bytes(json.dumps(tree), f"mutant/{name}")


def test_fast_paths_agree_on_mutated_glm_records() -> None:
    for document in _mutants(40):
        _assert_same([document])
