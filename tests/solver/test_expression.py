"""The expression language of ``claim`` and ``explore``: an allow-list, bounded, located errors,
and the same meaning on concrete values and on z3 terms."""

from __future__ import annotations

import time

import pytest
import z3

from kvproof.cli import main
from kvproof.solver.expression import MAX_STEPS, ExpressionError, parse

EXAMPLE = "examples/minimax-m27-tp4/scheduler-dp0.json"


@pytest.mark.parametrize("source, column", [
    ("sim.plan.__builtins__['__import__']('os').system('true')", 43),
    ("doc.cache.__class__", 11),
    ("().__class__.__base__.__subclasses__()", 23),
    ("__import__('os')", 1),
    ("open('x')", 1),
    ("(lambda: 0)()", 2),
    ("'{0.__class__}'.format(doc)", 17),
    ("getattr(doc, 'x')", 1),
    ("f'{doc!r}'", 1),
    ("{doc: 1}", 1),
    ("(y := doc)", 2),
    ("1 << 100000", 1),
    ("(((9**256)**256)**256)**256", 25),
    ("doc.x % -0", 9),
    ("doc.x // (2 - 2)", 11),
    ("If", 1),
    ("demand", 1),
    ("demand.math", 8),
    ("[x for If in doc.cache.groups]", 8),
    ("doc.cache +", 12),
    ("  doc._private", 7),
    ("doc.x + 1e400", 9),  # parses as inf (the robustness campaign's seed 2026 found it: exit 4)
])
def test_forbidden_or_malformed_expressions_are_refused_with_their_position(source, column) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse(source)
    assert caught.value.line == 1 and caught.value.column == column, caught.value.render()
    assert caught.value.render().startswith(f"1:{column}: ")


def test_helpers_are_visible_inside_comprehensions() -> None:
    # the helpers were eval() locals, invisible in a comprehension's own scope (NameError)
    expression = parse("All(Implies(x > 0, Sum(If(y > x, 1, 0) for y in [1, 2, 3]) >= 0) for x in [1, 2])")
    assert expression.evaluate({"doc": None}) is True


@pytest.mark.parametrize("source", [
    "len([x for x in range(10**9)])",
    "len([1 for a in range(10000) for b in range(10000)])",
    "2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 * 2**64 "
    "* 2**64 * 2**64 * 2**64",
    "1e300 * 1e300 > 0",  # a float result that is not finite
])
def test_evaluation_is_bounded(source) -> None:
    start = time.perf_counter()
    with pytest.raises(ExpressionError):
        parse(source).evaluate({"doc": None})
    assert time.perf_counter() - start < 5


def test_the_step_budget_is_counted_not_timed() -> None:
    # each item costs two steps (the iteration and its element): a third of the budget fits, all of it does not
    assert parse(f"len([1 for a in range(100) for b in range({MAX_STEPS // 300})])").evaluate({}) == 100 * (MAX_STEPS // 300)
    with pytest.raises(ExpressionError, match=f"more than {MAX_STEPS} steps"):
        parse(f"len([1 for a in range(100) for b in range({MAX_STEPS // 100})])").evaluate({})


@pytest.mark.parametrize("op", ["//", "%", "/"])
def test_division_means_the_same_on_values_and_on_z3_terms(op) -> None:
    # Python's floor semantics, and a zero divisor's guarded value (x // 0 == 0, x % 0 == x, x / 0 == 0)
    expression = parse(f"a {op} b", ("a", "b"))
    a, b = z3.Int("a"), z3.Int("b")
    term = expression.evaluate({"a": a, "b": b})
    for x in (-7, -1, 0, 1, 7):
        for y in (-3, -1, 0, 1, 3):
            concrete = expression.evaluate({"a": x, "b": y})
            value = z3.simplify(z3.substitute(term, (a, z3.IntVal(x)), (b, z3.IntVal(y))))
            number = float(value.as_fraction()) if z3.is_rational_value(value) else value.as_long()
            assert number == pytest.approx(concrete), (x, op, y)


def test_the_escape_runs_nothing(tmp_path, capsys) -> None:
    marker = tmp_path / "escaped"
    code = main(["claim", f"sim.plan.__builtins__['__import__']('os').system('touch {marker}')"])
    assert code == 2 and not marker.exists()
    assert "1:" in capsys.readouterr().err


def test_cli_refusals_name_the_position(capsys) -> None:
    assert main(["claim", "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups) and doc.__class__"]) == 2
    assert "EXPRESSION 1:72: the attribute '__class__' is not allowed" in capsys.readouterr().err
    start = time.perf_counter()
    assert main(["explore", EXAMPLE, "--minimize", "(((9**256)**256)**256)**256", "--timeout", "5"]) == 2
    assert main(["explore", EXAMPLE, "--minimize", "len([x for x in range(10**9)])", "--open", "$.cache"]) == 2
    assert time.perf_counter() - start < 20
    err = capsys.readouterr().err
    assert "--minimize 1:25: an exponent must be a literal integer" in err
    assert "--minimize 1:17: ValueError: range of 1000000000 items" in err
