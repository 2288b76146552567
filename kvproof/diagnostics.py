"""Diagnostics and the small exception hierarchy of kvproof.

A diagnostic is the unit of every verdict: a stable ID, the JSON path of the offending value and
the exact text.  Loader problems use the ``LD`` IDs below; rule refusals use their rule's ID.
"""

from __future__ import annotations

import attrs

__all__ = ["Diagnostic", "KvproofError", "InputError", "LOAD_SYNTAX", "LOAD_SCHEMA", "LOAD_KIND"]

#: The document is not readable JSON (syntax, encoding, nesting, size).
LOAD_SYNTAX = "LD001"
#: The JSON does not fit the schema of its kind (unknown key, wrong type, out-of-range value).
LOAD_SCHEMA = "LD002"
#: The document's kind cannot be recognised.
LOAD_KIND = "LD003"


@attrs.frozen(order=True)
class Diagnostic:
    """One finding: ``rule`` ID, JSON ``path`` of the offending value, exact ``message``."""

    rule: str
    path: str
    message: str
    file: str | None = attrs.field(default=None, order=False)

    def render(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.rule} {self.path}: {self.message}"

    def to_json(self) -> dict:
        out = {"rule": self.rule, "path": self.path, "message": self.message}
        if self.file is not None:
            out["file"] = self.file
        return out


class KvproofError(Exception):
    """Base of every error kvproof raises on purpose."""


class InputError(KvproofError):
    """Bad input: carries the loader diagnostics (exit code 2 at the CLI)."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("; ".join(d.render() for d in diagnostics))
