"""``kvproof schema record|profile|geometry``: JSON Schema of a document kind."""

from __future__ import annotations

import json
import sys


def run(kind: str) -> int:
    from ..models.schema import schema_for

    sys.stdout.write(json.dumps(schema_for(kind), indent=2) + "\n")
    return 0
