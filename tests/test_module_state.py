"""No module-level mutable cache: a cache is owned by an object (``executor.ProcessState``, the
codec's converter, ``rules.core.identity_cache``) or is a functools cache of a pure function."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import kvproof
from kvproof.models.documents import load_path

ROOT = Path(kvproof.__file__).parent
EXAMPLES = ROOT / "examples"
#: Reworked in their own changes of issue #14 (the solver split, the simulator's subpackages).
_ELSEWHERE = ()
#: Module-level containers that are tables, not caches.
_TABLES = {
    "rules/core.py:_DECLARED",  # the declared rules, filled once by @rule as the families import
    "rules/registry.py:REMOVED",  # retired rule IDs and why (none today)
    "solver/claims/__init__.py:_DECLARED",  # the declared claims, filled by @claim as a claims file imports
    # pure memoization keyed by value (a key the argument objects cannot be: leaves, makers)
    "solver/pins.py:_PIN_PAIRS",
    "solver/symbolic.py:_AXIOMS",
    "logic.py:_SYMBOLIC_MEMO",  # symbolic_memo: a pure formula's z3 term by its inputs (terms by id, kept alive)
    "logic.py:_SYMBOLIC_TABLES",  # symbolic_table: pure results shared by inputs with the same terms (kept alive)
    "solver/symbolic.py:_TAG_TESTS",  # a leaf's tag tests by its tag term's id (the term kept alive)
    "solver/symbolic.py:_CONJUNCT_MEMO",  # per_conjunct: a DAG walk's answer by term id (the term kept alive)
}


def _empty_container(node: ast.expr | None) -> bool:
    if isinstance(node, (ast.Dict, ast.List, ast.Set)):
        return not getattr(node, "keys", None) and not getattr(node, "elts", None)
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return name in ("dict", "list", "set", "OrderedDict", "defaultdict", "WeakValueDictionary", "WeakKeyDictionary")
    return False


def test_no_module_level_container_is_filled_at_run_time() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(_ELSEWHERE):
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            if _empty_container(getattr(node, "value", None)):
                found += [f"{name}:{t.id}" for t in targets if isinstance(t, ast.Name)]
    assert sorted(set(found) - _TABLES) == []


def test_places_are_computed_once_per_record_and_dropped_with_it() -> None:
    from kvproof.rules.layout import places

    record = load_path(EXAMPLES / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json").obj
    first = places(record)
    assert places(record) is first and first
    entries = places._entries
    assert id(record) in entries
    key = id(record)
    del record, first
    gc.collect()
    assert key not in entries
