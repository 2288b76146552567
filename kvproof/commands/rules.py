"""``kvproof rules``: the rule table with vLLM 0.33.0 source citations, and ``--explain ID``: a
rule's page (docs/rules/ID.md holds the same text).

A page is rendered from the rule's declaration and ``kvproof/rules/pages.json`` (package data,
written with the pages by scripts/make_rule_pages.py from the rule fixtures and the stored
witnesses), so ``--explain`` works after a plain ``pip install``.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ..diagnostics import LOADER_IDS
from ..rules.core import FAMILIES
from ..rules.registry import REMOVED, all_rules

#: The examples and witness findings of every page (package data).
PAGES_DATA = Path(__file__).resolve().parents[1] / "rules" / "pages.json"
LOADER_FAMILY = "loader"


def all_ids() -> list[str]:
    """Every ID a check report can hold: the loader's, then the rules in evaluation order."""
    return list(LOADER_IDS) + [r.id for r in all_rules()]


def describe(rule_id: str) -> tuple[str, str]:
    """(family title, message) of an ID."""
    if rule_id in LOADER_IDS:
        return LOADER_FAMILY, LOADER_IDS[rule_id].message
    rule = _rules()[rule_id]
    return FAMILIES[rule.family][1], rule.message


def _rules() -> dict:
    return {r.id: r for r in all_rules()}


def _entries(ids: list[str]) -> list[dict]:
    rules = _rules()
    out = []
    for rule_id in ids:
        if rule_id in LOADER_IDS:
            item = LOADER_IDS[rule_id]
            out.append({"id": item.id, "family": LOADER_FAMILY, "message": item.message, "source": item.source,
                        "after": [], "expect": "reachable", "reason": None, "binding": "loader", "doc": item.doc})
            continue
        r = rules[rule_id]
        out.append({"id": r.id, "family": FAMILIES[r.family][1], "message": r.message, "source": r.source,
                    "after": list(r.after), "expect": r.expect, "reason": r.reason, "binding": r.over.name,
                    "doc": r.doc})
    return out


def run(ids: tuple[str, ...] = (), fmt: str = "text", explain: str | None = None, sort: str = "order") -> int:
    known = all_ids()
    if explain is not None:
        rule_id = explain.upper()
        if rule_id not in known:
            sys.stderr.write(f"kvproof rules: unknown rule ID: {explain}\n")
            return 2
        sys.stdout.write(render_page(rule_id, _pages().get(rule_id, {})))
        return 0
    chosen = known
    if ids:
        wanted = [i.upper() for i in ids]
        unknown = [i for i, w in zip(ids, wanted) if w not in known]
        if unknown:
            sys.stderr.write(f"kvproof rules: unknown rule ID(s): {', '.join(unknown)}\n")
            return 2
        chosen = [i for i in known if i in wanted]
    if sort == "id":
        chosen = sorted(chosen)
    entries = _entries(chosen)
    if fmt == "json":
        payload = {"rules": [e for e in entries if e["family"] != LOADER_FAMILY],
                   "loader": [e for e in entries if e["family"] == LOADER_FAMILY], "removed": REMOVED}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 0
    for e in entries:
        sys.stdout.write(f"{e['id']}  [{e['family']}]  {e['message']}\n")
        why = textwrap.fill(" ".join(e["doc"].split()), 96, initial_indent="       why: ", subsequent_indent="            ")
        sys.stdout.write(why + "\n")
        sys.stdout.write(f"       source: {e['source']}\n")
        if e["after"]:
            sys.stdout.write(f"       after: {', '.join(e['after'])}\n")
        if e["expect"] == "dead":
            sys.stdout.write(f"       expect: dead ({e['reason']})\n")
    return 0


def _pages() -> dict:
    try:
        return json.loads(PAGES_DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # an install without the data: the pages show the rule alone
        return {}


# -- the page -------------------------------------------------------------------------------

def _code(text: str) -> str:
    """Inline code in a Markdown table cell."""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`" if text != "(absent)" else "(absent)"


def _report(report: list[dict]) -> list[str]:
    if not report:
        return ["```", "(no finding: accepted)", "```"]
    lines = ["```"]
    for d in report:
        where = f"{d['file']}: " if "file" in d else ""
        lines.append(f"{where}{d['rule']} {d['path']}: {d['message']}")
    return lines + ["```"]


def _example(example: dict, accepted: bool) -> list[str]:
    fixture = example["fixture"]
    lines = []
    files = example.get("files") or []
    if files:
        lines.append(f"The record set `{fixture}` ({', '.join(files)}), checked together.")
    else:
        lines.append(f"The document `{fixture}`.")
    if "base" in example:
        where = f"`{example['file']}` is" if example.get("file") else "It is"
        lines.append(f"{where} `{example['base']}` (accepted) with these values changed:")
        lines += ["", "| JSON path | in the example | here |", "| --- | --- | --- |"]
        for edit in example["edits"]:
            lines.append(f"| {_code(edit['path'])} | {_code(edit['accepted'])} | {_code(edit['refused'])} |")
        if example.get("more_edits"):
            lines.append(f"| ... | {example['more_edits']} more | |")
    lines += ["", "`kvproof check` reports:" if not accepted else "`kvproof check` accepts it:", ""]
    return lines + _report(example["report"])


def render_page(rule_id: str, data: dict) -> str:
    """The Markdown page of an ID (docs/rules/ID.md, ``kvproof rules --explain ID``)."""
    if rule_id in LOADER_IDS:
        return _loader_page(rule_id, data)
    rule = _rules()[rule_id]
    kinds = ", ".join(rule.over.kinds)
    lines = [f"# {rule.id}: {rule.message}", "",
             f"Family: {FAMILIES[rule.family][1]} ({rule.family}). Judges: {kinds} documents "
             f"(binding `{rule.over.name}`{f', field `{rule.field}`' if rule.field else ''})."
             + (f" Runs after: {', '.join(rule.after)}." if rule.after else ""), "",
             "## What it checks", "",
             f"The refusal text is `{rule.message}` (the placeholders are filled in from the document), at the JSON "
             "path of the offending value.", "",
             "## Why", "", rule.doc or "(no documentation)", "",
             f"vLLM 0.33.0 source: {rule.source}", ""]
    lines += ["## Refused example", ""]
    if "refused" in data:
        lines += _example(data["refused"], accepted=False)
        if data.get("refused_cases", 1) > 1:
            lines += ["", f"{data['refused_cases']} refused fixtures in all under `tests/rules/{rule.id}/`."]
    else:
        lines.append("None: no document is refused by this rule first (see the solver's verdict).")
    lines += ["", "## Accepted example", ""]
    if "accepted" in data:
        lines += _example(data["accepted"], accepted=True)
    elif "refused" in data and "base" in data["refused"]:
        lines.append(f"`{data['refused']['base']}`, the example the refused one was edited from: every rule accepts it "
                     f"(`kvproof check {Path(data['refused']['base']).parent.as_posix()}`).")
    else:
        lines.append("Every example under `examples/` (`kvproof check examples`).")
    lines += ["", "## The solver's verdict", ""]
    if rule.expect == "dead":
        lines.append(f"Expected **dead**: {rule.reason}. `kvproof prove {rule.id}` must find no document the checker "
                     "refuses with it first, within the shape bound.")
    else:
        lines.append(f"Expected **reachable**: `kvproof prove {rule.id}` must find a witness, a document the checker "
                     f"refuses with {rule.id} first.")
        witness = data.get("witness")
        if witness and witness.get("first"):
            first = witness["first"]
            lines += ["", f"The stored witness `{witness['file']}` is refused with:", "",
                      "```", f"{first['rule']} {first['path']}: {first['message']}", "```"]
        else:
            lines += ["", "No witness is stored yet (tests/solver/test_witnesses.py lists the rules the solver does "
                      "not reach yet); the refused fixture above shows the rule is reachable."]
    return "\n".join(lines) + "\n"


def _loader_page(rule_id: str, data: dict) -> str:
    item = LOADER_IDS[rule_id]
    lines = [f"# {item.id}: {item.message}", "", "Family: loader (LD). Judges every document before any rule.", "",
             "## What it checks", "", item.doc, "", f"Source: {item.source}", "",
             "## Why", "",
             "A rule judges only what the document holds. The loader refuses, at the value's JSON path, what it "
             "cannot read exactly, instead of coercing it; a document it refuses is bad input (exit 2).", "",
             "## Refused example", ""]
    refused = data.get("refused")
    if refused:
        lines += ["```json", refused["document"].rstrip("\n"), "```", "", "`kvproof check` reports:", ""]
        lines += _report(refused["report"])
    lines += ["", "## Accepted example", "",
              "Every document under `examples/` loads (`kvproof check examples`); `kvproof schema record|profile|geometry` "
              "prints the JSON Schema each kind must fit.", "",
              "## The solver's verdict", "",
              "Not a rule the solver proves: the solver's documents are built from the models, so they always load.", ""]
    return "\n".join(lines)
