"""The pre-commit hook (.pre-commit-hooks.yaml, id ``kvproof-check``): check the records and
profiles a commit changes, each with the record set it belongs to.

pre-commit passes the changed ``*.json`` files. A file is a kvproof document when its top-level
``schema_version`` names kvproof's record or profile format; every other JSON file of the
repository (a package.json, a geometry, a fixture of another tool) is left alone. Records are
judged together with the other kvproof documents of their folder, as ``kvproof check FOLDER``
would (the cross-record rules need every rank of the set), so a commit that changes one rank's
record is checked against the rest of its set. Exit codes as ``kvproof check``.

Run: python -m kvproof.precommit [--format text|github] FILE...
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

#: The start of a kvproof document: the parse comes later, in the check (strict, with positions).
_SCHEMA = re.compile(rb'"schema_version"\s*:\s*"kvproof/(record|profile)/')
#: Only this much of a file is read to tell whether it is a kvproof document.
_PEEK = 4096


def is_kvproof_document(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return bool(_SCHEMA.search(handle.read(_PEEK)))
    except OSError:
        return False


def documents(changed: list[str]) -> list[str]:
    """The kvproof documents to check: the changed ones, and the others of their folders."""
    chosen: set[Path] = set()
    for name in changed:
        path = Path(name)
        if path.is_file() and is_kvproof_document(path):
            chosen.update(p for p in path.parent.glob("*.json") if is_kvproof_document(p))
    return sorted(str(p) for p in chosen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kvproof-check", description="Check changed kvproof records and profiles.")
    parser.add_argument("--format", dest="fmt", choices=["text", "github"], default="text")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    chosen = documents(args.files)
    if not chosen:
        print("kvproof-check: no kvproof record or profile among the changed files")
        return 0  # nothing to judge is not a refusal (pre-commit, too, passes a hook with no files)
    from .commands.check import run

    return run(chosen, args.fmt)


if __name__ == "__main__":
    sys.exit(main())
