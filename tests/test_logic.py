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
