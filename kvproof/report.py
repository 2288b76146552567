"""The reports of ``check`` (and of ``claim``, ``fuzz`` and ``prove`` where a result is a
finding): text, json, SARIF 2.1.0, JUnit XML and GitHub workflow commands.

Every report is built from :class:`FileResult` lists, one per file (or per claim, per fuzz
failure), so one renderer serves every command. SARIF and GitHub reports place each finding at
the line and column of its JSON value (:mod:`kvproof.models.positions`, computed only for them).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable
from urllib.parse import quote

import attrs

from .diagnostics import LOADER_IDS, Diagnostic

__all__ = [
    "FileResult", "RuleInfo", "exit_code", "render_text", "render_json", "render_sarif", "render_junit",
    "render_github", "check_rules", "rules_url", "version", "RENDERERS", "FORMATS",
]

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: The base of every rule's ``helpUri``: the rule pages of the repository (docs/rules/ID.md),
#: relative to the repository root unless KVPROOF_RULES_URL names another base (a URL ending in /).
RULES_URL = "docs/rules/"


@attrs.define
class FileResult:
    file: str
    kind: str | None
    status: str  # accepted | refused | bad_input | skipped
    diagnostics: list[Diagnostic] = attrs.field(factory=list)


@attrs.frozen
class RuleInfo:
    """What a SARIF report says of an ID that can appear in it (``driver.rules``)."""

    id: str
    name: str
    short: str
    full: str
    properties: dict = attrs.field(factory=dict, hash=False)
    #: None: no page (a claim, a fuzz campaign); else the ``helpUri``.
    help_uri: str | None = None


def exit_code(results: list[FileResult]) -> int:
    if not results or any(r.status == "bad_input" for r in results):
        return EXIT_BAD_INPUT
    if any(r.status == "refused" for r in results):
        return EXIT_REFUSED
    return EXIT_OK


def version() -> str:
    try:
        from importlib.metadata import version as installed

        return installed("kvproof")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "0+unknown"


def rules_url(rule_id: str) -> str:
    """The ``helpUri`` of a rule: its page under docs/rules/ (or under KVPROOF_RULES_URL)."""
    base = os.environ.get("KVPROOF_RULES_URL") or RULES_URL
    return f"{base.rstrip('/')}/{rule_id}.md"


def check_rules() -> list[RuleInfo]:
    """Every ID a ``check`` report can hold: the loader's LD IDs, then the rules in order."""
    from .rules.core import FAMILIES
    from .rules.registry import all_rules

    out = [RuleInfo(i.id, "loader", i.message, i.doc, {"source": i.source, "family": "LD"}, rules_url(i.id))
           for i in LOADER_IDS.values()]
    out += [RuleInfo(r.id, r.body.__name__, r.message, r.doc or r.message,
                     {"source": r.source, "family": r.family, "familyTitle": FAMILIES[r.family][1],
                      "expect": r.expect}, rules_url(r.id))
            for r in all_rules()]
    return out


# -- text and json (check's own) ------------------------------------------------------------

def render_text(results: list[FileResult]) -> str:
    lines = []
    for result in results:
        for diagnostic in result.diagnostics:
            lines.append(diagnostic.render(result.file))
    lines.append(_summary(results))
    return "\n".join(lines) + "\n"


def _summary(results: list[FileResult], person: bool = True) -> str:
    """The verdict line; ``person``: counts with thousands separators (the text report; a CI log's
    github lines keep plain digits)."""
    counts = {status: sum(1 for r in results if r.status == status) for status in ("accepted", "refused", "bad_input", "skipped")}
    n = "{:,}".format if person else str
    head = "" if results else "no documents found\n"
    return head + (
        f"{n(len(results))} document(s): {n(counts['accepted'])} accepted, {n(counts['refused'])} refused, "
        f"{n(counts['bad_input'])} bad input"
        + (f", {n(counts['skipped'])} skipped (geometry: use kvproof simulate)" if counts["skipped"] else "")
    )


def render_json(results: list[FileResult]) -> str:
    report = {
        "tool": "kvproof",
        "version": version(),
        "exit_code": exit_code(results),
        "documents": [
            {
                "file": r.file,
                "kind": r.kind,
                "status": r.status,
                "diagnostics": [{"rule": d.rule, "path": d.path, "message": d.message} for d in r.diagnostics],
            }
            for r in results
        ],
    }
    return json.dumps(report, indent=2) + "\n"


# -- SARIF 2.1.0 ------------------------------------------------------------------------------

def _uri(file: str) -> str:
    """A file as a SARIF artifact URI: relative paths stay relative (GitHub code scanning maps
    them onto the repository), absolute ones become file: URIs; both percent-encoded."""
    path = Path(file)
    if path.is_absolute():
        return path.as_uri()
    return quote(path.as_posix(), safe="/")


def render_sarif(results: list[FileResult], rules: list[RuleInfo] | None = None, command: str = "check") -> str:
    from .models.positions import Positions

    rules = check_rules() if rules is None else rules
    index = {r.id: i for i, r in enumerate(rules)}
    descriptors = []
    for r in rules:
        descriptor = {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.short},
            "fullDescription": {"text": r.full},
            "help": {"text": r.full, "markdown": r.full + (f"\n\nSee [{r.id}]({r.help_uri})." if r.help_uri else "")},
            "defaultConfiguration": {"level": "error"},
            "properties": r.properties,
        }
        if r.help_uri:
            descriptor["helpUri"] = r.help_uri
        descriptors.append(descriptor)
    positions = Positions()
    sarif_results = []
    for result in results:
        for d in result.diagnostics:
            file = d.file or result.file
            location: dict = {}
            if file:
                physical: dict = {"artifactLocation": {"uri": _uri(file)}}
                at = positions.of(file, d.rule, d.path, d.message)
                if at is not None:
                    physical["region"] = {"startLine": at[0], "startColumn": at[1]}
                location["physicalLocation"] = physical
            location["logicalLocations"] = [{"fullyQualifiedName": d.path, "kind": "member"}]
            entry = {"ruleId": d.rule, "level": "error", "message": {"text": d.at()},
                     "locations": [location]}
            if d.rule in index:
                entry["ruleIndex"] = index[d.rule]
            sarif_results.append(entry)
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "kvproof", "version": version(), "informationUri": "https://github.com/kvproof/kvproof",
                                "rules": descriptors}},
            "automationDetails": {"id": f"kvproof/{command}/"},
            "columnKind": "unicodeCodePoints",
            "results": sarif_results,
        }],
    }
    return json.dumps(sarif, indent=2) + "\n"


# -- JUnit XML ------------------------------------------------------------------------------

def render_junit(results: list[FileResult], suite: str = "kvproof check") -> str:
    from xml.sax.saxutils import escape, quoteattr

    def attr(text: str) -> str:
        return quoteattr(_xml_safe(text))

    failures = sum(1 for r in results if r.status == "refused")
    errors = sum(1 for r in results if r.status == "bad_input")
    skipped = sum(1 for r in results if r.status == "skipped")
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name={attr(suite)} tests="{len(results)}" failures="{failures}" errors="{errors}" skipped="{skipped}">',
        f'  <testsuite name={attr(suite)} tests="{len(results)}" failures="{failures}" errors="{errors}" skipped="{skipped}">',
    ]
    for r in results:
        lines.append(f"    <testcase classname={attr(r.kind or 'unknown')} name={attr(r.file)}>")
        body = escape(_xml_safe("\n".join(d.text() for d in r.diagnostics)))
        if r.status == "refused":
            lines.append(f"      <failure message={attr(r.diagnostics[0].rule + ' ' + r.diagnostics[0].message)}>{body}</failure>")
        elif r.status == "bad_input":
            lines.append(f"      <error message={attr(r.diagnostics[0].message)}>{body}</error>")
        elif r.status == "skipped":
            lines.append('      <skipped message="geometry document: use kvproof simulate"/>')
        lines.append("    </testcase>")
    lines += ["  </testsuite>", "</testsuites>"]
    return "\n".join(lines) + "\n"


#: Characters XML 1.0 cannot carry even escaped (controls, lone surrogates, U+FFFE/U+FFFF),
#: written as the class of the forbidden ones: the complement of XML's allowed ranges is the same
#: set (checked over every code point) but took 6 ms to compile on every `kvproof check`.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(text: str) -> str:
    """Text from the input (a version string, a layer or file name) as XML can hold it: each
    character XML forbids becomes a visible escape such as \\x01 or \\ud800."""
    return _XML_INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


# -- GitHub Actions workflow commands ---------------------------------------------------------

def escape_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit does (``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``escapeProperty``): also ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(level: str, message: str, file: str | None = None, at: tuple[int, int] | None = None,
                   title: str | None = None) -> str:
    properties = []
    if file:
        properties.append(f"file={escape_property(file)}")
        if at is not None:
            properties.append(f"line={at[0]}")
            properties.append(f"col={at[1]}")
    if title:
        properties.append(f"title={escape_property(title)}")
    return f"::{level}{' ' + ','.join(properties) if properties else ''}::{escape_data(message)}"


def render_github(results: list[FileResult], summary: str | None = None) -> str:
    """One ``::error`` per finding (``::notice`` per skipped document), placed at its value, then
    the text report's summary line as plain log output."""
    from .models.positions import Positions

    positions = Positions()
    lines = []
    for result in results:
        for d in result.diagnostics:
            file = d.file or result.file
            at = positions.of(file, d.rule, d.path, d.message) if file else None
            lines.append(github_command("error", d.at(), file, at, d.rule))
        if result.status == "skipped":
            lines.append(github_command("notice", "geometry document: use kvproof simulate", result.file,
                                        title="skipped"))
    lines.append(_summary(results, person=False) if summary is None else summary)
    return "\n".join(lines) + "\n"


def findings(items: Iterable[tuple[str, str, str, str | None]], kind: str) -> list[FileResult]:
    """(id, path, message, file) findings of a command that judges no files (claim, fuzz,
    prove) as results the renderers take: one refused result per finding."""
    return [FileResult(file or rule_id, kind, "refused", [Diagnostic(rule_id, path, message, file)])
            for rule_id, path, message, file in items]


def render_verdicts(items: Iterable[tuple[str, str, str, bool, str, str | None]], fmt: str, command: str,
                    rules: list[RuleInfo] | None, summary: str) -> str:
    """The SARIF (``fmt == "sarif"``) or GitHub report of a solver run (``claim``, ``prove``):
    (id, verdict, expect, contrary, text, written) per result. A finding is a verdict contrary to
    its expectation or unknown, placed at the first document it wrote (a witness, a
    counterexample) when it wrote one."""
    found = []
    for ident, verdict, expect, contrary, text, written in items:
        if contrary or verdict == "unknown":
            found.append((ident, "$", f"{verdict} (expect {expect}): {text}", _first_document(written)))
    reported = findings(found, command)
    if fmt == "github":
        return render_github(reported, summary)
    return render_sarif(reported, rules, command=command)


def _first_document(written: str | None) -> str | None:
    if not written:
        return None
    path = Path(written)
    if path.is_dir():
        files = sorted(path.rglob("*.json"))
        return str(files[0]) if files else None
    return str(path)


RENDERERS = {"text": render_text, "json": render_json, "sarif": render_sarif, "junit": render_junit,
             "github": render_github}
FORMATS = list(RENDERERS)
