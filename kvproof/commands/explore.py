"""``kvproof explore``: minimize or maximize an expression over a template's open fields.

The template is read and loaded like every document (:func:`kvproof.models.documents.load_path`:
bounded size, strict JSON, LD diagnostics), and the objective is checked by the expression
language (:mod:`kvproof.solver.expression`) before anything evaluates it: an objective is a
formula over ``doc`` with the logic helpers, never a way to run other code.
"""

from __future__ import annotations

# The modules that evaluate an objective (kvproof.solver.explore, .explore_geometry) are imported
# inside run(), after the template loaded and parse() checked the objective: importing this
# module runs none of them (tests/robustness/test_robust_source.py).
import json
import sys
from pathlib import Path

from ..diagnostics import InputError
from ..models.documents import load_path
from ..solver.expression import ExpressionError, parse
from ..terminal import number
from .explore_output import write_document

EXIT_OK, EXIT_NO_OPTIMUM, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def run(template: str, minimize: str | None, maximize: str | None, open_fields: tuple[str, ...], timeout: float = 120.0,
        fmt: str = "text", output: str | None = None, rlimit: int | None = None, requires: tuple[str, ...] = (),
        max_plans: int | None = None) -> int:
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

    try:  # the template, read and loaded strictly like every document (bounded, LD diagnostics)
        document = load_path(template)
    except InputError as exc:  # diagnostics go to stdout, as every command's do (docs/cli.md)
        for diagnostic in exc.diagnostics:
            sys.stdout.write(diagnostic.render() + "\n")
        return EXIT_USAGE
    if document.kind == "geometry":  # over the planner itself (kvproof.solver.explore_geometry)
        from .explore_geometry import run as run_geometry


        return run_geometry(template, minimize if minimize is not None else maximize or "",
                            "minimize" if minimize is not None else "maximize", open_fields, requires, max_plans,
                            timeout, fmt, output, rlimit)
    if requires or max_plans is not None:
        sys.stderr.write("kvproof explore: --require and --max-plans apply to geometry templates\n")
        return EXIT_USAGE
    objective = minimize if minimize is not None else maximize
    option = "--minimize" if minimize is not None else "--maximize"
    try:
        parse(objective or "")
    except ExpressionError as exc:
        sys.stderr.write(f"kvproof explore: {option} {exc.render()}\n")
        return EXIT_USAGE
    from ..solver.explore import GeometryNotSymbolic, explore

    direction = "minimize" if minimize is not None else "maximize"
    try:
        result = explore(template, objective or "", direction, open_fields, timeout, rlimit)
    except ExpressionError as exc:
        sys.stderr.write(f"kvproof explore: {option} {exc.render()}\n")
        return EXIT_USAGE
    except GeometryNotSymbolic as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    except (ValueError, LookupError, json.JSONDecodeError) as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    if output and result.document and not write_document(output, result.document):
        return EXIT_USAGE
    if fmt == "json":
        payload = result.to_json()
        payload["document"] = json.loads(result.document) if result.document else None
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        value = "" if result.value is None else f" = {number(result.value)}"
        sys.stdout.write(f"{result.status}: {direction} {result.objective}{value}\n")
        if result.changed:
            sys.stdout.write(f"changed: {', '.join(result.changed)}\n")
        if result.reason:
            sys.stdout.write(f"{result.reason}\n")
        if result.document and not output:
            sys.stdout.write(result.document)
    if result.status == "optimal":
        return EXIT_OK
    if result.status in ("infeasible", "unbounded", "mismatch"):
        return EXIT_NO_OPTIMUM
    return EXIT_UNKNOWN
