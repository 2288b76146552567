"""``kvproof schema record|profile|geometry``: JSON Schema of a document kind."""

from __future__ import annotations

import json
import sys

from ..models.schema import schema_for


def run(kind: str) -> int:
    sys.stdout.write(json.dumps(schema_for(kind), indent=2) + "\n")
    return 0
