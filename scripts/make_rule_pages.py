"""Write the rule pages: kvproof/rules/pages.json (package data: what ``kvproof rules --explain``
prints after a plain ``pip install``) and docs/rules/ID.md (the same text, one page per ID).

Run: python scripts/make_rule_pages.py [--check]

The examples come from the rule fixtures (tests/rules/<ID>/, tests/rules/make_fixtures.py), which
stay the one copy: each fixture is an edit of an accepted example document (examples/), so a page
shows the edited values (refused, with the fixture's expected report) against the example's
(accepted), plus the rule's own good_ fixture when it has one. The solver's verdict is the rule's
``expect`` and, for a reachable rule, the first finding on its stored witness
(tests/solver/witnesses/). tests/test_rule_pages.py fails when a page is not current.
--check writes nothing and exits 1 when a page differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvproof.commands.rules import PAGES_DATA, all_ids, render_page  # noqa: E402
from kvproof.diagnostics import LOADER_IDS, InputError  # noqa: E402
from kvproof.models.documents import load_bytes, load_path  # noqa: E402
from kvproof.rules.core import child  # noqa: E402

FIXTURES = ROOT / "tests" / "rules"
WITNESSES = ROOT / "tests" / "solver" / "witnesses"
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs" / "rules"
#: At most this many edited values per example on a page (and "N more" after them).
MAX_EDITS = 6
#: A document is an edit of an example when at most this many of its values differ.
MAX_DIFFERENT = 400
MAX_VALUE = 160


def _leaves(tree, path: str = "$", out: dict | None = None) -> dict:
    out = {} if out is None else out
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            _leaves(value, child(path, key), out)
    elif isinstance(tree, list) and tree:
        for index, value in enumerate(tree):
            _leaves(value, child(path, index), out)
    else:
        out[path] = tree
    return out


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


ABSENT = "(absent)"


def _diff(base: dict, edited: dict) -> list[dict]:
    """The values that differ: a key the edit removed or added shows as (absent)."""
    out = []
    for path in sorted(set(base) | set(edited), key=_order(base, edited)):
        if path in base and path in edited and json.dumps(base[path]) == json.dumps(edited[path]):
            continue
        out.append({"path": path, "accepted": _short(base[path]) if path in base else ABSENT,
                    "refused": _short(edited[path]) if path in edited else ABSENT})
    return out


def _order(base: dict, edited: dict):
    position = {path: i for i, path in enumerate(list(base) + [p for p in edited if p not in base])}
    return lambda path: position[path]


def _kind(tree) -> str | None:
    if not isinstance(tree, dict):
        return None
    return tree.get("kind") if tree.get("schema_version", "").startswith("kvproof/record") else "profile"


def _examples() -> list[tuple[str, dict, dict]]:
    out = []
    for path in sorted(EXAMPLES.rglob("*.json")):
        tree = json.loads(path.read_text(encoding="utf-8"))
        if "layers" in tree and "schema_version" not in tree:
            continue  # a geometry: no rule reads it
        out.append((path.relative_to(ROOT).as_posix(), tree, _leaves(tree)))
    return out


def _base(tree: dict, examples, prefer: str | None = None) -> tuple[str, list[dict]] | None:
    """The example the document is an edit of (``prefer``, the one its rule's refused fixture
    was made from, else the one with the fewest differing values) and the edits."""
    leaves = _leaves(tree)
    best = None
    for name, example, example_leaves in examples:
        if _kind(example) != _kind(tree) or (prefer and name != prefer):
            continue
        edits = _diff(example_leaves, leaves)
        if best is None or len(edits) < len(best[1]):
            best = (name, edits)
    if best is None or len(best[1]) > MAX_DIFFERENT:
        return None
    return best


def _expected(case: Path) -> list[dict]:
    name = case.stem if case.suffix else case.name
    lines = (case.parent / f"{name}.expected.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line]


def _documents(case: Path) -> list[Path]:
    return [case] if case.is_file() else sorted(case.glob("*.json"))


def _example(case: Path, examples, prefer: str | None = None) -> dict:
    """A fixture as a page shows it: its file(s), the edits of the judged file against the
    example it was made from, and its complete expected report."""
    report = _expected(case)
    files = _documents(case)
    blamed = [f for f in files if not report or "file" not in report[0] or f.name == report[0]["file"]] or files
    judged = blamed[0]
    out = {"fixture": case.relative_to(ROOT).as_posix() + ("/" if case.is_dir() else ""),
           "files": [f.name for f in files] if case.is_dir() else [], "report": report}
    if (case / "probe").is_dir():
        out["files"].append("probe/")
    tree = json.loads(judged.read_text(encoding="utf-8"))
    base = (prefer and _base(tree, examples, prefer)) or _base(tree, examples)
    if base is not None:
        out["file"] = judged.name if case.is_dir() else ""
        out["base"], edits = base
        out["edits"] = edits[:MAX_EDITS]
        out["more_edits"] = max(0, len(edits) - MAX_EDITS)
    return out


def _witness(rule_id: str) -> dict | None:
    from kvproof.rules.check import check
    from kvproof.solver.witnesses import load_witness

    path = WITNESSES / rule_id
    case = path if path.is_dir() else path.with_suffix(".json")
    if not case.exists():
        return None
    diagnostics = check(load_witness(case))  # the roles of their folders: probe/, replay/
    first = diagnostics[0] if diagnostics else None
    return {"file": case.relative_to(ROOT).as_posix() + ("/" if case.is_dir() else ""),
            "first": first and {"rule": first.rule, "path": first.path, "message": first.message}}


def _loader_example(rule_id: str) -> dict:
    text = LOADER_IDS[rule_id].example
    try:
        load_bytes(text, "example.json")
        report = []
    except InputError as exc:
        report = [{"rule": d.rule, "path": d.path, "message": d.message} for d in exc.diagnostics]
    return {"document": text, "report": report}


def build() -> dict:
    examples = _examples()
    data: dict = {}
    for rule_id in all_ids():
        if rule_id in LOADER_IDS:
            data[rule_id] = {"refused": _loader_example(rule_id)}
            continue
        folder = FIXTURES / rule_id
        cases = sorted(folder.iterdir()) if folder.is_dir() else []
        cases = [c for c in cases if c.suffix == ".json" or c.is_dir()]
        refused = [c for c in cases if not c.name.startswith("good_")]
        good = [c for c in cases if c.name.startswith("good_")]
        refused.sort(key=lambda c: (c.is_dir(), c.name))  # a single document reads best
        entry: dict = {}
        if refused:
            entry["refused"] = _example(refused[0], examples)
            entry["refused_cases"] = len(refused)
        if good:
            entry["accepted"] = _example(good[0], examples, entry.get("refused", {}).get("base"))
        entry["witness"] = _witness(rule_id)
        data[rule_id] = entry
    return data


def wanted(docs: Path = DOCS, data_path: Path = PAGES_DATA) -> dict[Path, str]:
    """Every generated file and its text."""
    data = build()
    out = {data_path: json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"}
    for rule_id in data:
        out[docs / f"{rule_id}.md"] = render_page(rule_id, data[rule_id])
    out[docs / "README.md"] = _index(data)
    return out


def not_current(pages: dict[Path, str], docs: Path = DOCS) -> tuple[list[Path], list[Path]]:
    """(stale or missing files, pages that no ID has any more)."""
    stale = [path for path, text in pages.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    return stale, sorted(set(docs.glob("*.md")) - set(pages))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Write nothing; exit 1 when a page is not current.")
    args = parser.parse_args()
    pages = wanted()
    stale, extra = not_current(pages)
    if args.check:
        for path in stale + extra:
            print(f"not current: {path.relative_to(ROOT)} (run python scripts/make_rule_pages.py)")
        return 1 if stale or extra else 0
    from kvproof.output import write_file

    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, pages[path])
    for path in extra:
        path.unlink()
    print(f"{len(stale)} file(s) written, {len(extra)} removed, {len(pages) - len(stale)} current")
    return 0


def _index(data: dict) -> str:
    from kvproof.commands.rules import describe

    lines = ["# Rule pages", "", "One page per ID that a `kvproof check` report can hold (`kvproof rules --explain ID` prints the same",
             "text). Generated by `python scripts/make_rule_pages.py` from the rules and their fixtures; do not edit.", "",
             "| ID | family | refuses |", "| --- | --- | --- |"]
    for rule_id in data:
        family, message = describe(rule_id)
        lines.append(f"| [{rule_id}]({rule_id}.md) | {family} | {message.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
