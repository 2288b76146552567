"""Symbolic instances of kvproof's attrs models for a bounded shape, and back.

A *template* (a JSON tree of the document kind, usually a shrunk example) fixes the shape:
the length of every list, the keys of every mapping and which optional nested objects exist
(absent, ``null`` or an object).  Everything else becomes a z3 term:

======================  ============================================================
model field             symbolic stand-in
======================  ============================================================
``int``                 ``Int`` with the axiom ``LD:int-range`` (0..2**53)
``SignedInt``           ``Int`` with ``LD:signed-range`` (-2**53..2**53)
``bool``                ``Bool``
``float``               ``Real`` on a dyadic grid (``SHAPE:float-grid``: multiples of 2**-10,
                        so a witness converts to a float exactly)
``str``                 a Python ``str`` pinned from the template (names, layer names, storage
                        ids: what bindings join on) or a z3 ``String`` (class names, kinds,
                        modes: what bodies compare); a ``Literal`` adds ``LD:literal``
optional leaf,          a :class:`SymValue`: a tag (absent / null / int / bool / float / str,
``Scalar``              ``LD:tag``) with one payload per tag; it offers ``given``, ``present``,
                        ``is_int``, ``value``, ``same_scalar``, ``or_default`` (the protocol of
                        :mod:`kvproof.logic`'s ``Present``/``HasKey``/``IsInt``/``ValueOf``/
                        ``SameScalar``/``OrDefault``) and Python's ``==`` semantics
                        (``1 == True == 1.0``, ``None`` equals nothing else)
======================  ============================================================

A required leaf is a plain z3 term: :mod:`kvproof.logic` reads a z3 term as a present value of
its sort.

The symbolic document is made of the model classes themselves (attrs does not check types), so a
rule's binding and body run on it unchanged.  :meth:`SymbolicDocument.concretize` evaluates a
z3 model back into attrs objects, :meth:`SymbolicDocument.tree` into their JSON tree through the
cattrs codec.
"""

from __future__ import annotations

import copy
import functools
import re
import types
import typing
from fractions import Fraction
from typing import Any, Callable, Iterable, Literal, get_args, get_origin

import attrs
import z3

from ..diagnostics import KvproofError
from ..logic import ConcreteRequired, _string_val
from ..models.codec import ABSENT, MAX_SAFE_INT, Scalar, SignedInt, unstructure
from ..rules.core import child
from .native import raw_api

__all__ = [
    "Policy", "SymValue", "Leaf", "SymbolicDocument", "ReadLog", "build", "schema_path",
    "FLOAT_GRID", "IDENTIFIER_FIELDS",
]

#: Float fields range over multiples of 1/FLOAT_GRID (exact in a float64).
FLOAT_GRID = 1024
#: String fields that name things other objects refer to: pinned from the template so bindings can
#: join on them in plain Python.
IDENTIFIER_FIELDS = frozenset({
    "name", "model", "provenance", "description", "layer_names", "layers", "storage_id", "device",
    "framework", "schema_version",
})

ABSENT_T, NULL_T, INT_T, BOOL_T, FLOAT_T, STR_T = range(6)
TAG_NAMES = {ABSENT_T: "absent", NULL_T: "null", INT_T: "int", BOOL_T: "bool", FLOAT_T: "float", STR_T: "str"}


@attrs.frozen
class Policy:
    """Which leaves of a template stay concrete.

    ``pinned`` and ``free`` hold *schema paths* (field names joined by dots, list indices dropped,
    mapping keys written ``*``: ``cache.groups.layer_specs.*.spec_type``) or bare field names.
    A string leaf is pinned when its field name is an identifier (``IDENTIFIER_FIELDS``) or it is
    listed in ``pinned``; a number or bool leaf only when listed in ``pinned``.  ``free`` wins.
    """

    pinned: frozenset[str] = frozenset()
    free: frozenset[str] = frozenset()

    def is_pinned(self, spath: str, kind: str) -> bool:
        name = spath.rsplit(".", 1)[-1]
        if spath in self.free or name in self.free:
            return False
        if spath in self.pinned or name in self.pinned:
            return True
        return kind == "str" and name in IDENTIFIER_FIELDS


def schema_path(spath: str, key: str) -> str:
    return f"{spath}.{key}" if spath else key


class SymbolicFlowError(ConcreteRequired, KvproofError):
    """A symbolic value reached Python control flow (``if``, ``and``, ``in``, ``bool()``).

    ``term`` is the z3 term (or None) and ``leaf`` the symbolic leaf (or None) that Python tried
    to read as a bool; the prover pins the leaves involved and builds the shape again. A kind of
    :class:`kvproof.logic.ConcreteRequired` (what ``gcd``/``lcm`` raise), so one ``except`` and
    one pinning protocol (``leaf``, ``terms``) serve both.
    """

    def __init__(self, message: str, term: Any = None, leaf: "Leaf | None" = None, terms: list | None = None):
        super().__init__(message)
        self.term = term
        self.leaf = leaf
        self.terms = list(terms or ()) + ([term] if term is not None else [])


def _no_bool(self) -> bool:
    raise SymbolicFlowError(
        f"symbolic value {self.path} used in Python control flow; write the body with kvproof.logic helpers",
        leaf=self._leaf)


class ReadLog:
    """The optional leaves whose symbolic protocol a rule body read, most recent last, while it
    records (``with log:``, which starts it empty). One per build of a shape's documents (its
    leaves hold it): when a body fails on a symbolic value (a helper that cannot take it), the
    leaf read last is pinned and the rule encoded again (:func:`kvproof.solver.encode.encode_rule`)."""

    __slots__ = ("leaves", "recording")

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self.recording = False

    def clear(self) -> None:
        self.leaves.clear()

    def __enter__(self) -> "ReadLog":
        self.leaves.clear()
        self.recording = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.recording = False


def _accessed(leaf: "Leaf") -> None:
    reads = leaf.reads
    if reads is not None and reads.recording:
        reads.leaves.append(leaf)


#: ``tag == value`` terms of :meth:`SymValue._is` by the tag term's id and the value, each with its
#: tag term (kept alive, so an id is never reused); a pure memo.
_TAG_TESTS: dict = {}
_TAG_TESTS_LIMIT = 200_000


class SymValue:
    """An optional or ``Scalar`` leaf: a tag with typed payloads."""

    __bool__ = _no_bool

    def __init__(self, leaf: "Leaf"):
        self._leaf = leaf
        self.path = leaf.path
        self.tag = leaf.tag
        self.ival = leaf.payload.get(INT_T)
        self.bval = leaf.payload.get(BOOL_T)
        self.rval = leaf.payload.get(FLOAT_T)
        self.sval = leaf.payload.get(STR_T)
        self._cache: dict[str, Any] = {}
        self._memo_key: tuple[tuple, list] | None = None

    def memo_key(self) -> tuple[tuple, list]:
        """What every term built from this value depends on (its leaf's kind, possible tags and
        terms: equal names give equal terms), and those terms: :func:`kvproof.logic.symbolic_table`.
        Made once: the value's terms never change."""
        if self._memo_key is None:
            leaf = self._leaf
            terms = [t for t in (self.tag, self.ival, self.bval, self.rval, self.sval) if t is not None]
            key = (leaf.kind, leaf.optional, tuple(leaf.tags), repr(leaf.literal),
                   tuple(t.get_id() if t is not None else None for t in (self.tag, self.ival, self.bval, self.rval, self.sval)))
            self._memo_key = (key, terms)
        return self._memo_key

    @property
    def given(self):
        """The document holds the key (``HasKey``)."""
        _accessed(self._leaf)
        if "given" not in self._cache:
            self._cache["given"] = self.tag != ABSENT_T if ABSENT_T in self._leaf.tags else z3.BoolVal(True)
        return self._cache["given"]

    @property
    def present(self):
        """The key holds a value, not null (``Present``)."""
        _accessed(self._leaf)
        if "present" not in self._cache:
            nonvalue = tuple(t for t in (ABSENT_T, NULL_T) if t in self._leaf.tags)
            if not nonvalue:
                self._cache["present"] = z3.BoolVal(True)
            else:
                key = (self.tag.get_id(), "present", nonvalue)
                known = _TAG_TESTS.get(key)
                if known is None:
                    if len(_TAG_TESTS) >= _TAG_TESTS_LIMIT:
                        _TAG_TESTS.clear()
                    known = _TAG_TESTS[key] = (z3.And(*[self.tag != t for t in nonvalue]), self.tag)
                self._cache["present"] = known[0]
        return self._cache["present"]

    @property
    def is_int(self):
        """The value is an integer (``IsInt``; a bool or a float is not one)."""
        _accessed(self._leaf)
        if "is_int" not in self._cache:
            self._cache["is_int"] = self.tag == INT_T if INT_T in self._leaf.tags else z3.BoolVal(False)
        return self._cache["is_int"]

    @property
    def value(self):
        """``ValueOf`` semantics for integer and scalar leaves (the integer when it holds one,
        else 0); the payload itself for a bool, float or string leaf (``ValueOf`` then answers its
        default: ``is_int`` is false)."""
        _accessed(self._leaf)
        if "value" not in self._cache:
            kind = self._leaf.kind
            if kind in ("int", "signed", "scalar"):
                value = z3.If(self.is_int, self.ival, 0) if self.ival is not None else z3.IntVal(0)
            else:
                value = self._leaf.payload[_TYPE_TAG[kind]]
            self._cache["value"] = value
        return self._cache["value"]

    def __repr__(self) -> str:
        return f"SymValue({self.path})"

    __hash__ = object.__hash__

    # -- Python's == across JSON scalars ------------------------------------------------------
    def _has(self, tag: int) -> bool:
        return tag in self._leaf.tags

    def _is(self, tag: int):
        if not self._has(tag):
            return z3.BoolVal(False)
        # a tag test is asked of every leaf by nearly every rule, on every build of every shape:
        # one term per tag term and value for the process (equal names make equal tag terms)
        key = (self.tag.get_id(), tag)
        known = _TAG_TESTS.get(key)
        if known is None:
            if len(_TAG_TESTS) >= _TAG_TESTS_LIMIT:
                _TAG_TESTS.clear()
            known = _TAG_TESTS[key] = (self.tag == tag, self.tag)
        return known[0]

    def _numeric_tag(self):
        """Holds a number in Python's sense (int, bool or float): what ``==`` compares."""
        return z3.Or(self._is(INT_T), self._is(BOOL_T), self._is(FLOAT_T))

    @property
    def is_number(self):
        """``IsNumber``: a finite int or float (a bool is not a number here)."""
        _accessed(self._leaf)
        return z3.Or(self._is(INT_T), self._is(FLOAT_T))

    @property
    def real_value(self):
        """``RealOf``: the exact value of an int or a float, 0 for anything else."""
        _accessed(self._leaf)
        if "real_value" not in self._cache:
            real = z3.RealVal(0)
            if self.rval is not None:
                real = z3.If(self._is(FLOAT_T), self.rval, real)
            if self.ival is not None:
                real = z3.If(self._is(INT_T), z3.ToReal(self.ival), real)
            self._cache["real_value"] = real
        return self._cache["real_value"]

    def same_scalar(self, other: Any):
        """Exactly the same JSON value (``SameScalar``): same type and value; absent is not null."""
        if isinstance(other, SymValue):
            parts = [z3.And(self._is(t), other._is(t)) for t in (ABSENT_T, NULL_T)]
            for tag, mine, theirs in ((INT_T, self.ival, other.ival), (BOOL_T, self.bval, other.bval),
                                      (FLOAT_T, self.rval, other.rval), (STR_T, self.sval, other.sval)):
                if mine is not None and theirs is not None:
                    parts.append(z3.And(self._is(tag), other._is(tag), mine == theirs))
            return z3.Or(*parts)
        if other is ABSENT:
            return self._is(ABSENT_T)
        if other is None:
            return self._is(NULL_T)
        if isinstance(other, bool) or (z3.is_expr(other) and z3.is_bool(other)):
            return z3.And(self._is(BOOL_T), self.bval == other) if self.bval is not None else z3.BoolVal(False)
        if isinstance(other, int) or (z3.is_expr(other) and other.sort() == z3.IntSort()):
            return z3.And(self._is(INT_T), self.ival == other) if self.ival is not None else z3.BoolVal(False)
        if isinstance(other, float) or (z3.is_expr(other) and other.sort() == z3.RealSort()):
            value = z3.RealVal(Fraction(other)) if isinstance(other, float) else other
            return z3.And(self._is(FLOAT_T), self.rval == value) if self.rval is not None else z3.BoolVal(False)
        if isinstance(other, str) or (z3.is_expr(other) and other.sort() == z3.StringSort()):
            value = _string_val(other) if isinstance(other, str) else other
            return z3.And(self._is(STR_T), self.sval == value) if self.sval is not None else z3.BoolVal(False)
        if isinstance(other, (list, dict)):
            return z3.BoolVal(False)  # a JSON container is no scalar
        raise TypeError(f"cannot compare {self.path} with {other!r}")

    def or_default(self, default: Any) -> Any:
        """``OrDefault`` (``kvproof.logic.OrDefault`` delegates here): the value, or ``default``
        when absent or null. A ``None`` default gives the same leaf with absent read as null, so
        the result keeps its JSON type for ``SameScalar``; a scalar leaf gives its number (a bool
        as 0/1, as Python's ``==`` and ordering see it)."""
        if default is None:
            view = copy.copy(self)
            view.tag = z3.If(self.tag == ABSENT_T, z3.IntVal(NULL_T), self.tag) if self._has(ABSENT_T) else self.tag
            view._cache = {}
            view._memo_key = None  # another tag term: another key
            return view
        kind = self._leaf.kind
        if kind == "scalar":
            payload = self.numeric()
        elif kind in ("int", "signed"):
            payload = self.value
        else:
            payload = self._leaf.payload[_TYPE_TAG[kind]]
        if isinstance(default, str):
            default = _string_val(default)
        elif isinstance(default, bool):
            default = z3.BoolVal(default)
        elif isinstance(default, float):
            default = z3.RealVal(Fraction(default))
        elif isinstance(default, int):
            default = z3.IntVal(default)
        return z3.If(self.present, payload, default)

    def numeric(self):
        """The number it holds (int, bool as 0/1, float) as a term; Int when only ints are possible."""
        if not self._has(BOOL_T) and not self._has(FLOAT_T):
            return self.ival if self.ival is not None else z3.IntVal(0)
        real = z3.RealVal(0)
        if self.rval is not None:
            real = self.rval
        if self.bval is not None:
            real = z3.If(self._is(BOOL_T), z3.If(self.bval, z3.RealVal(1), z3.RealVal(0)), real)
        if self.ival is not None:
            real = z3.If(self._is(INT_T), z3.ToReal(self.ival), real)
        return real

    def __eq__(self, other: Any):
        _accessed(self._leaf)
        if other is None or other is ABSENT or isinstance(other, (str, bool, int, float, Fraction)):
            # a constant: the same term every time (a rule that compares a leaf with each row
            # of a table, as the SS rules do, asks thousands of times per shape)
            key = ("eq", type(other), other)
            if key not in self._cache:
                self._cache[key] = self._eq(other)
            return self._cache[key]
        return self._eq(other)

    def _eq(self, other: Any):  # noqa: PLR0911 - one case per JSON scalar type
        if isinstance(other, SymValue):
            parts = [z3.And(self._numeric_tag(), other._numeric_tag(), _num_eq(self.numeric(), other.numeric())),
                     z3.And(self._is(NULL_T), other._is(NULL_T)),
                     z3.And(self._is(ABSENT_T), other._is(ABSENT_T))]
            if self.sval is not None and other.sval is not None:
                parts.append(z3.And(self._is(STR_T), other._is(STR_T), self.sval == other.sval))
            return z3.Or(*parts)
        if other is None:
            return self._is(NULL_T)
        if other is ABSENT:
            return self._is(ABSENT_T)
        if isinstance(other, str):
            return z3.And(self._is(STR_T), self.sval == _string_val(other)) if self.sval is not None else z3.BoolVal(False)
        if isinstance(other, (bool, int, float, Fraction)):
            if self.sval is not None and not self.is_number_possible():
                return z3.BoolVal(False)
            return z3.And(self._numeric_tag(), _num_eq(self.numeric(), _num_const(other)))
        if z3.is_expr(other):
            if other.sort() == z3.StringSort():
                return z3.And(self._is(STR_T), self.sval == other) if self.sval is not None else z3.BoolVal(False)
            if other.sort() == z3.BoolSort():
                other = z3.If(other, z3.IntVal(1), z3.IntVal(0))
            return z3.And(self._numeric_tag(), _num_eq(self.numeric(), other))
        return NotImplemented

    def is_number_possible(self) -> bool:
        return any(self._has(t) for t in (INT_T, BOOL_T, FLOAT_T))

    def __ne__(self, other: Any):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else z3.Not(equal)

    # -- ordering and arithmetic act on the number (concretely they raise on null/absent) ----
    def _n(self):
        if self.sval is not None and not self.is_number_possible():
            return self.sval
        return self.numeric()

    def __lt__(self, o): return _num_op(self._n(), _unwrap(o), "lt")
    def __le__(self, o): return _num_op(self._n(), _unwrap(o), "le")
    def __gt__(self, o): return _num_op(self._n(), _unwrap(o), "gt")
    def __ge__(self, o): return _num_op(self._n(), _unwrap(o), "ge")
    def __add__(self, o): return _num_op(self._n(), _unwrap(o), "add")
    def __radd__(self, o): return _num_op(_unwrap(o), self._n(), "add")
    def __sub__(self, o): return _num_op(self._n(), _unwrap(o), "sub")
    def __rsub__(self, o): return _num_op(_unwrap(o), self._n(), "sub")
    def __mul__(self, o): return _num_op(self._n(), _unwrap(o), "mul")
    def __rmul__(self, o): return _num_op(_unwrap(o), self._n(), "mul")
    def __truediv__(self, o): return _num_op(self._n(), _unwrap(o), "truediv")
    def __rtruediv__(self, o): return _num_op(_unwrap(o), self._n(), "truediv")
    def __neg__(self): return -self._n()


def _unwrap(value: Any) -> Any:
    if isinstance(value, SymValue):
        return value._n()
    if isinstance(value, Fraction):
        return z3.RealVal(value)
    return value


def _num_const(value: Any):
    if isinstance(value, bool):
        return z3.IntVal(int(value))
    if isinstance(value, int):
        return z3.IntVal(value)
    return z3.RealVal(Fraction(value))


def _num_eq(a, b):
    return _num_op(a, b, "eq")


def _num_op(a: Any, b: Any, op: str):
    a, b = _align(a, b)
    if op == "eq":
        return a == b
    if op == "lt":
        return a < b
    if op == "le":
        return a <= b
    if op == "gt":
        return a > b
    if op == "ge":
        return a >= b
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "truediv":
        a = z3.ToReal(a) if z3.is_expr(a) and a.sort() == z3.IntSort() else a
        b = z3.ToReal(b) if z3.is_expr(b) and b.sort() == z3.IntSort() else b
        return a / b
    raise ValueError(op)


def _align(a: Any, b: Any):
    """Bring two numeric operands (z3 terms or Python numbers) to one sort."""
    if isinstance(a, bool):
        a = int(a)
    if isinstance(b, bool):
        b = int(b)
    if isinstance(a, float):
        a = z3.RealVal(Fraction(a))
    if isinstance(b, float):
        b = z3.RealVal(Fraction(b))
    if z3.is_expr(a) and z3.is_expr(b):
        if a.sort() == z3.RealSort() and b.sort() == z3.IntSort():
            b = z3.ToReal(b)
        elif b.sort() == z3.RealSort() and a.sort() == z3.IntSort():
            a = z3.ToReal(a)
    return a, b


# --------------------------------------------------------------------------------------------
# Required leaves are plain z3 terms: ``kvproof.logic`` reads a z3 term as a present value of its
# sort (``IsInt``/``ValueOf`` of an Int, ``IsNumber``/``RealOf`` of an Int or a Real,
# ``SameScalar`` by sort and value), so they need no protocol attributes of their own.


def _required(term: Any) -> Any:
    return term


# --------------------------------------------------------------------------------------------
# Leaves


_TYPE_TAG = {"int": INT_T, "signed": INT_T, "bool": BOOL_T, "float": FLOAT_T, "str": STR_T}


@attrs.define(eq=False)
class Leaf:
    """One symbolic leaf of a document: its terms, its domain axioms and its template value."""

    path: str
    spath: str
    kind: str  # int | signed | float | bool | str | scalar
    optional: bool  # held in a SymValue (absent/null possible, or any scalar)
    tags: tuple[int, ...] = ()
    literal: tuple | None = None
    tag: Any = None
    payload: dict = attrs.field(factory=dict)
    term: Any = None  # the stand-in placed into the model object
    template: Any = ABSENT
    makers: list = attrs.field(factory=list)  # (name, key, thunk) of the domain axioms, built on demand
    label: str = ""
    var_names: list = attrs.field(factory=list)
    #: The read log of the build the leaf belongs to (None: reads are not recorded).
    reads: ReadLog | None = None

    _axioms: list | None = None

    @property
    def name(self) -> str:
        """The leaf's path prefixed with its document label (unique within a shape)."""
        return f"{self.label}{self.path}"

    @property
    def axioms(self) -> list[tuple[str, Any]]:
        """The named domain axioms of the leaf."""
        if self._axioms is None:
            self._axioms = [(name, _axiom(name, key, make)) for name, key, make in self.makers]
        return self._axioms

    # -- domain ---------------------------------------------------------------------------------
    def make(self, label: str) -> None:
        self.label = label
        name = f"{label}{self.path}"
        if not self.optional:
            self.term = _required(self._payload(self._base_tag(), name))
            return
        self.tag = _const(f"{name}#tag", "int")
        self.var_names.append(f"{name}#tag")
        tag_var, tags = self.tag, self.tags
        self.makers.append((f"LD:tag {label}{self.path}", tags, lambda: z3.Or(*[tag_var == t for t in tags])))
        for tag in self.tags:
            if tag in (ABSENT_T, NULL_T):
                continue
            self.payload[tag] = self._payload(tag, f"{name}#{TAG_NAMES[tag]}")
        self.term = SymValue(self)

    def _base_tag(self) -> int:
        return _TYPE_TAG[self.kind]

    def _payload(self, tag: int, name: str):
        label_path = name
        self.var_names.append(name)
        if tag == INT_T:
            term = _const(name, "int")
            low = 0 if self.kind == "int" else -MAX_SAFE_INT
            axiom = "LD:int-range" if self.kind == "int" else ("LD:scalar-range" if self.kind == "scalar" else "LD:signed-range")
            self.makers.append((f"{axiom} {label_path}", low, lambda: z3.And(term >= low, term <= MAX_SAFE_INT)))
            return term
        if tag == BOOL_T:
            return _const(name, "bool")
        if tag == FLOAT_T:
            term = _const(name, "real")
            grid = _const(f"{name}#grid", "int")
            self.var_names.append(f"{name}#grid")
            keep = self.template if isinstance(self.template, float) and not isinstance(self.template, bool) else None

            def grid_axiom():
                on_grid = z3.And(term * FLOAT_GRID == z3.ToReal(grid), grid >= -MAX_SAFE_INT, grid <= MAX_SAFE_INT)
                # the template's own value (0.9 is not on the grid) stays possible
                return on_grid if keep is None else z3.Or(on_grid, term == z3.RealVal(Fraction(keep)))

            self.makers.append((f"SHAPE:float-grid {label_path}", ("keep", keep), grid_axiom))
            return term
        if tag == STR_T:
            term = _const(name, "str")
            if self.literal is not None:
                options = self.literal
                self.makers.append((f"LD:literal {label_path}", options,
                                    lambda: z3.Or(*[term == z3.StringVal(v) for v in options])))
            return term
        raise ValueError(tag)

    # -- the template as a preference -----------------------------------------------------------
    def template_eq(self):
        """The leaf equals its template value (None when there is nothing to compare)."""
        value = self.template
        if not self.optional:
            if value is ABSENT or value is None:
                return None
            try:
                return self.term == _const_like(value, self.term)
            except (TypeError, z3.Z3Exception):
                return None
        tag = _tag_of(value)
        if tag is None or tag not in self.tags:
            return None
        parts = [self.tag == tag]
        if tag in self.payload:
            try:
                parts.append(self.payload[tag] == _const_like(value, self.payload[tag]))
            except (TypeError, z3.Z3Exception):
                return None
        return z3.And(*parts)

    # -- back to Python -------------------------------------------------------------------------
    def decode(self, model: z3.ModelRef) -> Any:
        if not self.optional:
            return _decode(model.eval(self.term, model_completion=True), self.kind)
        tag = model.eval(self.tag, model_completion=True).as_long()
        if tag == ABSENT_T:
            return ABSENT
        if tag == NULL_T:
            return None
        return _decode(model.eval(self.payload[tag], model_completion=True), {INT_T: "int", BOOL_T: "bool", FLOAT_T: "float", STR_T: "str"}[tag])


#: Pure memoization (z3 terms are immutable, and the axiom is a function of its key).
_AXIOMS: dict[tuple, Any] = {}


def _axiom(name: str, key: Any, make) -> Any:
    """A leaf's named domain axiom: a function of its name (which holds the variable's) and
    ``key`` (the tags, the lower bound, the literal's options, the float template kept), so
    made once per run, not once per shape."""
    term = _AXIOMS.get((name, key))
    if term is None:
        term = _AXIOMS[(name, key)] = make()
    return term


_MAKERS = {"int": z3.Int, "bool": z3.Bool, "real": z3.Real, "str": z3.String}


@functools.cache  # pure memoization: z3 makes the equal term of a name and sort every time
def _const(name: str, sort: str) -> Any:
    """The z3 constant of that name and sort (the same term z3 makes anew each time: shapes and
    their mutations share most leaf names, and making one is most of building a document)."""
    return _MAKERS[sort](name)


def _tag_of(value: Any) -> int | None:
    if value is ABSENT:
        return ABSENT_T
    if value is None:
        return NULL_T
    if isinstance(value, bool):
        return BOOL_T
    if isinstance(value, int):
        return INT_T
    if isinstance(value, float):
        return FLOAT_T
    if isinstance(value, str):
        return STR_T
    return None


def _const_like(value: Any, term: Any):
    sort = term.sort()
    if sort == z3.IntSort():
        if type(value) is not int:
            raise TypeError(value)
        return z3.IntVal(value)
    if sort == z3.RealSort():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(value)
        return z3.RealVal(Fraction(value))
    if sort == z3.BoolSort():
        if not isinstance(value, bool):
            raise TypeError(value)
        return z3.BoolVal(value)
    if sort == z3.StringSort():
        if not isinstance(value, str):
            raise TypeError(value)
        return _string_val(value)
    raise TypeError(sort)


_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]+)\}")


def _decode(value: Any, kind: str) -> Any:
    if kind in ("int", "signed", "scalar") and z3.is_int_value(value):
        return value.as_long()
    if kind == "bool" or z3.is_bool(value):
        return z3.is_true(value)
    if kind == "float" or z3.is_rational_value(value):
        fraction = value.as_fraction() if z3.is_rational_value(value) else Fraction(value.as_long())
        as_float = float(fraction)
        if Fraction(as_float) != fraction:
            raise ValueError(f"real {fraction} is not a float64")
        return as_float
    if z3.is_string_value(value):
        return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), value.as_string())
    if z3.is_int_value(value):
        return value.as_long()
    raise TypeError(f"cannot decode {value} as {kind}")


# --------------------------------------------------------------------------------------------
# Building a symbolic document


def _unwrap_optional(type_: Any) -> tuple[Any, bool]:
    """(base type, null allowed)."""
    if get_origin(type_) in (typing.Union, types.UnionType):
        args = [a for a in get_args(type_) if a is not type(None)]
        nullable = len(args) != len(get_args(type_))
        if len(args) != 1:
            raise TypeError(f"unsupported union {type_}")
        return args[0], nullable
    return type_, False


def _leaf_kind(type_: Any) -> tuple[str, tuple | None] | None:
    if type_ is Scalar:
        return "scalar", None
    if type_ is SignedInt:
        return "signed", None
    if type_ is bool:
        return "bool", None
    if type_ is int:
        return "int", None
    if type_ is float:
        return "float", None
    if type_ is str:
        return "str", None
    if get_origin(type_) is Literal:
        options = get_args(type_)
        if all(isinstance(o, str) for o in options):
            return "str", tuple(options)
        raise TypeError(f"unsupported literal {type_}")
    return None


@functools.cache  # pure memoization of typing.get_type_hints (a class's annotations do not change)
def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


@attrs.define(eq=False)
class SymbolicDocument:
    """A symbolic document: the model object, its leaves and its named domain axioms."""

    obj: Any
    cls: type
    label: str
    leaves: list[Leaf]

    def var_map(self) -> dict[str, Leaf]:
        """z3 constant name -> leaf."""
        return {name: leaf for leaf in self.leaves for name in leaf.var_names}

    @property
    def axioms(self) -> list[tuple[str, Any]]:
        return [axiom for leaf in self.leaves for axiom in leaf.axioms]

    def concretize(self, model: z3.ModelRef, touched: set[str] | None = None) -> Any:
        """The attrs object the z3 model describes (leaves outside ``touched`` keep their
        template value: no rule reads them)."""
        return _concretize(self, model, touched)

    def tree(self, model: z3.ModelRef, touched: set[str] | None = None) -> Any:
        """The JSON tree (through the cattrs codec)."""
        return unstructure(self.concretize(model, touched))


def build(cls: type, template: Any, label: str = "", policy: Policy | None = None,
          reads: ReadLog | None = None) -> SymbolicDocument:
    """A symbolic instance of ``cls`` shaped like the JSON tree ``template``; its leaves record
    their reads in ``reads``."""
    policy = policy or Policy()
    leaves: list[Leaf] = []
    obj = _build_attrs(cls, template, "$", "", label, policy, leaves)
    if reads is not None:
        for leaf in leaves:
            leaf.reads = reads
    return SymbolicDocument(obj, cls, label, leaves)


def _build_attrs(cls: type, tree: Any, path: str, spath: str, label: str, policy: Policy, leaves: list) -> Any:
    if not isinstance(tree, dict):
        raise TypeError(f"template at {path} is not an object for {cls.__name__}")
    hints = _hints(cls)
    kwargs = {}
    for field in attrs.fields(cls):
        key = field.alias or field.name
        type_, nullable = _unwrap_optional(hints[field.name])
        absentable = field.default is ABSENT
        value = tree.get(key, ABSENT)
        kwargs[key] = _build_value(type_, nullable, absentable, value, child(path, key),
                                   schema_path(spath, key), label, policy, leaves)
    return cls(**kwargs)


def _build_value(type_: Any, nullable: bool, absentable: bool, value: Any, path: str, spath: str,
                 label: str, policy: Policy, leaves: list) -> Any:
    leaf_kind = _leaf_kind(type_)
    if leaf_kind is not None:
        kind, literal = leaf_kind
        return _build_leaf(kind, literal, nullable, absentable, value, path, spath, label, policy, leaves)
    # containers and nested objects: their existence is part of the shape
    if value is ABSENT:
        if not absentable:
            raise TypeError(f"template lacks required {path}")
        return ABSENT
    if value is None:
        if not nullable:
            raise TypeError(f"template has null at non-nullable {path}")
        return None
    origin = get_origin(type_)
    if origin is list:
        (item_type,) = get_args(type_)
        item_type, item_nullable = _unwrap_optional(item_type)
        return [
            _build_value(item_type, item_nullable, False, item, child(path, index), spath, label, policy, leaves)
            for index, item in enumerate(value)
        ]
    if origin is dict:
        _key_type, item_type = get_args(type_)
        item_type, item_nullable = _unwrap_optional(item_type)
        return {
            key: _build_value(item_type, item_nullable, False, item, child(path, key), schema_path(spath, "*"),
                              label, policy, leaves)
            for key, item in value.items()
        }
    if attrs.has(type_):
        return _build_attrs(type_, value, path, spath, label, policy, leaves)
    raise TypeError(f"unsupported field type {type_} at {path}")


def _build_leaf(kind: str, literal: tuple | None, nullable: bool, absentable: bool, value: Any, path: str,
                spath: str, label: str, policy: Policy, leaves: list) -> Any:
    if literal is not None and len(literal) == 1 and not nullable and not absentable:
        return literal[0]
    if policy.is_pinned(spath, kind):
        if value is ABSENT and not absentable:
            raise TypeError(f"template lacks pinned required {path}")
        return value
    optional = kind == "scalar" or nullable or absentable
    tags: tuple[int, ...] = ()
    if optional:
        tags = tuple(
            ([ABSENT_T] if absentable else []) + ([NULL_T] if nullable or kind == "scalar" else [])
            + ([INT_T, BOOL_T, FLOAT_T] if kind == "scalar" else [_TYPE_TAG[kind]])
        )
    leaf = Leaf(path=path, spath=spath, kind=kind, optional=optional, tags=tags, literal=literal, template=value)
    leaf.make(label)
    leaves.append(leaf)
    return leaf.term


def _concretize(doc: "SymbolicDocument", model: z3.ModelRef, touched: set[str] | None) -> Any:
    by_term = {leaf.term.get_id(): leaf for leaf in doc.leaves if not leaf.optional}

    def leaf_value(item: Any) -> Any:
        leaf = item._leaf if isinstance(item, SymValue) else by_term.get(item.get_id())
        if leaf is not None and touched is not None and not any(n in touched for n in leaf.var_names):
            return leaf.template  # no rule reads it: keep the template's value
        if isinstance(item, SymValue):
            return item._leaf.decode(model)
        return _decode(model.eval(item, model_completion=True), _sort_kind(item))

    return _rebuild(doc.obj, leaf_value)


#: Results of :func:`per_conjunct` by function and term id, each with its term (kept alive, so an id
#: is never reused for another term); started again past the limit (a pure memo).
_CONJUNCT_MEMO: dict = {}
_CONJUNCT_MEMO_LIMIT = 200_000


def per_conjunct(walk: Callable[[list], set[str]], terms: Iterable[Any]) -> set[str]:
    """``walk(terms)`` for a walk whose answer over several terms is the union of its answers
    over each (:func:`collect_consts`, :func:`~kvproof.solver.pins.nonlinear_consts`), remembered
    per conjunct: a rule's terms are the conjunction of its instances', and a mutation changes a
    few instances of its base's, so the others are walked once for every shape of a kind."""
    out: set[str] = set()
    stack = list(terms)
    while stack:
        term = stack.pop()
        key = (walk, term.get_id())
        known = _CONJUNCT_MEMO.get(key)
        if known is not None:
            out |= known[0]
            continue
        if z3.is_and(term) and term.num_args() > 1:
            children = term.children()
            found = per_conjunct(walk, children)
        else:
            found = walk([term])
        if len(_CONJUNCT_MEMO) >= _CONJUNCT_MEMO_LIMIT:
            _CONJUNCT_MEMO.clear()
        _CONJUNCT_MEMO[key] = (frozenset(found), term)
        out |= found
    return out


def collect_consts(terms: Iterable[Any]) -> set[str]:
    """Names of the uninterpreted constants of z3 terms (a DAG walk on z3's C API)."""
    api = raw_api()
    ctx = z3.main_ctx().ref().value
    ast_id, ast_kind, to_app, num_args = api.ast_id, api.ast_kind, api.to_app, api.num_args
    app_decl, decl_kind, app_arg = api.app_decl, api.decl_kind, api.app_arg
    seen: set[int] = set()
    out: set[str] = set()
    stack = [t.as_ast().value for t in terms]
    app_kind = z3.Z3_APP_AST
    uninterpreted = z3.Z3_OP_UNINTERPRETED
    while stack:
        ast = stack.pop()
        ident = ast_id(ctx, ast)
        if ident in seen:
            continue
        seen.add(ident)
        if ast_kind(ctx, ast) != app_kind:
            continue
        app = to_app(ctx, ast)
        count = num_args(ctx, app)
        if count == 0:
            decl = app_decl(ctx, app)
            if decl_kind(ctx, decl) == uninterpreted:
                out.add(api.symbol_string(ctx, api.decl_name(ctx, decl)).decode("utf-8"))
        else:
            for index in range(count):
                stack.append(app_arg(ctx, app, index))
    return out


def _rebuild(value: Any, leaf_value) -> Any:
    if value is ABSENT or value is None:
        return value
    if isinstance(value, SymValue) or z3.is_expr(value):
        return leaf_value(value)
    if isinstance(value, list):
        return [_rebuild(item, leaf_value) for item in value]
    if isinstance(value, dict):
        return {key: _rebuild(item, leaf_value) for key, item in value.items()}
    if attrs.has(type(value)):
        return type(value)(**{(f.alias or f.name): _rebuild(getattr(value, f.name), leaf_value) for f in attrs.fields(type(value))})
    return value


def template_tree(doc: "SymbolicDocument") -> Any:
    """The JSON tree of a symbolic document's template values (after a repair, the repaired ones)."""
    by_term = {leaf.term.get_id(): leaf for leaf in doc.leaves if not leaf.optional}

    def leaf_value(item: Any) -> Any:
        if isinstance(item, SymValue):
            return item._leaf.template
        return by_term[item.get_id()].template

    return unstructure(_rebuild(doc.obj, leaf_value))


def _sort_kind(term: Any) -> str:
    sort = term.sort()
    if sort == z3.IntSort():
        return "int"
    if sort == z3.BoolSort():
        return "bool"
    if sort == z3.RealSort():
        return "float"
    return "str"

