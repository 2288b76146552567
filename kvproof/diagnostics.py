"""Diagnostics and the exception hierarchy of kvproof.

A diagnostic is the unit of every verdict: a stable ID, the JSON path of the offending value and
the exact text.  Loader problems use the ``LD`` IDs below; rule refusals use their rule's ID.
:meth:`Diagnostic.render` is the one place its text line is formatted.

Every exception kvproof raises on purpose is a :class:`KvproofError` with a name no other class
has (it keeps a builtin base, such as ``ValueError``, where callers catch that): for example
``InputError`` (and ``configs.hf.ConfigError``), ``models.codec.DocumentRefusal``,
``logic.ConcreteRequired``, ``output.OutputError``, ``executor.ExecutorError``,
``plot.PlotUnavailable``.
"""

from __future__ import annotations

import attrs

__all__ = ["Diagnostic", "KvproofError", "InputError", "LOAD_SYNTAX", "LOAD_SCHEMA", "LOAD_KIND", "LoaderId", "LOADER_IDS"]

#: The document is not readable JSON (syntax, encoding, nesting, size).
LOAD_SYNTAX = "LD001"
#: The JSON does not fit the schema of its kind (unknown key, wrong type, out-of-range value).
LOAD_SCHEMA = "LD002"
#: The document's kind cannot be recognised.
LOAD_KIND = "LD003"


@attrs.frozen
class LoaderId:
    """A loader ID as the rule table lists it (``kvproof rules``, SARIF ``driver.rules``, docs/rules/)."""

    id: str
    message: str
    doc: str
    source: str = "kvproof/models/codec.py, kvproof/models/documents.py (the strict loader; not a vLLM rule)"
    #: A document the loader refuses with this ID (docs/rules/ID.md, ``kvproof rules --explain``).
    example: str = ""


LOADER_IDS: dict[str, LoaderId] = {
    LOAD_SYNTAX: LoaderId(
        LOAD_SYNTAX, "the document is not readable JSON",
        "The file cannot be read, is larger than 64 MiB, is not UTF-8, is empty, is not JSON or nests "
        "deeper than the parser allows. vLLM writes its records with json.dump, so a record it wrote "
        "always parses: anything else is not evidence of what vLLM did, and no rule runs on it.",
        example='{"schema_version": "kvproof/profile/v1", "model": "m",\n'),
    LOAD_SCHEMA: LoaderId(
        LOAD_SCHEMA, "the JSON does not fit the schema of its kind",
        "An unknown or missing key, a duplicate key, a bool or float where an integer belongs, a NaN "
        "or Infinity literal, an integer past 2**53 or a value outside its enumeration. The loader "
        "refuses it at the value's JSON path instead of coercing it, so a rule never judges a value "
        "the document did not hold (``kvproof schema KIND`` prints what it accepts).",
        example='{"schema_version": "kvproof/profile/v1", "model": "m", "colour": "red"}\n'),
    LOAD_KIND: LoaderId(
        LOAD_KIND, "the document's kind cannot be recognised",
        "A document is a profile (schema_version kvproof/profile/v1), a runtime record "
        "(kvproof/record/v1, kind worker or scheduler) or a geometry (layers); a command also refuses "
        "a kind it does not take. Without its kind no schema and no rule applies.",
        example='{"schema_version": "kvproof/other/v9"}\n'),
}


@attrs.frozen(order=True)
class Diagnostic:
    """One finding: ``rule`` ID, JSON ``path`` of the offending value, exact ``message``."""

    rule: str
    path: str
    message: str
    file: str | None = attrs.field(default=None, order=False)

    # The one renderer of a diagnostic's line (docs/cli.md): every report and command that prints
    # a diagnostic as text calls these, so the format is written once.

    def at(self) -> str:
        """``PATH: MESSAGE``: the finding where the rule ID is carried apart (SARIF's ruleId,
        a GitHub annotation's title)."""
        return f"{self.path}: {self.message}"

    def text(self) -> str:
        """``RULE PATH: MESSAGE``: the finding where the file is named apart (a JUnit test case,
        a fuzz outcome)."""
        return f"{self.rule} {self.path}: {self.message}"

    def render(self, file: str | None = None) -> str:
        """``FILE: RULE PATH: MESSAGE``. ``file`` is the file a report lists the finding under
        (default: the diagnostic's own); without either, ``RULE PATH: MESSAGE``."""
        where = file if file is not None else self.file
        return f"{where}: {self.rule} {self.path}: {self.message}" if where else f"{self.rule} {self.path}: {self.message}"

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
