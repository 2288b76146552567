"""``kvproof explore``: minimize or maximize an expression over a template's open fields."""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXIT_OK, EXIT_INFEASIBLE, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def run(template: str, minimize: str | None, maximize: str | None, open_fields: tuple[str, ...], timeout: float = 30.0,
        fmt: str = "text", output: str | None = None) -> int:
    if (minimize is None) == (maximize is None):
        sys.stderr.write("kvproof explore: give exactly one of --minimize EXPR or --maximize EXPR\n")
        return EXIT_USAGE
    if not Path(template).is_file():
        sys.stderr.write(f"kvproof explore: no such file: {template}\n")
        return EXIT_USAGE
    from ..solver.explore import GeometryNotSymbolic, explore

    direction = "minimize" if minimize is not None else "maximize"
    try:
        result = explore(template, minimize or maximize or "", direction, open_fields, timeout)
    except GeometryNotSymbolic as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    except (ValueError, SyntaxError, TypeError, json.JSONDecodeError) as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    if output and result.document:
        Path(output).write_text(result.document, encoding="utf-8")
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
