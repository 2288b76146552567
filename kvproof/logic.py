"""Arithmetic and boolean helpers that run on Python values and on z3 terms alike.

Python's ``and``/``or``/``not``/``if`` cannot be overloaded, so every rule body and every
simulator formula that the solver must also reason about is written with these helpers.
With concrete arguments they return plain ``bool``/``int``/``float`` values and never import
z3 (the ``check`` and ``simulate`` paths stay free of z3's import cost); as soon as one
argument is a z3 expression they return a z3 expression.

Division is the one place where the two worlds disagree: z3's integer ``/`` is Euclidean
and unconstrained at zero, Python's ``//`` floors and raises at zero.  ``div``/``mod`` pin
both to Python's floor semantics and give division by zero a defined value (``div(a, 0) ==
0``, ``mod(a, 0) == a``) so a rule body evaluates the same way in both worlds; rules that
divide declare prerequisites (``after=``) that make the divisor positive.
"""

from __future__ import annotations

import functools
import math
import sys
from functools import reduce
from typing import Any, Callable, Iterable

from .diagnostics import KvproofError

__all__ = [
    "is_symbolic", "If", "And", "Or", "Not", "Implies", "div", "mod", "cdiv", "round_up",
    "fdiv", "Sum", "Min", "Max", "gcd", "lcm", "concrete_bool", "z3",
    "concrete_only", "Present", "HasKey", "IsInt", "ValueOf", "IntIs", "SameScalar", "IsNumber", "RealOf", "OrDefault",
    "ConcreteRequired",
]

#: ``z3.AstRef`` once z3 is imported (by anyone): until then no value can be a z3 term.
_AST: type | None = None


@functools.cache  # the module, imported on first use: the check and simulate paths never import z3
def z3():
    """The z3 module, imported on first use."""
    import z3 as module

    return module


def _ast_class() -> type | None:
    """``z3.AstRef`` when z3 has been imported, else None (without importing it)."""
    global _AST
    if _AST is None:
        module = sys.modules.get("z3")
        ast = getattr(module, "AstRef", None) if module is not None else None
        if ast is None:
            return None
        _AST = ast
    return _AST


class ConcreteRequired(KvproofError, TypeError):
    """A helper that needs concrete operands (``gcd``, ``lcm``, a value that selects structure)
    was given symbolic ones. ``terms`` holds the symbolic operands as z3 terms (a symbolic
    optional field contributes the terms of its protocol attributes), so the solver can pin
    exactly the leaves they read and build its shape again."""

    #: The symbolic leaf object involved, when one is known (the solver's ``SymbolicFlowError``
    #: sets it); the z3 term read in Python control flow, likewise.
    leaf: Any = None
    term: Any = None

    def __init__(self, message: str, terms: Iterable[Any] = ()):
        super().__init__(message)
        self.terms = [term for value in terms for term in _terms_of(value)]


def _terms_of(value: Any) -> list:
    """The z3 terms a symbolic operand stands for (a protocol object: its symbolic attributes)."""
    if is_symbolic(value):
        return [value]
    out = []
    for attr in ("present", "value"):
        term = getattr(value, attr, None)
        if is_symbolic(term):
            out.append(term)
    return out


def _symbolic_operands(items: Iterable[Any]) -> list:
    """The operands that are z3 terms or symbolic optional fields."""
    return [v for v in items if is_symbolic(v) or is_symbolic(getattr(v, "present", None))]


_PLAIN_TYPES = frozenset({int, bool, float, str, type(None), list, tuple, dict})


#: Set by the concrete checker while it evaluates loaded documents (see :func:`concrete_only`):
#: the helpers then skip the per-argument test for z3 terms, the checker's hottest path.
_CONCRETE_ONLY = False


class concrete_only:
    """Context manager: every value passed to the helpers is concrete (no z3 term can occur)."""

    def __enter__(self):
        global _CONCRETE_ONLY
        self._previous = _CONCRETE_ONLY
        _CONCRETE_ONLY = True
        return self

    def __exit__(self, *exc):
        global _CONCRETE_ONLY
        _CONCRETE_ONLY = self._previous
        return False


def is_symbolic(*values: Any) -> bool:
    """True when any value is a z3 expression (an instance of ``z3.AstRef``; z3 is never imported
    here: before anyone imports it, nothing can be a z3 term)."""
    if _CONCRETE_ONLY:
        return False
    ast = _AST if _AST is not None else _ast_class()
    if ast is None:
        return False
    for value in values:
        if type(value) in _PLAIN_TYPES:
            continue
        if isinstance(value, ast):
            return True
    return False


def _flatten(values: tuple) -> list:
    if len(values) == 1 and not isinstance(values[0], (bool, int)) and isinstance(values[0], Iterable):
        if not is_symbolic(values[0]):
            return list(values[0])
    return list(values)


def If(condition: Any, then: Any, otherwise: Any) -> Any:
    if _CONCRETE_ONLY:
        return then if condition else otherwise
    if is_symbolic(condition, then, otherwise):
        z = z3()
        then, otherwise = _coerce_pair(then, otherwise)
        return z.If(condition, then, otherwise)
    return then if condition else otherwise


def _coerce_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Promote a Python bool/int next to a z3 term so z3.If sees matching sorts."""
    z = z3()
    if is_symbolic(a) and not is_symbolic(b):
        b = _lift(b, a)
    elif is_symbolic(b) and not is_symbolic(a):
        a = _lift(a, b)
    elif is_symbolic(a, b) and a.sort() != b.sort():
        if a.sort() == z.RealSort():
            b = z.ToReal(b)
        elif b.sort() == z.RealSort():
            a = z.ToReal(a)
    return a, b


def _lift(value: Any, like: Any) -> Any:
    z = z3()
    if isinstance(value, bool):
        return z.BoolVal(value)
    if isinstance(value, str):
        return _string_val(value)
    if isinstance(value, float):
        from fractions import Fraction

        return z.RealVal(Fraction(value))  # exactly the float (RealVal(0.1) would be 1/10)
    if like.sort() == z.RealSort():
        return z.RealVal(value)
    return z.IntVal(value)


def _string_val(value: str) -> Any:
    """A z3 string constant equal to ``value`` character by character (``z3.StringVal`` alone
    would read ``\\u{..}`` sequences in it as escapes)."""
    escaped = "".join(c if 32 <= ord(c) < 127 and c != "\\" else f"\\u{{{ord(c):x}}}" for c in value)
    return z3().StringVal(escaped)


def And(*values: Any) -> Any:
    if _CONCRETE_ONLY:
        return all(values[0]) if len(values) == 1 and isinstance(values[0], (list, tuple)) else all(values)
    items = _flatten(values)
    if is_symbolic(*items):
        return _connective(items, "And")
    return all(items)


def Or(*values: Any) -> Any:
    if _CONCRETE_ONLY:
        return any(values[0]) if len(values) == 1 and isinstance(values[0], (list, tuple)) else any(values)
    items = _flatten(values)
    if is_symbolic(*items):
        return _connective(items, "Or")
    return any(items)


def Not(value: Any) -> Any:
    if _CONCRETE_ONLY:
        return not value
    if is_symbolic(value):
        z = z3()
        if isinstance(value, z.BoolRef):  # z3.Not's sort cast, skipped: the same term
            return z.BoolRef(z.Z3_mk_not(value.ctx.ref(), value.as_ast()), value.ctx)
        return z.Not(value)
    return not value


def _connective(items: list, name: str) -> Any:
    """``z3.And``/``z3.Or`` of the items. When every item is a z3 Bool of one context the term is
    made by the same C call directly: z3's wrappers re-derive and compare the sorts of all
    arguments pairwise, which was most of the solver's encoding time (the term is identical)."""
    z = z3()
    if all(isinstance(item, z.BoolRef) for item in items):
        ctx = items[0].ctx
        if all(item.ctx is ctx for item in items):
            array = (z.Ast * len(items))(*[item.as_ast() for item in items])
            make = z.Z3_mk_and if name == "And" else z.Z3_mk_or
            return z.BoolRef(make(ctx.ref(), len(items), array), ctx)
    return getattr(z, name)(*items)


def Implies(premise: Any, conclusion: Any) -> Any:
    if _CONCRETE_ONLY:
        return (not premise) or bool(conclusion)
    if is_symbolic(premise, conclusion):
        return z3().Implies(premise, conclusion)
    return (not premise) or bool(conclusion)


def div(a: Any, b: Any) -> Any:
    """Floor division as Python's ``//``; ``div(a, 0) == 0`` in both worlds."""
    if type(a) is int and type(b) is int:  # the concrete common case (a planner's page arithmetic)
        return a // b if b else 0
    if is_symbolic(a, b):
        z = z3()
        # z3's Int division is Euclidean: equal to floor division for a positive divisor.
        if not is_symbolic(b):
            if b == 0:
                return z.IntVal(0)
            return a / b if b > 0 else (-a) / (-b)
        return z.If(b > 0, a / b, z.If(b < 0, (-a) / (-b), 0))
    if b == 0:
        return 0
    return a // b


def mod(a: Any, b: Any) -> Any:
    """Python's ``%`` (sign of the divisor); ``mod(a, 0) == a`` in both worlds."""
    if is_symbolic(a, b):
        return a - b * div(a, b)
    if b == 0:
        return a
    return a % b


def cdiv(a: Any, b: Any) -> Any:
    """vLLM's ``cdiv``: ``-(a // -b)``, the ceiling of a / b for a positive b."""
    if type(a) is int and type(b) is int:  # as div's
        return -(-a // b) if b else 0
    return -div(-a, b)


def round_up(a: Any, multiple: Any) -> Any:
    """vLLM's ``round_up``: the smallest multiple of ``multiple`` that is >= a."""
    return cdiv(a, multiple) * multiple


def fdiv(a: Any, b: Any) -> Any:
    """True division (Python float semantics concretely, exact reals symbolically)."""
    if is_symbolic(a, b):
        z = z3()
        a = z.ToReal(a) if is_symbolic(a) and a.sort() == z.IntSort() else a
        b = z.ToReal(b) if is_symbolic(b) and b.sort() == z.IntSort() else b
        return a / b
    return a / b


def Sum(*values: Any) -> Any:
    items = _flatten(values)
    if not items:
        return 0
    if is_symbolic(*items):
        return z3().Sum(*[_lift(v, _first_symbolic(items)) if not is_symbolic(v) else v for v in items])
    return sum(items)


def _first_symbolic(items: list) -> Any:
    return next(v for v in items if is_symbolic(v))


def Min(*values: Any) -> Any:
    items = _flatten(values)
    if is_symbolic(*items):
        return reduce(lambda acc, v: If(v < acc, v, acc), items[1:], items[0])
    return min(items)


def Max(*values: Any) -> Any:
    items = _flatten(values)
    if is_symbolic(*items):
        return reduce(lambda acc, v: If(v > acc, v, acc), items[1:], items[0])
    return max(items)


def gcd(*values: Any) -> int:
    """gcd of concrete values. Symbolic operands are refused with :class:`ConcreteRequired`
    (naming them): keep solver queries linear by pinning such factors (block sizes, alignments)
    per shape."""
    items = _flatten(values)
    if not _CONCRETE_ONLY:
        symbolic = _symbolic_operands(items)
        if symbolic:
            raise ConcreteRequired("gcd needs concrete operands; pin them per shape to keep queries linear", symbolic)
    return math.gcd(*items)


def lcm(*values: Any) -> int:
    """lcm of concrete values (see ``gcd``)."""
    items = _flatten(values)
    if not _CONCRETE_ONLY:
        symbolic = _symbolic_operands(items)
        if symbolic:
            raise ConcreteRequired("lcm needs concrete operands; pin them per shape to keep queries linear", symbolic)
    return math.lcm(*items)


def concrete_bool(value: Any) -> bool:
    """A concrete verdict as ``bool``; a z3 term that simplifies to a constant is accepted."""
    if is_symbolic(value):
        z = z3()
        simplified = z.simplify(value)
        if z.is_true(simplified):
            return True
        if z.is_false(simplified):
            return False
        raise TypeError(f"verdict is not concrete: {value}")
    return bool(value)


# --------------------------------------------------------------------------------------------
# Optional and loosely typed model fields.
#
# Concretely an optional field holds a value, ``None`` (JSON null) or ``ABSENT`` (no key); a
# ``Scalar`` evidence field holds any JSON scalar as written.  Symbolically (kvproof.solver) the
# same fields are objects with ``present`` (Bool), ``is_int`` (Bool) and ``value`` (Int) terms.
# Rule bodies read such fields only through these helpers so one body serves both worlds.


def Present(value: Any) -> Any:
    """The field holds a value (not absent, not null)."""
    if not _CONCRETE_ONLY and hasattr(value, "present") and is_symbolic(value.present):
        return value.present
    return value is not None and type(value).__name__ != "Absent"


def HasKey(value: Any) -> Any:
    """The document holds the key (its value may be null)."""
    if not _CONCRETE_ONLY and hasattr(value, "given") and is_symbolic(value.given):
        return value.given
    return type(value).__name__ != "Absent"


# A plain z3 term (a required field, or a term a body built) is a present value of its sort: an
# Int term holds an integer, a Real term a number, a Bool or String term neither.


def _is_sort(term: Any, name: str) -> bool:
    z = z3()
    return term.sort() == {"int": z.IntSort, "real": z.RealSort}[name]()


def IsInt(value: Any) -> Any:
    """The field holds an integer (a bool or a float is not one)."""
    if not _CONCRETE_ONLY:
        if is_symbolic(value):  # before the protocol: a z3 Int term's own ``is_int`` is z3's method
            return _is_sort(value, "int")
        if hasattr(value, "is_int") and is_symbolic(value.is_int):
            return value.is_int
    return type(value) is int


def ValueOf(value: Any, default: Any = 0) -> Any:
    """The integer value of an optional or scalar field; ``default`` when it holds none."""
    if not _CONCRETE_ONLY:
        if is_symbolic(value):
            return value if _is_sort(value, "int") else default
        if hasattr(value, "value") and is_symbolic(getattr(value, "value")):
            is_int = getattr(value, "is_int", None)
            if not is_symbolic(is_int):  # not the protocol's Bool: the value alone, as before
                return value.value
            if z3().is_false(is_int):  # a bool, float or string field: its payload is no integer
                return default
            if type(default) in (int, bool) and default == 0:
                return value.value  # the protocol's value is already 0 without an integer
            return If(is_int, value.value, default)
    if type(value) is int:
        return value
    return default


def IntIs(value: Any, predicate) -> Any:
    """The field holds an integer that satisfies ``predicate`` (a bool/float never does)."""
    return And(IsInt(value), predicate(ValueOf(value)))


def _leaf_same_scalar(leaf: Any, other: Any) -> Any:
    return leaf.same_scalar(other)


def SameScalar(a: Any, b: Any) -> Any:
    """Two evidence values are the same JSON value (``true`` is not ``1``, ``1.0`` is not ``1``,
    absent is not null).

    Symbolically a side that offers ``same_scalar`` (the solver's optional and scalar leaves:
    exact JSON identity) decides; plain z3 terms (required fields) are the same when their sorts
    match the other side's type and their values are equal."""
    if not _CONCRETE_ONLY:
        for x, y in ((a, b), (b, a)):
            same = getattr(x, "same_scalar", None)
            if same is not None and is_symbolic(getattr(x, "present", None)):
                # the settings and specs of a bundle compared pairwise on every shape: once
                return symbolic_memo(_leaf_same_scalar, x, y)
        if is_symbolic(a, b):
            return _same_plain(a, b)
        if is_symbolic(*(getattr(v, attr, None) for v in (a, b) for attr in ("is_int", "value", "present"))):
            # a protocol object without ``same_scalar``: presence, int-ness and integer value
            return And(Present(a) == Present(b), IsInt(a) == IsInt(b), ValueOf(a) == ValueOf(b))
    return type(a) is type(b) and a == b


def _same_plain(a: Any, b: Any) -> Any:
    """SameScalar where at least one side is a plain z3 term and neither speaks the protocol."""
    z = z3()
    if not is_symbolic(a):
        a, b = b, a
    sort = a.sort()
    if is_symbolic(b):
        return a == b if b.sort() == sort else False
    kind = {bool: z.BoolSort(), int: z.IntSort(), float: z.RealSort(), str: z.StringSort()}.get(type(b))
    if kind is None or kind != sort:
        return False  # absent, null, a list, or another JSON type
    return a == _lift(b, a)


def IsNumber(value: Any) -> Any:
    """The field holds a finite int or float (a bool is not a number here)."""
    if not _CONCRETE_ONLY:
        if is_symbolic(value):
            return _is_sort(value, "int") or _is_sort(value, "real")
        if hasattr(value, "is_number") and is_symbolic(value.is_number):
            return value.is_number
    return type(value) in (int, float) and math.isfinite(value)


def RealOf(value: Any) -> Any:
    """The exact value of a numeric field: a ``Fraction`` concretely (0 for a non-number), a z3
    Real symbolically, so float evidence compares exactly in both worlds."""
    if not _CONCRETE_ONLY:
        if is_symbolic(value):
            z = z3()
            if _is_sort(value, "int"):
                return z.ToReal(value)
            return value if _is_sort(value, "real") else z.RealVal(0)
        if hasattr(value, "real_value") and is_symbolic(value.real_value):
            return value.real_value
    if type(value) in (int, float) and math.isfinite(value):
        from fractions import Fraction

        return Fraction(value)
    from fractions import Fraction

    return Fraction(0)


def OrDefault(value: Any, default: Any) -> Any:
    """An optional field's value, or ``default`` when it is absent or null.

    Symbolically a field that offers ``or_default`` (the solver's leaves) builds the result
    itself, so any default works (``None``, a string: the result keeps its JSON type for
    ``SameScalar``); otherwise ``If(present, value, default)``."""
    if not _CONCRETE_ONLY and hasattr(value, "present") and is_symbolic(value.present):
        or_default = getattr(value, "or_default", None)
        if or_default is not None:
            return or_default(default)
        return If(value.present, value.value, default)
    if value is None or type(value).__name__ == "Absent":
        return default
    return value


# --------------------------------------------------------------------------------------------
# Plain operands: where a formula (kvproof.formulas) keeps its one fast path.

#: The operand types that can never stand for a z3 term (a solver leaf is none of them).
_SCALAR_TYPES = frozenset({int, bool, float, str, type(None)})


def concrete(*values: Any) -> bool:
    """True when every value is a plain Python int, bool, float, str or None (always inside
    :class:`concrete_only`): a formula may then compute with Python's own operators, stopping at
    the first failed test, and give the verdict its helper expression gives. A z3 term, a solver
    leaf (an optional field of a symbolic document) or any other object makes it False."""
    if _CONCRETE_ONLY:
        return True
    for value in values:
        if type(value) not in _SCALAR_TYPES:
            return False
    return True


__all__ += ["concrete"]


#: The symbolic results of :func:`symbolic_memo` by their inputs (z3 terms by id, kept alive with
#: the result so an id is never reused for another term).
_SYMBOLIC_MEMO: dict = {}
#: Entries kept before the memo starts again (a fuzz campaign encodes new shapes for hours):
#: ``prove VC007`` makes ~400.
_SYMBOLIC_MEMO_LIMIT = 100_000


def _memo_key(value: Any, terms: list, leaves: bool = False) -> Any:
    """A key of an input: a plain value by type and value, a z3 term by id (z3 makes one term of
    equal ones; appended to ``terms``), a tuple or list item by item; with ``leaves``, a solver
    leaf by its ``memo_key()`` (its terms' ids); None for anything else."""
    kind = type(value)
    if kind in (int, bool, float, str, type(None)):
        return (kind.__name__, value)
    if kind in (tuple, list):
        items = tuple(_memo_key(item, terms, leaves) for item in value)
        return None if None in items else (kind.__name__, items)
    ast = _AST if _AST is not None else _ast_class()
    if ast is not None and isinstance(value, ast):
        terms.append(value)
        return ("z3", value.get_id())
    if leaves:
        identity = getattr(type(value), "memo_key", None)  # a solver leaf that names its terms
        if identity is not None:
            key, kept = identity(value)
            terms.extend(kept)
            return ("leaf", key)
    return None


def symbolic_memo(compute: Callable[..., Any], *args: Any) -> Any:
    """``compute(*args)`` for a pure formula, remembered for the process when an input is a z3
    term: the symbolic documents of one kind name their leaves by path, so a mutation's unchanged
    views are its base's terms, and a dead rule's search asks the same view formulas on hundreds
    of shapes. The memo returns the term ``compute`` would build again (z3 terms are immutable).
    A solver leaf is keyed by its terms (``memo_key()``). Plain inputs are computed directly (the
    checker's path), and so is an input of any other type. A result read from the memo does not
    log the leaf reads building it would (:func:`symbolic_table`): ``compute`` must not fail on
    symbolic inputs."""
    if _CONCRETE_ONLY:
        return compute(*args)
    terms: list = []
    items = tuple(_memo_key(a, terms, leaves=True) for a in args)
    if not terms or None in items:
        return compute(*args)
    key = (compute.__module__, compute.__qualname__, items)
    known = _SYMBOLIC_MEMO.get(key)
    if known is None:
        if len(_SYMBOLIC_MEMO) >= _SYMBOLIC_MEMO_LIMIT:
            _SYMBOLIC_MEMO.clear()  # a pure memo: starting again changes no answer
        known = _SYMBOLIC_MEMO[key] = (compute(*args), terms)
    return known[0]


__all__ += ["symbolic_memo"]


#: The tables of :func:`symbolic_table` by owner and inputs, each with the terms of its key (kept
#: alive, so an id is never reused for another term).
_SYMBOLIC_TABLES: dict = {}


def symbolic_table(owner: str, *inputs: Any) -> dict | None:
    """A dict shared by every caller that names ``owner`` and passes inputs with the same terms
    (z3 terms by id, solver leaves by their terms' ids), for results that are pure functions of
    those inputs; None when no input is symbolic (the checker's path: the caller keeps its own).
    What the SS rules' record views ask of the same settings on hundreds of shapes is then built
    once. A result read from the table does not log the leaf reads building it would (the
    pinning protocol pins the leaf read last when a body fails): only results whose building
    cannot fail belong here."""
    if _CONCRETE_ONLY:
        return None
    terms: list = []
    items = tuple(_memo_key(a, terms, leaves=True) for a in inputs)
    if not terms or None in items:
        return None
    key = (owner, items)
    known = _SYMBOLIC_TABLES.get(key)
    if known is None:
        if len(_SYMBOLIC_TABLES) >= _SYMBOLIC_MEMO_LIMIT:
            _SYMBOLIC_TABLES.clear()  # pure results: starting again changes no answer
        known = _SYMBOLIC_TABLES[key] = ({}, terms)
    return known[0]


__all__ += ["symbolic_table"]
