"""The logic helpers agree on ints and on z3 terms; one rule body evaluated both ways."""

from __future__ import annotations

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from kvproof import logic as L
from kvproof.rules.registry import get_rule

ints = st.integers(min_value=-10**6, max_value=10**6)


def _eval(term):
    return z3.simplify(term)


@given(ints, ints)
def test_div_and_mod_match_python_floor_semantics(a, b) -> None:
    x, y = z3.Ints("x y")
    s = z3.Solver()
    s.add(x == a, y == b)
    assert s.check() == z3.sat
    model = s.model()
    expected_div = 0 if b == 0 else a // b
    expected_mod = a if b == 0 else a % b
    assert L.div(a, b) == expected_div
    assert L.mod(a, b) == expected_mod
    assert model.eval(L.div(x, y)).as_long() == expected_div
    assert model.eval(L.mod(x, y)).as_long() == expected_mod
    assert model.eval(L.div(x, b)).as_long() == expected_div


@given(ints, st.integers(min_value=1, max_value=10**4))
def test_cdiv_and_round_up(a, b) -> None:
    x = z3.Int("x")
    assert L.cdiv(a, b) == -(-a // b)
    assert L.round_up(a, b) == -(-a // b) * b
    assert _eval(z3.substitute(L.cdiv(x, b), (x, z3.IntVal(a)))).as_long() == -(-a // b)


@given(st.lists(ints, min_size=1, max_size=5))
def test_min_max_sum(values) -> None:
    syms = [z3.Int(f"v{i}") for i in range(len(values))]
    subst = [(s, z3.IntVal(v)) for s, v in zip(syms, values)]
    assert _eval(z3.substitute(L.Max(syms), *subst)).as_long() == max(values) == L.Max(values)
    assert _eval(z3.substitute(L.Min(syms), *subst)).as_long() == min(values) == L.Min(values)
    assert _eval(z3.substitute(L.Sum(syms), *subst)).as_long() == sum(values) == L.Sum(values)


def test_concrete_helpers_return_python_values() -> None:
    assert L.If(True, 1, 2) == 1 and L.And(True, 1 > 0) is True and L.Or() is False
    assert L.Implies(False, False) is True and L.Not(True) is False
    assert L.fdiv(13697, 495) == 13697 / 495


def test_gcd_and_lcm_refuse_symbolic_operands() -> None:
    assert L.lcm(32768, 528) == 1_081_344
    with pytest.raises(TypeError):
        L.lcm(z3.Int("a"), 2)


def test_importing_logic_does_not_import_z3() -> None:
    import subprocess
    import sys

    code = "import sys, kvproof.logic, kvproof.rules.registry, kvproof.commands.check; print('z3' in sys.modules, 'hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


class _SymbolicGroup:
    """A profile cache group whose fields are z3 terms (the solver's stand-in)."""

    class _Opt:
        def __init__(self, name):
            self.present = z3.Bool(f"{name}.present")
            self.given = z3.Bool(f"{name}.given")
            self.is_int = z3.Bool(f"{name}.is_int")
            self.value = z3.Int(f"{name}.value")

    def __init__(self):
        self.kind = z3.String("kind")
        self.blocks_per_request = self._Opt("bpr")
        self.prefill_checkpoint_blocks = self._Opt("pcb")
        self.prefill_checkpoint_alignment = self._Opt("pca")
        self.sliding_window = self._Opt("sw")
        self.page_size_bytes = z3.Int("page")


@given(
    kind=st.sampled_from(["attention", "state", "convolution"]),
    count=st.one_of(st.none(), st.integers(-3, 3)),
    alignment=st.one_of(st.none(), st.integers(-3, 20)),
)
@pytest.mark.parametrize("rule_id", ["PF001", "PF006", "PF008"])
def test_one_rule_body_gives_the_same_verdict_on_values_and_on_z3_terms(rule_id, kind, count, alignment) -> None:
    from kvproof.models.codec import ABSENT
    from kvproof.models.profile import CacheGroup

    rule = get_rule(rule_id)
    concrete = CacheGroup("g", kind, 1, 16, 4096, blocks_per_request=ABSENT if count is None else count,
                          prefill_checkpoint_blocks=ABSENT if count is None else count,
                          prefill_checkpoint_alignment=ABSENT if alignment is None else alignment)
    symbolic = _SymbolicGroup()
    term = rule.body(symbolic)

    def bind(opt, value):
        return [opt.present == (value is not None), opt.given == (value is not None),
                opt.is_int == (value is not None), opt.value == (value if value is not None else 0)]

    facts = [symbolic.kind == z3.StringVal(kind), *bind(symbolic.blocks_per_request, count),
             *bind(symbolic.prefill_checkpoint_blocks, count), *bind(symbolic.prefill_checkpoint_alignment, alignment)]
    solver = z3.Solver()
    solver.add(*facts)
    assert solver.check() == z3.sat
    symbolic_verdict = z3.is_true(solver.model().eval(term, model_completion=True))
    assert symbolic_verdict == rule.body(concrete)


# --------------------------------------------------------------------------------------------
# docs/solver-requests.md 1-6: the symbolic side of the optional-field helpers


def _holds(term) -> bool:
    """A closed term's truth value (a Python bool passes through)."""
    if isinstance(term, bool):
        return term
    value = z3.simplify(term)
    assert z3.is_true(value) or z3.is_false(value), term
    return z3.is_true(value)


class _Leaf:
    """A minimal solver leaf: the protocol attributes plus ``same_scalar`` and ``or_default``."""

    def __init__(self, value):
        self.concrete = value
        self.present = z3.BoolVal(value is not None)
        self.is_int = z3.BoolVal(type(value) is int)
        self.value = z3.IntVal(value if type(value) is int else 0)
        self.calls: list = []

    def same_scalar(self, other):
        self.calls.append(("same_scalar", other))
        return z3.BoolVal(type(other) is type(self.concrete) and other == self.concrete)

    def or_default(self, default):
        self.calls.append(("or_default", default))
        return "delegated"


@pytest.mark.parametrize("other", [True, 1, 1.0, None, "1"])
def test_same_scalar_delegates_to_a_leaf_on_either_side(other) -> None:
    leaf = _Leaf(True)
    assert _holds(L.SameScalar(leaf, other)) == L.SameScalar(True, other)
    assert _holds(L.SameScalar(other, leaf)) == L.SameScalar(other, True)
    assert leaf.calls == [("same_scalar", other)] * 2


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5]),
                         st.sampled_from(["", "none", "align", "\\u{61}lign"]))


def _term_of(value):
    """A plain z3 term holding ``value`` (what a required leaf of that type is)."""
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        return z3.IntVal(value)
    if isinstance(value, float):
        return z3.RealVal(value)
    return L._string_val(value)


@given(JSON_SCALARS.filter(lambda v: v is not None), JSON_SCALARS)
def test_same_scalar_of_plain_terms_is_exact(a, b) -> None:
    # F104: a required string (or bool, or float) leaf was "the same" as anything with ValueOf 0
    expected = L.SameScalar(a, b)
    assert _holds(L.SameScalar(_term_of(a), b)) == expected
    assert _holds(L.SameScalar(b, _term_of(a))) == expected
    if b is not None:
        assert _holds(L.SameScalar(_term_of(a), _term_of(b))) == expected


def test_or_default_delegates_and_lifts_strings() -> None:
    leaf = _Leaf(None)
    assert L.OrDefault(leaf, None) == "delegated" and leaf.calls == [("or_default", None)]
    # a protocol object without or_default: If(present, value, default), a str default lifted exactly
    opt = _SymbolicGroup._Opt("mode")
    opt.value = z3.String("mode.value")
    term = L.OrDefault(opt, "\\u{61}lign")
    default = z3.simplify(z3.substitute(term, (opt.present, z3.BoolVal(False))))
    assert z3.simplify(z3.Length(default)).as_long() == len("\\u{61}lign") == 10  # not read as an escape
    assert _holds(L.If(z3.Bool("c"), "x", z3.String("s")).arg(1) == z3.StringVal("x"))


@pytest.mark.parametrize("default", [0, 7, -1])
@pytest.mark.parametrize("value", [None, 5])
def test_value_of_honours_its_default_symbolically(value, default) -> None:
    opt = _SymbolicGroup._Opt("x")
    term = L.ValueOf(opt, default)
    facts = [(opt.is_int, z3.BoolVal(value is not None)), (opt.value, z3.IntVal(value if value is not None else 0))]
    assert z3.simplify(z3.substitute(term, *facts)).as_long() == L.ValueOf(value, default)


@pytest.mark.parametrize("make, value", [
    (z3.Int, 3), (z3.Real, 2.5), (z3.Bool, True), (z3.String, "align"),
])
def test_plain_terms_are_present_values_of_their_sort(make, value) -> None:
    term = make("t")
    facts = (term, _term_of(value))

    def at(result):
        return z3.simplify(z3.substitute(result, facts)) if z3.is_expr(result) else result

    assert _holds(L.IsInt(term)) == L.IsInt(value)
    assert _holds(L.IsNumber(term)) == L.IsNumber(value)
    assert _holds(L.Present(term)) and _holds(L.HasKey(term))
    assert at(L.ValueOf(term, 9)) == at(_term_of(L.ValueOf(value, 9))) if L.IsInt(value) else L.ValueOf(term, 9) == 9
    assert _holds(at(L.RealOf(term)) == z3.RealVal(L.RealOf(value)))
    assert _holds(at(L.IntIs(term, lambda n: n > 2))) == L.IntIs(value, lambda n: n > 2)
    assert L.OrDefault(term, None) is term


def test_gcd_and_lcm_name_their_symbolic_operands() -> None:
    a, b = z3.Int("a"), z3.Int("b")
    with pytest.raises(L.ConcreteRequired) as caught:
        L.gcd(a, 4, b)
    assert isinstance(caught.value, TypeError)
    assert [t.get_id() for t in caught.value.terms] == [a.get_id(), b.get_id()]
    leaf = _SymbolicGroup._Opt("unit")
    with pytest.raises(L.ConcreteRequired) as caught:
        L.lcm([16, leaf])
    assert {str(t) for t in caught.value.terms} == {"unit.present", "unit.value"}
    with L.concrete_only():
        assert L.gcd(12, 18) == 6 and L.lcm([4, 6]) == 12


def test_is_symbolic_recognises_z3_terms_by_class() -> None:
    class Leaf(z3.ArithRef):  # a subclass defined outside z3's modules
        pass

    class Impostor:
        pass

    Impostor.__module__ = "z3.not_a_term"
    leaf = Leaf(z3.Int("n").as_ast(), z3.main_ctx())
    assert L.is_symbolic(leaf) and L.is_symbolic(1, z3.IntVal(2)) and not L.is_symbolic(Impostor(), 1, "x", None)
    with L.concrete_only():
        assert not L.is_symbolic(leaf)
