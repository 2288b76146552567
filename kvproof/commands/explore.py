"""``kvproof explore``: minimize or maximize an expression over a template's open fields.

The template is read and loaded like every document (:func:`kvproof.models.documents.load_path`:
bounded size, strict JSON, LD diagnostics), and the objective is parsed by a restricted parser
(:func:`check_objective`) before anything evaluates it: an objective is arithmetic over ``doc``
with the logic helpers, never a way to run other code.
"""

from __future__ import annotations

import ast
import json
import sys
import types
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INFEASIBLE, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3

#: Longest objective accepted (characters); an objective is one formula, not a program.
MAX_OBJECTIVE_CHARS = 10_000
#: Largest literal exponent of ``**`` (``2**64`` is fine, ``10**10**10`` is not a formula).
MAX_EXPONENT = 256
#: Modules of the namespace whose functions an objective may call (``demand.blocks(...)``).
_MODULE_ROOTS = ("sim", "demand", "concurrency", "pages")

#: The syntax an objective may use: expressions, comprehensions over the document, calls.
_ALLOWED_NODES = (
    ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Constant, ast.Tuple, ast.List,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword,
    ast.GeneratorExp, ast.ListComp, ast.comprehension,
    ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)


class ObjectiveError(ValueError):
    """An objective the restricted parser refuses (exit 2)."""


def check_objective(text: str, names: dict[str, Any]) -> ast.Expression:
    """Parse ``text`` as an objective over ``doc`` and the helper ``names``; raise
    :class:`ObjectiveError` for anything else.

    Allowed: literals (numbers, strings, bools, None), arithmetic and comparisons, ``and``/``or``/
    ``not``, ``x if c else y``, tuples and lists, indexing, attribute access to names that do not
    start with ``_``, generator and list comprehensions, and calls of the helpers (``Sum``,
    ``If``, ``len``, ...) and of the functions of ``sim``, ``demand``, ``concurrency`` and
    ``pages``. Refused: any name or attribute starting with ``_`` (``__class__``, ``__globals__``,
    ...), calls of anything else (methods, classes, values), lambdas, assignments, f-strings,
    dicts and sets, and exponents past :data:`MAX_EXPONENT`."""
    if not isinstance(text, str) or not text.strip():
        raise ObjectiveError("the objective is empty")
    if len(text) > MAX_OBJECTIVE_CHARS:
        raise ObjectiveError(f"the objective is longer than {MAX_OBJECTIVE_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), "<objective>", mode="eval")
    except SyntaxError as exc:
        raise ObjectiveError(f"the objective is not an expression: {exc.msg} (column {exc.offset})") from None
    except (RecursionError, MemoryError, ValueError):
        raise ObjectiveError("the objective is nested too deeply or holds a NUL character") from None
    bound: set[str] = set()
    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        raise ObjectiveError("the objective is nested too deeply") from None
    for node in nodes:
        if isinstance(node, ast.comprehension):
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    bound.add(target.id)
                elif not isinstance(target, (ast.Tuple, ast.List, ast.expr_context)):
                    raise ObjectiveError("a comprehension may only bind plain names")
    for node in nodes:
        if not isinstance(node, _ALLOWED_NODES):
            raise ObjectiveError(f"{type(node).__name__} is not allowed in an objective")
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise ObjectiveError(f"name {node.id!r} is not allowed in an objective")
            if node.id not in names and node.id != "doc" and node.id not in bound:
                raise ObjectiveError(f"unknown name {node.id!r} (an objective sees doc and the helpers "
                                     f"{', '.join(sorted(names))})")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ObjectiveError(f"attribute {node.attr!r} is not allowed in an objective")
        elif isinstance(node, ast.Constant) and not (node.value is None or isinstance(node.value, (bool, int, float, str))):
            raise ObjectiveError(f"literal {node.value!r} is not allowed in an objective")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            exponent = node.right
            if not (isinstance(exponent, ast.Constant) and type(exponent.value) is int
                    and 0 <= exponent.value <= MAX_EXPONENT):
                raise ObjectiveError(f"an exponent must be a literal integer from 0 to {MAX_EXPONENT}")
        elif isinstance(node, ast.Call):
            _check_callee(node.func, names)
    return tree


def _check_callee(func: ast.expr, names: dict[str, Any]) -> None:
    """A helper by name, or a kvproof function reached through a module of the namespace."""
    if isinstance(func, ast.Name):
        if func.id in names and func.id not in _MODULE_ROOTS:
            return
        raise ObjectiveError(f"{func.id!r} cannot be called in an objective (call a helper: Sum, If, len, ...)")
    chain: list[str] = []
    node = func
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id in _MODULE_ROOTS and node.id in names and chain):
        raise ObjectiveError("only the helpers and the functions of sim, demand, concurrency and pages can be "
                             "called in an objective (no methods)")
    target: Any = names[node.id]
    for attr in reversed(chain):
        target = getattr(target, attr, None)
    if not (isinstance(target, types.FunctionType) and target.__module__.startswith("kvproof.")):
        dotted = ".".join([node.id, *reversed(chain)])
        raise ObjectiveError(f"{dotted} is not a kvproof function an objective may call")


def run(template: str, minimize: str | None, maximize: str | None, open_fields: tuple[str, ...], timeout: float = 30.0,
        fmt: str = "text", output: str | None = None) -> int:
    if (minimize is None) == (maximize is None):
        sys.stderr.write("kvproof explore: give exactly one of --minimize EXPR or --maximize EXPR\n")
        return EXIT_USAGE
    if not Path(template).is_file():
        sys.stderr.write(f"kvproof explore: {template}: no such file (or not a regular file)\n")
        return EXIT_USAGE
    bad_paths = [path for path in open_fields if not path.startswith("$")]
    if bad_paths:
        sys.stderr.write(f"kvproof explore: --open takes a JSON path starting with $ (got {bad_paths[0]!r})\n")
        return EXIT_USAGE
    from ..diagnostics import InputError
    from ..models.documents import load_path

    try:  # the template, read and loaded strictly like every document (bounded, LD diagnostics)
        document = load_path(template)
    except InputError as exc:
        for diagnostic in exc.diagnostics:
            sys.stderr.write(diagnostic.render() + "\n")
        return EXIT_USAGE
    from ..solver.claims import namespace
    from ..solver.explore import GeometryNotSymbolic, explore

    objective = minimize if minimize is not None else maximize
    try:
        check_objective(objective or "", namespace())
    except ObjectiveError as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    del document
    direction = "minimize" if minimize is not None else "maximize"
    try:
        result = explore(template, objective or "", direction, open_fields, timeout)
    except GeometryNotSymbolic as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    except (ValueError, SyntaxError, TypeError, ArithmeticError, LookupError, AttributeError,
            json.JSONDecodeError) as exc:
        sys.stderr.write(f"kvproof explore: {type(exc).__name__}: {exc}\n")
        return EXIT_USAGE
    if output and result.document:
        try:
            Path(output).write_text(result.document, encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(f"kvproof explore: cannot write {output}: {exc.strerror or exc}\n")
            return EXIT_USAGE
    if fmt == "json":
        payload = result.to_json()
        payload["document"] = json.loads(result.document) if result.document else None
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        sys.stdout.write(f"{result.status}: {direction} {result.objective} = {result.value}  ({result.seconds:.2f}s)\n")
        if result.changed:
            sys.stdout.write(f"changed: {', '.join(result.changed)}\n")
        if result.reason:
            sys.stdout.write(f"{result.reason}\n")
        if result.document and not output:
            sys.stdout.write(result.document)
    if result.status == "optimal":
        return EXIT_OK
    if result.status in ("infeasible", "mismatch"):
        return EXIT_INFEASIBLE
    return EXIT_UNKNOWN
