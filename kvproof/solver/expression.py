"""The expression language of ``kvproof claim EXPRESSION`` and ``kvproof explore --minimize/--maximize``.

One small language, parsed with :mod:`ast`, checked against an allow-list and run by the
interpreter below (never by ``eval``). It reads documents and computes with the
:mod:`kvproof.logic` helpers, so one expression means the same on z3 terms (the solver) and on
loaded documents (the replay of a counterexample or an optimum):

* names: the document (``doc``; ``bundle`` for a bundle claim), ``ABSENT``, the variables of
  comprehensions; the helpers (:data:`HELPERS`) and the formula modules ``demand``, ``pages``,
  ``concurrency`` (also as ``sim.demand`` ...) only as the function called;
* literals (numbers, strings, ``True``/``False``/``None``), tuples and lists;
* ``+ - * / // % **``: ``//`` and ``%`` are :func:`kvproof.logic.div`/:func:`~kvproof.logic.mod`
  (Python's floor semantics, ``x // 0 == 0``, ``x % 0 == x``) and ``/`` is true division with
  ``x / 0 == 0``, in both worlds; a divisor that is the constant 0 is refused; ``**`` takes a
  literal exponent from 0 to :data:`MAX_EXPONENT`;
* comparisons (chained ones are ``And`` of the pairs), ``is``, ``in``; ``and``/``or``/``not`` and
  ``x if c else y`` are ``And``/``Or``/``Not``/``If`` (short-circuited when the condition is
  concrete);
* a model field (``doc.cache.num_blocks``: an attribute not starting with ``_`` of a kvproof
  document object, never a method), an item of a list or a mapping (concrete index or key);
* list comprehensions and generator expressions (``for`` over a list, a mapping's keys or a
  bounded ``range``; ``if`` filters on concrete conditions).

Everything else is refused before anything runs, with the ``line:column`` of the offending
token (exit 2): dunder or private names and attributes, attributes of modules, calls of anything
but the helpers, lambdas, assignments, f-strings, sets and dicts, bit operations. Evaluation is
bounded by :data:`MAX_STEPS` (deterministic: steps, not seconds), integers by
:data:`MAX_INT_BITS` bits and ``range`` by :data:`MAX_RANGE` items, so no expression can run
long or grow memory without bound.
"""

from __future__ import annotations

import ast
import math
import types
from typing import Any, Callable, Iterable

from .. import logic
from ..diagnostics import KvproofError
from ..formulas import concurrency, pages
from ..formulas import blocks_per_request as demand
from ..models.codec import ABSENT
from .symbolic import SymbolicFlowError

__all__ = ["ExpressionError", "Expression", "parse", "HELPERS", "symbolic_value"]

#: Longest expression source (characters): an expression is one formula, not a program.
MAX_SOURCE_CHARS = 10_000
#: Most AST nodes, and deepest nesting, of one expression.
MAX_NODES = 2_000
MAX_DEPTH = 64
#: Largest literal exponent of ``**``.
MAX_EXPONENT = 64
#: Largest integer (in bits) a literal or a concrete result may have.
MAX_INT_BITS = 1024
#: Longest string literal.
MAX_STRING_CHARS = 1_000
#: Most items of one ``range``.
MAX_RANGE = 10_000
#: Most evaluation steps (nodes visited plus items iterated) of one evaluation.
MAX_STEPS = 200_000

#: Modules whose public functions an expression may call (``demand.full_attention_blocks(...)``).
FORMULA_MODULES = ("demand", "pages", "concurrency")


class ExpressionError(ValueError, KvproofError):
    """An expression the language refuses, or that cannot be evaluated (exit 2).

    ``line``/``column`` (1-based) locate the offending token. ``retry`` marks an evaluation error
    on symbolic operands, which the solver's pinning protocol may cure (pin the leaf, try again)."""

    def __init__(self, message: str, node: Any = None, line: int | None = None, column: int | None = None,
                 retry: bool = False):
        if isinstance(node, ast.Attribute) and getattr(node, "end_col_offset", None) is not None:
            line, column = node.end_lineno, node.end_col_offset - len(node.attr) + 1  # the name after the dot
        elif node is not None and hasattr(node, "lineno"):
            line, column = node.lineno, node.col_offset + 1
        self.message = message
        self.line = line
        self.column = column
        self.retry = retry
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.line}:{self.column}: " if self.line is not None else ""
        return f"{where}{self.message}"

    def shifted(self, columns: int) -> "ExpressionError":
        """The position in the user's text: :func:`parse` reads it without its leading blanks."""
        if self.line == 1 and self.column is not None and columns:
            self.column += columns
            self.args = (self.render(),)
        return self


# -- helpers -----------------------------------------------------------------------------------


def _range(*args: Any) -> range:
    if not 1 <= len(args) <= 3 or not all(type(a) is int for a in args):
        raise TypeError("range takes one to three concrete integers")
    if len(args) == 3 and args[2] == 0:
        raise ValueError("range step must not be zero")
    out = range(*args)
    if len(out) > MAX_RANGE:
        raise ValueError(f"range of {len(out)} items (at most {MAX_RANGE})")
    return out


def _abs(value: Any) -> Any:
    return logic.If(value < 0, -value, value) if logic.is_symbolic(value) else abs(value)


def _len(value: Any) -> int:
    if not isinstance(value, (list, tuple, dict, str, range)):
        raise TypeError(f"len of {type(value).__name__}")
    return len(value)


def _lcm(*values: Any) -> Any:
    """``lcm``, stopping as soon as the running value passes :data:`MAX_INT_BITS`."""
    items = logic._flatten(values)
    if any(_symbolic(item) for item in items) or not items:
        return logic.lcm(*values)
    out = 1
    for item in items:
        out = logic.lcm(out, item)
        if type(out) is int and out.bit_length() > MAX_INT_BITS:
            raise ValueError(f"the lcm has more than {MAX_INT_BITS} bits")
    return out


#: The functions an expression may call, by name.
HELPERS: dict[str, Callable[..., Any]] = {
    **{name: getattr(logic, name) for name in (
        "If", "And", "Or", "Not", "Implies", "div", "mod", "cdiv", "round_up", "fdiv", "Sum", "Min", "Max",
        "gcd", "Present", "HasKey", "IsInt", "ValueOf", "SameScalar", "IsNumber", "RealOf", "OrDefault")},
    "All": lambda items: logic.And(*list(items)),
    "Any": lambda items: logic.Or(*list(items)),
    "lcm": _lcm, "sum": logic.Sum, "min": logic.Min, "max": logic.Max, "abs": _abs, "len": _len, "range": _range,
    "zip": lambda *lists: list(zip(*lists)), "enumerate": lambda items: list(enumerate(items)),
}


def _constants() -> dict[str, Any]:
    return {"ABSENT": ABSENT}


def _formula_functions() -> dict[tuple[str, ...], Callable[..., Any]]:
    """``(module, function)`` and ``("sim", module, function)`` for every public function a
    formula module defines itself (not what it imports)."""
    out: dict[tuple[str, ...], Callable[..., Any]] = {}
    for name, module in zip(FORMULA_MODULES, (demand, pages, concurrency)):
        for attr, value in vars(module).items():
            if not attr.startswith("_") and isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                out[(name, attr)] = value
                out[("sim", name, attr)] = value
    return out


# -- the checker -------------------------------------------------------------------------------

_COMPARE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Compare, ast.Call, ast.keyword,
    ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Name, ast.List, ast.Tuple, ast.ListComp,
    ast.GeneratorExp, ast.comprehension, ast.Load, ast.Store, ast.And, ast.Or, ast.Not, ast.UAdd, ast.USub,
    *_ARITHMETIC, *_COMPARE,
)
_DESCRIBE = {
    ast.Lambda: "a lambda", ast.NamedExpr: "an assignment (:=)", ast.Dict: "a dict", ast.Set: "a set",
    ast.DictComp: "a dict comprehension", ast.SetComp: "a set comprehension", ast.JoinedStr: "an f-string",
    ast.FormattedValue: "an f-string", ast.Starred: "a starred argument (*x)", ast.Await: "await",
    ast.Yield: "yield", ast.YieldFrom: "yield", ast.Invert: "the operator ~", ast.BitAnd: "the operator &",
    ast.BitOr: "the operator |", ast.BitXor: "the operator ^", ast.LShift: "the operator <<",
    ast.RShift: "the operator >>", ast.MatMult: "the operator @",
}


class Expression:
    """A checked expression; :meth:`evaluate` runs it on documents (concrete or symbolic)."""

    def __init__(self, source: str, tree: ast.Expression, free: frozenset[str], shift: int = 0):
        self.source = source
        self.tree = tree
        self.free = free
        self.shift = shift

    def evaluate(self, values: dict[str, Any]) -> Any:
        """The expression's value with the free names bound to ``values`` (e.g. ``{"doc": obj}``)."""
        try:
            return _Interpreter(values).run(self.tree.body)
        except ExpressionError as exc:
            raise exc.shifted(self.shift) from None

    def __call__(self, **values: Any) -> Any:
        return self.evaluate(values)


def parse(source: str, free: Iterable[str] = ("doc",)) -> Expression:
    """Check ``source`` against the language; ``free`` are the document names it may read.
    Raises :class:`ExpressionError` (with the position) for anything the language refuses."""
    free = frozenset(free)
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("the expression is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise ExpressionError(f"the expression is longer than {MAX_SOURCE_CHARS} characters")
    if "\x00" in source:
        raise ExpressionError("the expression holds a NUL character", line=1, column=source.index("\x00") + 1)
    text = source.lstrip(" \t")  # leading blanks would be an indentation error
    shift = len(source) - len(text)
    try:
        tree = ast.parse(text, "<expression>", mode="eval")
    except SyntaxError as exc:
        lines = text.splitlines() or [""]
        line = min(max(exc.lineno or 1, 1), len(lines))
        column = exc.offset if exc.offset and exc.offset <= len(lines[line - 1]) + 1 else len(lines[line - 1]) + 1
        raise ExpressionError(f"not an expression: {exc.msg}", line=line, column=column).shifted(shift) from None
    except (RecursionError, MemoryError):
        raise ExpressionError("the expression is nested too deeply") from None
    try:
        _Checker(free).visit_root(tree)
    except ExpressionError as exc:
        raise exc.shifted(shift) from None
    return Expression(source, tree, free, shift)


class _Checker:
    """Walks the tree once: allowed node types, names in scope, callees, literal bounds."""

    def __init__(self, free: frozenset[str]):
        self.free = free
        self.count = 0
        self.functions = _formula_functions()
        self.constants = _constants()

    def visit_root(self, tree: ast.Expression) -> None:
        self.visit(tree.body, frozenset(), 0)

    def visit(self, node: ast.AST, scope: frozenset[str], depth: int) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise ExpressionError(f"the expression has more than {MAX_NODES} parts", node)
        if depth > MAX_DEPTH:
            raise ExpressionError(f"the expression is nested deeper than {MAX_DEPTH} levels", node)
        if not isinstance(node, _ALLOWED):
            what = _DESCRIBE.get(type(node), type(node).__name__)
            raise ExpressionError(f"{what} is not allowed in an expression", node)
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is not None:
            method(node, scope, depth)
            return
        self.children(node, scope, depth)

    def children(self, node: ast.AST, scope: frozenset[str], depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.AST) and not isinstance(child, (ast.expr_context, ast.operator, ast.boolop,
                                                                       ast.unaryop, ast.cmpop)):
                self.visit(child, scope, depth + 1)
            elif not isinstance(child, _ALLOWED):
                what = _DESCRIBE.get(type(child), type(child).__name__)
                raise ExpressionError(f"{what} is not allowed in an expression", node)

    def _Name(self, node: ast.Name, scope: frozenset[str], depth: int) -> None:
        name = node.id
        if name.startswith("_"):
            raise ExpressionError(f"the name {name!r} is not allowed (names starting with _ are private)", node)
        if name in scope or name in self.free or name in self.constants:
            return
        if name in HELPERS:
            raise ExpressionError(f"{name} is a helper: call it, {name}(...)", node)
        if name in FORMULA_MODULES or name == "sim":
            raise ExpressionError(f"{name} is a module: call one of its functions, {name}.<function>(...)", node)
        known = ", ".join(sorted(self.free | set(self.constants)))
        raise ExpressionError(f"unknown name {name!r} (an expression reads {known} and the variables of its "
                              "comprehensions, and calls the helpers)", node)

    def _Attribute(self, node: ast.Attribute, scope: frozenset[str], depth: int) -> None:
        if node.attr.startswith("_"):
            raise ExpressionError(f"the attribute {node.attr!r} is not allowed (attributes starting with _ "
                                  "are private)", node)
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in scope and (root.id in FORMULA_MODULES or root.id == "sim"):
            raise ExpressionError(f"{_dotted(node)}: the attributes of a module are not values (only its "
                                  "functions can be called)", node)
        self.visit(node.value, scope, depth + 1)

    def _Constant(self, node: ast.Constant, scope: frozenset[str], depth: int) -> None:
        value = node.value
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, float):
            if not math.isfinite(value):  # 1e400 parses as inf: no solver value, no document value
                raise ExpressionError("the number literal is not finite", node)
            return
        if isinstance(value, int):
            if value.bit_length() > MAX_INT_BITS:
                raise ExpressionError(f"the integer literal has more than {MAX_INT_BITS} bits", node)
            return
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                raise ExpressionError(f"the string literal is longer than {MAX_STRING_CHARS} characters", node)
            return
        raise ExpressionError(f"the literal {type(value).__name__} is not allowed", node)

    def _BinOp(self, node: ast.BinOp, scope: frozenset[str], depth: int) -> None:
        if not isinstance(node.op, _ARITHMETIC):
            raise ExpressionError(f"{_DESCRIBE.get(type(node.op), type(node.op).__name__)} is not allowed in an "
                                  "expression", node)
        if isinstance(node.op, ast.Pow):
            exponent = node.right
            if not (isinstance(exponent, ast.Constant) and type(exponent.value) is int
                    and 0 <= exponent.value <= MAX_EXPONENT):
                raise ExpressionError(f"an exponent must be a literal integer from 0 to {MAX_EXPONENT}", exponent)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and _constant_zero(node.right):
            raise ExpressionError("division by zero: the divisor is the constant 0", node.right)
        self.visit(node.left, scope, depth + 1)
        self.visit(node.right, scope, depth + 1)

    def _Call(self, node: ast.Call, scope: frozenset[str], depth: int) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in HELPERS and func.id not in scope:
            pass
        elif isinstance(func, ast.Attribute) and _chain(func) in self.functions and _chain(func)[0] not in scope:
            pass
        else:
            what = _dotted(func) or (f"the method .{func.attr}()" if isinstance(func, ast.Attribute) else "this value")
            raise ExpressionError(f"{what} cannot be called: an expression calls only the helpers "
                                  f"({', '.join(HELPERS)}) and the functions of "
                                  f"{', '.join(FORMULA_MODULES)}", func)
        for argument in node.args:
            self.visit(argument, scope, depth + 1)
        for keyword in node.keywords:
            if keyword.arg is None:
                raise ExpressionError("**keywords are not allowed in an expression", keyword.value)
            if keyword.arg.startswith("_"):
                raise ExpressionError(f"the keyword {keyword.arg!r} is not allowed", keyword.value)
            self.visit(keyword.value, scope, depth + 1)

    def _comprehension_scope(self, node: ast.ListComp | ast.GeneratorExp, scope: frozenset[str],
                             depth: int) -> frozenset[str]:
        inner = scope
        for generator in node.generators:
            if generator.is_async:
                raise ExpressionError("async comprehensions are not allowed", node)
            self.visit(generator.iter, inner, depth + 1)
            names = _target_names(generator.target)
            for target in names:
                if target.id.startswith("_") or target.id in HELPERS or target.id in self.free \
                        or target.id in self.constants or target.id in FORMULA_MODULES or target.id == "sim":
                    raise ExpressionError(f"the variable {target.id!r} hides a name of the language", target)
            inner = inner | {target.id for target in names}
            for condition in generator.ifs:
                self.visit(condition, inner, depth + 1)
        return inner

    def _ListComp(self, node: ast.ListComp, scope: frozenset[str], depth: int) -> None:
        self.visit(node.elt, self._comprehension_scope(node, scope, depth), depth + 1)

    _GeneratorExp = _ListComp


def _target_names(target: ast.expr) -> list[ast.Name]:
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, ast.Tuple):
        return [name for element in target.elts for name in _target_names(element)]
    raise ExpressionError("a comprehension binds names or tuples of names only", target)


def _chain(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ()
    return (node.id, *reversed(parts))


def _dotted(node: ast.expr) -> str:
    return ".".join(_chain(node))


def _constant_zero(node: ast.expr) -> bool:
    """The divisor is a number built of literals only (``0``, ``-0``, ``1 - 1``) and equals 0."""
    if any(isinstance(n, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(node)):
        return False
    try:
        _Checker(frozenset()).visit(node, frozenset(), 0)
        value = _Interpreter({}).run(node)
    except Exception:  # noqa: BLE001 - not a plain number; the checker reports it where it is
        return False
    return isinstance(value, (int, float)) and value == 0


# -- the interpreter ---------------------------------------------------------------------------


def describe(value: Any) -> str:
    """What a value is, for a message (a z3 term by its sort)."""
    if logic.is_symbolic(value):
        return f"a symbolic {value.sort()} ({value!s:.80})"
    if _symbolic(value):
        return f"an optional or loosely typed field ({value!r:.80}): read it with ValueOf(...) or RealOf(...)"
    return f"a {type(value).__name__} ({value!r:.80})"


def _symbolic(value: Any) -> bool:
    return logic.is_symbolic(value) or logic.is_symbolic(getattr(value, "present", None))


def _need_concrete(value: Any, what: str, node: ast.AST) -> None:
    """A symbolic value where the language needs a concrete one: the solver pins the leaf."""
    if _symbolic(value):
        raise SymbolicFlowError(f"{what} must be concrete (at {node.lineno}:{node.col_offset + 1})",
                                terms=logic._terms_of(value))


def _check_size(value: Any, node: ast.AST) -> Any:
    if type(value) is int and value.bit_length() > MAX_INT_BITS:
        raise ExpressionError(f"the value has more than {MAX_INT_BITS} bits", node)
    if type(value) is float and not math.isfinite(value):
        raise ExpressionError("the value is not finite", node)
    return value


def _number(value: Any, node: ast.AST) -> Any:
    if isinstance(value, (int, float)) or _symbolic(value) or type(value).__name__ == "Fraction":
        return value
    raise ExpressionError(f"arithmetic on {type(value).__name__} is not allowed (numbers only)", node)


def _true_div(a: Any, b: Any) -> Any:
    if logic.is_symbolic(a, b):
        return logic.If(b == 0, 0, logic.fdiv(a, b))
    return 0 if b == 0 else a / b


def _power(a: Any, exponent: int, node: ast.AST) -> Any:
    if type(a) is int and a.bit_length() * exponent > MAX_INT_BITS:
        raise ExpressionError(f"the power has more than {MAX_INT_BITS} bits", node)
    return a ** exponent


_BINARY = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: _true_div, ast.FloorDiv: logic.div, ast.Mod: logic.mod,
}


def _is_data(value: Any) -> bool:
    """A kvproof document object (an attrs model, a symbolic leaf, a bundle): its public,
    non-callable attributes are fields."""
    kind = type(value)
    return (kind.__module__.startswith("kvproof.") and not isinstance(value, (type, types.ModuleType))
            and not callable(value))


class _Interpreter:
    def __init__(self, values: dict[str, Any]):
        self.scopes: list[dict[str, Any]] = [dict(_constants()), dict(values)]
        self.steps = 0
        self.functions: dict | None = None

    def step(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise ExpressionError(f"the evaluation takes more than {MAX_STEPS} steps", node)

    def run(self, node: ast.AST) -> Any:
        self.step(node)
        method = getattr(self, f"_{type(node).__name__}")
        try:
            return method(node)
        except (ExpressionError, logic.ConcreteRequired, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 - a helper or operator refused its operands: say where
            raise ExpressionError(f"{type(exc).__name__}: {exc}", node) from None

    @staticmethod
    def apply(node: ast.AST, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``; its error is located at ``node`` and marked ``retry``
        when an operand is symbolic (a helper that needs a concrete value: the solver pins it)."""
        try:
            return function(*args, **kwargs)
        except (ExpressionError, logic.ConcreteRequired, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001
            retry = any(_symbolic(value) for value in (*args, *kwargs.values()))
            raise ExpressionError(f"{type(exc).__name__}: {exc}", node, retry=retry) from None

    # literals and names
    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        raise ExpressionError(f"no value for {node.id!r}", node)

    def _List(self, node: ast.List) -> list:
        return [self.run(element) for element in node.elts]

    def _Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.run(element) for element in node.elts)

    # fields and items
    def _Attribute(self, node: ast.Attribute) -> Any:
        value = self.run(node.value)
        if not _is_data(value):
            raise ExpressionError(f"{type(value).__name__} has no fields ('.{node.attr}' reads the fields of "
                                  "document objects only)", node)
        try:
            field = getattr(value, node.attr)
        except AttributeError:
            raise ExpressionError(f"{type(value).__name__} has no field {node.attr!r}", node) from None
        if callable(field) or isinstance(field, (type, types.ModuleType)):
            raise ExpressionError(f"{type(value).__name__}.{node.attr} is not a field (methods cannot be read "
                                  "or called)", node)
        return field

    def _Subscript(self, node: ast.Subscript) -> Any:
        value = self.run(node.value)
        if not isinstance(value, (list, tuple, dict, str)):
            raise ExpressionError(f"{type(value).__name__} cannot be indexed (lists and mappings only)", node)
        if isinstance(node.slice, ast.Slice):
            bounds = [None if part is None else self.run(part)
                      for part in (node.slice.lower, node.slice.upper, node.slice.step)]
            for bound in bounds:
                _need_concrete(bound, "a slice bound", node)
                if bound is not None and type(bound) is not int:
                    raise ExpressionError("a slice bound must be an integer", node)
            if isinstance(value, dict):
                raise ExpressionError("a mapping cannot be sliced", node)
            return value[slice(*bounds)]
        index = self.run(node.slice)
        _need_concrete(index, "an index", node)
        if isinstance(value, dict):
            if index not in value:
                raise ExpressionError(f"no key {index!r}", node)
            return value[index]
        if type(index) is not int:
            raise ExpressionError(f"a list index must be an integer, not {type(index).__name__}", node)
        if not -len(value) <= index < len(value):
            raise ExpressionError(f"index {index} is out of range (the list has {len(value)} items)", node)
        return value[index]

    # arithmetic
    def _BinOp(self, node: ast.BinOp) -> Any:
        left = _number(self.run(node.left), node.left)
        right = _number(self.run(node.right), node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(self.apply(node, _power, left, node.right.value, node), node)  # type: ignore[attr-defined]
        return _check_size(self.apply(node, _BINARY[type(node.op)], left, right), node)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.run(node.operand)
        if isinstance(node.op, ast.Not):
            return logic.Not(operand)
        operand = _number(operand, node.operand)
        return -operand if isinstance(node.op, ast.USub) else +operand

    # logic
    def _BoolOp(self, node: ast.BoolOp) -> Any:
        conjunction = isinstance(node.op, ast.And)
        items = []
        for operand in node.values:
            value = self.run(operand)
            if not _symbolic(value):
                if conjunction and not value:
                    return False
                if not conjunction and value:
                    return True
                continue  # a concrete True in an And (False in an Or) adds nothing
            items.append(value)
        if not items:
            return conjunction
        return logic.And(*items) if conjunction else logic.Or(*items)

    def _IfExp(self, node: ast.IfExp) -> Any:
        condition = self.run(node.test)
        if not _symbolic(condition):
            return self.run(node.body) if condition else self.run(node.orelse)
        return logic.If(condition, self.run(node.body), self.run(node.orelse))

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.run(node.left)
        parts = []
        for op, right_node in zip(node.ops, node.comparators):
            right = self.run(right_node)
            if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(right, (list, tuple, dict, str)):
                raise ExpressionError(f"'in' needs a list, a mapping or a string, not {type(right).__name__}",
                                      right_node)
            parts.append(self.apply(node, _COMPARE[type(op)], left, right))
            left = right
        return parts[0] if len(parts) == 1 else logic.And(*parts)

    # calls
    def _Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Name):
            function = HELPERS[func.id]
        else:
            if self.functions is None:
                self.functions = _formula_functions()
            function = self.functions[_chain(func)]
        args = [self.run(argument) for argument in node.args]
        kwargs = {keyword.arg: self.run(keyword.value) for keyword in node.keywords}
        for value in (*args, *kwargs.values()):
            _check_size(value, node)
        result = self.apply(node, function, *args, **kwargs)
        if isinstance(result, (list, tuple)):
            for _ in result:
                self.step(node)
        return _check_size(result, node)

    # comprehensions
    def _ListComp(self, node: ast.ListComp | ast.GeneratorExp) -> list:
        out: list = []
        self._generate(node, 0, out)
        return out

    _GeneratorExp = _ListComp

    def _generate(self, node: ast.ListComp | ast.GeneratorExp, index: int, out: list) -> None:
        if index == len(node.generators):
            out.append(self.run(node.elt))
            return
        generator = node.generators[index]
        items = self.run(generator.iter)
        _need_concrete(items, "what a comprehension iterates over", generator.iter)
        if not isinstance(items, (list, tuple, dict, range)):
            raise ExpressionError(f"a comprehension iterates over a list, a mapping or a range, not "
                                  f"{type(items).__name__}", generator.iter)
        scope: dict[str, Any] = {}
        self.scopes.append(scope)
        try:
            for item in list(items) if isinstance(items, dict) else items:
                self.step(generator.iter)
                self._bind(generator.target, item, scope)
                if all(self._keep(condition) for condition in generator.ifs):
                    self._generate(node, index + 1, out)
        finally:
            self.scopes.pop()

    def _keep(self, condition: ast.expr) -> bool:
        value = self.run(condition)
        return bool(value)  # a symbolic filter is Python control flow: the solver pins what it reads

    def _bind(self, target: ast.expr, item: Any, scope: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = item
            return
        elements = target.elts  # type: ignore[attr-defined]
        if not isinstance(item, (list, tuple)) or len(item) != len(elements):
            raise ExpressionError(f"cannot unpack {type(item).__name__} into {len(elements)} names", target)
        for element, value in zip(elements, item):
            self._bind(element, value, scope)


# -- on a solver session -----------------------------------------------------------------------


def symbolic_value(session: Any, formula: Callable[[tuple], Any]) -> Any:
    """``formula(session.documents)`` on the session's documents, with every rule encoded on the
    same build of them.

    Encoding a rule or evaluating the formula can learn pins (a value read in Python control
    flow), which rebuilds the symbolic documents: a term evaluated before the rebuild reads
    variables no axiom or pin constrains any more (a solver answer the checker then contradicts).
    So evaluate and encode until a round rebuilds nothing. Errors of the language itself are
    raised after the pinning protocol, not fed to it."""
    for _round in range(50):
        session.encode_all()
        builds = session.builds
        box: dict[str, Any] = {}

        def probe(documents: tuple) -> bool:
            box.clear()
            try:
                box["value"] = formula(documents)
            except ExpressionError as exc:
                if exc.retry:
                    raise
                box["error"] = exc
            return True

        session.evaluate(probe)
        if "error" in box:
            raise box["error"]
        if session.builds == builds:
            return box["value"]
    raise RuntimeError("the formula and the rules did not settle on one build of the documents in 50 rounds")
