"""The rule engine: registry, prerequisites, bindings, twin records, block arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from kvproof.models.documents import RankTwins, load_bytes, load_path
from kvproof.rules.block_ownership import pages_alias_only_same_block_of_other_groups as alias_rule
from kvproof.rules.check import check
from kvproof.rules.core import declared_rules
from kvproof.rules.registry import RULE_ORDER, all_rules

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_registry_lists_every_declared_rule_once_and_prerequisites_come_first() -> None:
    assert len(set(RULE_ORDER)) == len(RULE_ORDER)
    assert set(RULE_ORDER) == set(declared_rules())
    position = {rule_id: i for i, rule_id in enumerate(RULE_ORDER)}
    for rule in all_rules():
        for prerequisite in rule.after:
            assert position[prerequisite] < position[rule.id], (rule.id, prerequisite)
        assert rule.source and rule.message and rule.doc


def test_every_example_is_accepted() -> None:
    documents = [load_path(p) for p in sorted(EXAMPLES.glob("*/*.json")) if "geometr" not in str(p)]
    assert len(documents) >= 12
    assert check(documents) == []


def test_glm_record_numbers(examples) -> None:
    scheduler = load_path(examples / "glm53flash-tp4" / "scheduler-dp0.json").obj
    worker = load_path(examples / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json").obj
    assert scheduler.cache.num_blocks == 13_697
    assert scheduler.cache.kv_cache_max_concurrency == 13_697 / 495 == 27.67070707070707
    assert [len(g.layer_names) for g in worker.cache.groups] == [9, 9, 8, 8, 22, 11]
    assert worker.cache.tensor_allocations[0].block_stride == 13_516_800
    indexer = worker.cache.layer_tensors["model.layers.3.self_attn.indexer.k_cache"][0]
    assert indexer.shape[0] == (13_697 - 1) * 3_200 + 2_176 // 128 == 43_827_217


def _with_tp(document, tp: int, edit=None, ranks: RankTwins | None = None):
    """The record as TP rank ``tp`` (its device too), loaded with ``ranks`` as ``check`` loads a set."""
    tree = json.loads(Path(document).read_text())
    tree["tp_rank"] = tp
    tree["cache"]["storages"][0]["device"] = f"cuda:{tp}"
    if edit:
        edit(tree)
    return load_bytes(json.dumps(tree), f"set/worker-tp{tp}.json", ranks=ranks)


def test_twin_workers_get_the_same_findings_as_when_checked_alone() -> None:
    bad = Path(__file__).parent / "BO009" / "conv_views_overlap.json"

    def other(tree):  # a real difference: not a twin
        tree["cache"]["layer_tensors"]["model.layers.3.self_attn.attn"][0]["storage_offset_bytes"] += 512

    ranks = RankTwins()
    documents = [_with_tp(bad, 0, ranks=ranks), _with_tp(bad, 1, ranks=ranks), _with_tp(bad, 2, other, ranks)]
    assert [d.rank_twin_of is documents[0] for d in documents] == [False, True, False]
    together = [d for d in check(documents) if d.rule[:2] != "RS"]  # record-set findings have no single-document twin
    alone = [d for document in documents for d in check([attrs.evolve(document, file=document.file)])]
    key = lambda d: (d.file, d.rule, d.path, d.message)  # noqa: E731
    assert sorted(together, key=key) == sorted(alone, key=key)
    assert {d.rule for d in together if d.file.endswith("tp2.json")} == {"BO008", "BO009"}


@pytest.mark.parametrize(
    "start, length, other_start, other_length, different_groups, blocks, holds",
    [
        (0, 100, 0, 100, True, 10, True),       # same block of two groups: the alias vLLM makes
        (0, 100, 0, 100, False, 10, False),     # same block, one group
        (0, 100, 100, 100, False, 10, True),    # adjacent pages
        (0, 100, 99, 100, False, 10, False),    # one byte shared
        (0, 100, 1000, 100, True, 10, False),   # block b of one page is block b+1 of the other
        (0, 100, 1000 * 10, 100, True, 10, True),  # ... but block 10 does not exist
        (0, 100, 950, 100, True, 10, False),    # wraps into the next block
        (950, 100, 0, 100, True, 1, True),      # one block only: no other block to hit
    ],
)
def test_page_alias_arithmetic(start, length, other_start, other_length, different_groups, blocks, holds) -> None:
    stride = 1000
    assert alias_rule.body(start, length, other_start, other_length, stride, stride, different_groups, blocks) is holds


def test_page_alias_arithmetic_agrees_with_enumeration() -> None:
    stride, blocks = 64, 5
    for start in range(0, 150, 7):
        for other_start in range(0, 150, 5):
            for length, other_length in [(16, 16), (64, 8), (30, 50)]:
                for different in (True, False):
                    bytes_of = lambda s, n: {(s + b * stride + i, b) for b in range(blocks) for i in range(n)}  # noqa: E731
                    mine, theirs = bytes_of(start, length), bytes_of(other_start, other_length)
                    clash = any(
                        (byte, b2) for byte, b1 in mine for byte2, b2 in theirs
                        if byte == byte2 and (b1 != b2 or not different)
                    ) if {b for b, _ in mine} & {b for b, _ in theirs} else False
                    verdict = alias_rule.body(start, length, other_start, other_length, stride, stride, different, blocks)
                    assert verdict is (not clash), (start, length, other_start, other_length, different)


@pytest.mark.parametrize("value", [True, 1.0])
def test_a_rank_that_differs_only_by_a_bool_or_float_for_an_int_is_no_twin(value) -> None:
    """True == 1 == 1.0 in Python: a TP rank whose checkpoint count is ``true`` (or ``1.0``) where
    rank 0 has ``1`` is not rank 0's twin; CK002 refuses it as it does when it is checked alone."""
    good = Path(__file__).parent / "CK002" / "bool_count.json"  # accepted once the count is 1 (edit `one`)

    def loosen(tree):
        tree["cache"]["groups"][0]["state"]["num_prefill_checkpoint_blocks"] = value

    def one(tree):
        tree["cache"]["groups"][0]["state"]["num_prefill_checkpoint_blocks"] = 1

    ranks = RankTwins()
    documents = [_with_tp(good, 0, one, ranks), _with_tp(good, 1, loosen, ranks)]
    assert documents[1].rank_twin_of is None  # the loader's twin test sees the type
    together = [d for d in check(documents) if d.rule[:2] != "RS"]  # record-set findings have no single-document twin
    alone = check([documents[1]])
    assert [d.rule for d in alone] == ["CK002"]
    assert [(d.rule, d.path) for d in together if d.file == documents[1].file] == [(d.rule, d.path) for d in alone]


def test_the_checker_shares_findings_only_between_the_loaders_twins() -> None:
    """TP-rank twins are found by the loader alone (models.documents.RankTwins): the checker judges
    each twin group once, and judges records loaded without one each on their own (it compares
    no records itself)."""
    bad = Path(__file__).parent / "BO009" / "conv_views_overlap.json"
    rule = next(r for r in all_rules() if r.id == "BO009")
    calls = []

    def counted(*args):
        calls.append(1)
        return rule.body(*args)

    counting = [attrs.evolve(rule, body=counted)]
    ranks = RankTwins()
    twins = [_with_tp(bad, tp, ranks=ranks) for tp in range(3)]
    assert check(twins, counting) and (once := len(calls)) > 0
    calls.clear()
    apart = [_with_tp(bad, tp) for tp in range(3)]
    assert [d.rank_twin_of for d in apart] == [None] * 3
    assert check(apart, counting) == check(twins, counting)
    assert len(calls) == 4 * once  # three judged apart, then the twins once more


def test_evaluate_with_rank_twins_reports_what_each_file_gets_alone(tmp_path) -> None:
    """``evaluate`` structures TP-rank twins once (models.documents.RankTwins) and judges them once:
    every file still gets exactly the findings it gets when checked on its own."""
    from kvproof.commands.check import evaluate

    bad = Path(__file__).parent / "BO009" / "conv_views_overlap.json"

    def other(tree):
        tree["cache"]["layer_tensors"]["model.layers.3.self_attn.attn"][0]["storage_offset_bytes"] += 512

    def loose(tree):
        tree["cache"]["groups"][0]["state"]["num_prefill_checkpoint_blocks"] = True

    names = []
    for tp, edit in ((0, None), (1, None), (2, other), (3, loose)):
        document = _with_tp(bad, tp, edit)
        path = tmp_path / f"worker-tp{tp}.json"
        path.write_text(json.dumps(document.tree if document.tree is not None else json.loads(bad.read_text())))
        names.append(str(path))
    # record-set findings (RS: four workers without a scheduler) have no single-document twin
    together = {r.file: sorted((d.rule, d.path) for d in r.diagnostics if d.rule[:2] != "RS") for r in evaluate(names)}
    alone = {name: sorted((d.rule, d.path) for r in evaluate([name]) for d in r.diagnostics) for name in names}
    assert together == alone
    assert ("CK002", "$.cache.groups[0].state.num_prefill_checkpoint_blocks") in together[names[3]]
