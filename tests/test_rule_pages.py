"""The rule pages (docs/rules/ID.md, ``kvproof rules --explain ID``) and the rule table's text
view: current with the rules and their fixtures, shipped as package data, the why shown, the
loader's IDs listed, IDs case-insensitive."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.commands.rules import PAGES_DATA, all_ids
from kvproof.rules.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("make_rule_pages", ROOT / "scripts" / "make_rule_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages() -> dict:
    return _generator().wanted()


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_pages_and_their_data_are_current(pages) -> None:
    stale, extra = _generator().not_current(pages)
    assert not stale and not extra, "run: python scripts/make_rule_pages.py"


def test_a_stale_page_is_found(pages, tmp_path) -> None:
    generator = _generator()
    docs = tmp_path / "rules"
    docs.mkdir()
    moved = {docs / path.name: text for path, text in pages.items() if path.parent.name == "rules" and path.suffix == ".md"}
    for path, text in moved.items():
        path.write_text(text, encoding="utf-8")
    assert generator.not_current(moved, docs) == ([], [])
    (docs / "CK002.md").write_text(moved[docs / "CK002.md"].replace("reachable", "dead"), encoding="utf-8")
    (docs / "XX001.md").write_text("a page of no rule\n", encoding="utf-8")
    assert generator.not_current(moved, docs) == ([docs / "CK002.md"], [docs / "XX001.md"])


def test_every_id_has_a_page_with_its_examples_and_verdict() -> None:
    data = json.loads(PAGES_DATA.read_text(encoding="utf-8"))
    assert sorted(data) == sorted(all_ids()) and all_ids()[:3] == ["LD001", "LD002", "LD003"]
    for rule in all_rules():
        page = (ROOT / "docs" / "rules" / f"{rule.id}.md").read_text(encoding="utf-8")
        assert page.startswith(f"# {rule.id}: {rule.message}\n")
        assert rule.source in page and "## Why" in page and "## The solver's verdict" in page
        assert ("Expected **dead**" in page) == (rule.expect == "dead")
        if rule.expect == "reachable":  # a refused fixture, with its complete expected report
            refused = data[rule.id]["refused"]
            case = ROOT / refused["fixture"].rstrip("/")
            expected = (case.parent / f"{case.stem if case.suffix else case.name}.expected.jsonl").read_text()
            assert refused["report"] == [json.loads(line) for line in expected.splitlines() if line]
            assert any(d["rule"] == rule.id for d in refused["report"])
    for loader_id in ("LD001", "LD002", "LD003"):  # the example really is refused with its ID
        assert data[loader_id]["refused"]["report"][0]["rule"] == loader_id


def test_explain_prints_the_page_and_ids_are_case_insensitive(capsys) -> None:
    code, out, _ = run(capsys, "rules", "--explain", "ck002")
    assert code == 0 and out == (ROOT / "docs" / "rules" / "CK002.md").read_text(encoding="utf-8")
    code, out, _ = run(capsys, "rules", "--explain", "ld001")
    assert code == 0 and out.startswith("# LD001: ")
    assert run(capsys, "rules", "--explain", "XX999")[0] == 2
    code, out, _ = run(capsys, "rules", "pf001", "Ck002")
    assert code == 0 and [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == ["CK002", "PF001"]


def test_the_text_view_shows_why_and_lists_the_loader_ids(capsys) -> None:
    code, out, _ = run(capsys, "rules")
    heads = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert code == 0 and heads == all_ids()
    assert out.count("       why: ") == len(all_ids())
    assert "why: vLLM writes ``int(alignment is not None)``" in out
    code, out, _ = run(capsys, "rules", "--sort", "id")
    heads = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert heads == sorted(all_ids()) and heads != all_ids()


def test_the_pages_data_is_in_the_wheel(tmp_path) -> None:
    """``--explain`` after a plain ``pip install .``: the wheel carries kvproof/rules/pages.json."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("kvproof-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("kvproof/rules/pages.json") == PAGES_DATA.read_bytes()
