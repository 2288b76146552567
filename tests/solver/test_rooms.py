"""The solver's rooms: one encoder and pinning protocol, state owned by its session, one replay of
the documents an answer stands for, exceptions under KvproofError, arrows that run down only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import z3

from kvproof import logic
from kvproof.diagnostics import KvproofError
from kvproof.rules import prefix_caching
from kvproof.rules.registry import all_rules
from kvproof.solver.calls import Config
from kvproof.solver.encode import read_symbolically, strict_bool
from kvproof.solver.pins import DEFAULT_PINS, NeedPins
from kvproof.solver.session import Session
from kvproof.solver.shapes import Bound, base_shapes
from kvproof.solver.symbolic import SymValue
from kvproof.solver.witnesses import replay

SOLVER = Path(__file__).resolve().parents[2] / "kvproof" / "solver"


def _profile_session() -> Session:
    shape = min(base_shapes("profile", Bound()), key=lambda s: s.size)
    return Session(shape, all_rules(), Config(), set(DEFAULT_PINS))


def _optional_leaf(session: Session):
    return next(leaf for leaf in session.leaves() if isinstance(leaf.term, SymValue))


def _required_int_leaf(session: Session):
    return next(leaf for leaf in session.leaves()
                if not leaf.optional and z3.is_expr(leaf.term) and leaf.term.sort() == z3.IntSort())


def test_the_solver_imports_nothing_above_it() -> None:
    """solver -> rules -> sim -> models, logic: no module of kvproof/solver imports commands, cli or fuzz."""
    above = ("kvproof.commands", "kvproof.cli", "kvproof.fuzz")
    for path in sorted(SOLVER.rglob("*.py")):
        package = "kvproof." + ".".join(path.relative_to(SOLVER.parent).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names = [f"{base}.{node.module}" if node.level and node.module else (node.module or base)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            assert not [n for n in names if n.startswith(above)], f"{path.name} imports {names}"


def test_reads_are_recorded_in_the_log_of_the_session_that_built_the_leaf() -> None:
    first, second = _profile_session(), _profile_session()
    leaf = _optional_leaf(first)
    assert leaf.reads is first.reads and first.reads is not second.reads
    with first.reads:
        leaf.term.present  # noqa: B018 - a read of the leaf's protocol
    assert first.reads.leaves == [leaf] and second.reads.leaves == []
    leaf.term.present  # noqa: B018 - not recording: nothing is logged
    assert first.reads.leaves == [leaf]


def test_a_helper_that_needs_a_concrete_value_asks_for_its_leaf_without_patching_modules() -> None:
    session = _profile_session()
    leaf = _required_int_leaf(session)
    with strict_bool():
        assert prefix_caching.gcd is logic.gcd  # the rule modules' helpers are their own
    with pytest.raises(NeedPins) as need:
        read_symbolically(lambda: logic.gcd(leaf.term, 4), session.var_leaf, session.built_pins, session.reads)
    assert need.value.spaths == {leaf.spath}


def test_a_failure_that_names_no_new_leaf_propagates() -> None:
    session = _profile_session()
    with pytest.raises(ZeroDivisionError):
        read_symbolically(lambda: 1 // 0, session.var_leaf, session.built_pins, session.reads)


def test_a_fork_learns_its_pins_alone() -> None:
    session = _profile_session()
    twin = session.fork()
    assert twin.reads is session.reads  # one build, one log, until one of them builds again
    value = twin.evaluate(lambda documents: logic.gcd(documents[0].obj.resources.max_num_tokens, 4) > 0)
    assert z3.is_true(z3.simplify(value))  # evaluated on the template's value, pinned
    assert "resources.max_num_tokens" in twin.pins and "resources.max_num_tokens" not in session.pins
    assert twin.reads is not session.reads


def test_replay_gives_each_document_the_role_of_its_folder() -> None:
    text = Path(__file__).resolve().parents[2].joinpath("examples").glob("**/*.json")
    profile = next(p for p in text if '"resources"' in p.read_text() and '"cache_groups"' in p.read_text())
    replayed = replay([("probe/profile.json", profile.read_text()), ("profile.json", profile.read_text())],
                      "counterexample")
    assert replayed.loaded
    assert [d.role for d in replayed.documents] == ["probe", "checked"]
    assert [d.file for d in replayed.documents] == ["counterexample/probe/profile.json", "counterexample/profile.json"]


def test_a_document_that_does_not_load_is_said_so() -> None:
    replayed = replay([("profile.json", "{")], "witness")
    assert not replayed.loaded and replayed.refusing
    assert replayed.not_loaded("witness").startswith("the witness does not load: LD")


@pytest.mark.parametrize("name", [
    "kvproof.solver.expression:ExpressionError", "kvproof.solver.explore:GeometryNotSymbolic",
    "kvproof.solver.explore_geometry:GeometryExploreError", "kvproof.solver.explore_geometry:NotPlanned",
    "kvproof.solver.explore_geometry:NotSymbolic", "kvproof.solver.explore_geometry:BudgetExhausted",
    "kvproof.solver.symbolic:SymbolicFlowError", "kvproof.solver.pins:NeedPins",
])
def test_solver_exceptions_are_kvproof_errors(name: str) -> None:
    import importlib

    module, cls = name.split(":")
    assert issubclass(getattr(importlib.import_module(module), cls), KvproofError)


def test_solver_exceptions_keep_their_other_bases() -> None:
    from kvproof.solver.explore import GeometryNotSymbolic
    from kvproof.solver.explore_geometry import GeometryExploreError
    from kvproof.solver.expression import ExpressionError
    from kvproof.solver.symbolic import SymbolicFlowError

    assert issubclass(ExpressionError, ValueError) and issubclass(GeometryExploreError, ValueError)
    assert issubclass(GeometryNotSymbolic, ValueError) and issubclass(SymbolicFlowError, logic.ConcreteRequired)


def test_one_need_pins() -> None:
    import kvproof.fuzz.parity as parity

    assert not [name for name in vars(parity) if "NeedPins" in name]
    defined = [path.name for path in SOLVER.rglob("*.py") if "class NeedPins" in path.read_text()]
    assert defined == ["pins.py"]
