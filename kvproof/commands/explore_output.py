"""The one writer of ``kvproof explore -o``'s optimal document, shared by the record and the
geometry explorers (commands/explore.py dispatches to commands/explore_geometry.py, so the writer
lives below both)."""

from __future__ import annotations

import sys

from ..output import OutputError, write_file


def write_document(output: str, text: str) -> bool:
    """Write explore's optimal document to ``-o`` (atomic, kvproof.output); False (said on stderr)
    when it cannot be written."""
    try:
        write_file(output, text)
    except (OutputError, OSError) as exc:
        sys.stderr.write(f"kvproof explore: cannot write {output}: {getattr(exc, 'strerror', None) or exc}\n")
        return False
    return True
