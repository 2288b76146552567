"""Read instrumentation: which (class, field) pairs the rules read, learned by running the checker."""

from __future__ import annotations

import attrs
from fuzz_helpers import GLM, MINIMAX

from kvproof.fuzz.reads import MODEL_CLASSES, ReadLog, trace_check, traced_rules, tracing
from kvproof.models.documents import load_path
from kvproof.rules.check import check
from kvproof.rules.registry import all_rules


def _documents(directory):
    return [load_path(p) for p in sorted(directory.glob("*.json"))]


def test_reads_of_the_glm_set_name_their_rules() -> None:
    diagnostics, log = trace_check(_documents(GLM))
    assert diagnostics == []
    assert "VG001" in log.readers("Runtime", "version")
    assert "SU002" in log.readers("SchedulerCache", "kv_cache_max_concurrency")
    assert "SC005" in log.readers("SchedulerRecord", "dp_rank")  # a binding that pairs records reads the rank
    assert not log.read("Storage", "device")
    assert ("Storage", "device") in log.unread()


def test_the_checkers_own_bookkeeping_is_not_a_read() -> None:
    # reads outside a rule (the checker's bookkeeping, the loader's TP-rank twin test) do not count
    _, log = trace_check(_documents(MINIMAX))
    assert not log.read("ModelRunner", "class_name")  # no rule reads it
    assert all(None not in rules for rules in log.reads.values())


def test_tracing_is_removed_after_the_block_and_verdicts_are_unchanged() -> None:
    documents = _documents(GLM)
    log = ReadLog()
    with tracing(log):
        traced = check(documents, traced_rules(all_rules(), log))
    assert traced == check(documents)
    for cls in MODEL_CLASSES:
        assert "__getattribute__" not in cls.__dict__, cls
    assert log.reads


def test_reads_outside_a_rule_are_not_recorded() -> None:
    log = ReadLog()
    document = _documents(MINIMAX)[0]
    with tracing(log):
        attrs.asdict(document.obj)
    assert log.reads == {}


def test_tracing_is_not_reentrant_and_leaves_no_hook_when_refused() -> None:
    import pytest

    with tracing(ReadLog()):
        with pytest.raises(RuntimeError, match="already active"):
            with tracing(ReadLog()):
                pass
        assert "__getattribute__" in MODEL_CLASSES[0].__dict__  # the outer block's hook stays
    assert all("__getattribute__" not in cls.__dict__ for cls in MODEL_CLASSES)
    with tracing(ReadLog()):  # usable again after the block
        pass
