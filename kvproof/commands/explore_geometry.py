"""``kvproof explore GEOMETRY``: the command face of :mod:`kvproof.solver.explore_geometry`.

Exit codes: 0 an optimum (replayed through ``simulate``), 1 no candidate meets the requirements,
2 bad input or usage (an ``--open`` value, an expression, a candidate the loader refuses),
3 unknown (the plan budget ``--max-plans`` or a solver limit ran out, or a property the search
relied on failed its check).
"""

from __future__ import annotations

import json
import sys

from ..models.codec import parse_json
from ..models.documents import read_document
from ..solver.explore_geometry import DEFAULT_MAX_PLANS, GeometryExploreError, explore_geometry, render_text
from .explore_output import write_document

EXIT_OK, EXIT_NO_OPTIMUM, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


def run(template: str, objective: str, direction: str, open_fields: tuple[str, ...], requires: tuple[str, ...],
        max_plans: int | None, timeout: float, fmt: str, output: str | None, rlimit: int | None) -> int:
    tree = parse_json(read_document(template), template)  # loaded strictly by the caller already
    try:
        result = explore_geometry(tree, template, objective, direction, open_fields, requires,
                                  DEFAULT_MAX_PLANS if max_plans is None else max_plans, timeout, rlimit)
    except GeometryExploreError as exc:
        sys.stderr.write(f"kvproof explore: {exc}\n")
        return EXIT_USAGE
    if output and result.document and not write_document(output, result.document):
        return EXIT_USAGE
    if fmt == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(result, with_document=not output))
    if result.status == "optimal":
        return EXIT_OK
    if result.status == "infeasible":
        return EXIT_NO_OPTIMUM
    return EXIT_UNKNOWN
