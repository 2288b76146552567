"""``kvproof rules``: the rule table with vLLM 0.33.0 source citations."""

from __future__ import annotations

import json
import sys

from ..rules.core import FAMILIES
from ..rules.registry import REMOVED, all_rules


def run(ids: tuple[str, ...] = (), fmt: str = "text") -> int:
    rules = all_rules()
    if ids:
        known = {r.id for r in rules}
        unknown = [i for i in ids if i not in known]
        if unknown:
            sys.stderr.write(f"kvproof rules: unknown rule ID(s): {', '.join(unknown)}\n")
            return 2
        rules = [r for r in rules if r.id in ids]
    if fmt == "json":
        payload = {
            "rules": [
                {
                    "id": r.id,
                    "family": FAMILIES[r.family][1],
                    "message": r.message,
                    "source": r.source,
                    "after": list(r.after),
                    "expect": r.expect,
                    "reason": r.reason,
                    "binding": r.over.name,
                    "doc": r.doc,
                }
                for r in rules
            ],
            "removed": REMOVED,
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 0
    for r in rules:
        sys.stdout.write(f"{r.id}  [{FAMILIES[r.family][1]}]  {r.message}\n")
        sys.stdout.write(f"       source: {r.source}\n")
        if r.after:
            sys.stdout.write(f"       after: {', '.join(r.after)}\n")
        if r.expect == "dead":
            sys.stdout.write(f"       expect: dead ({r.reason})\n")
    return 0
