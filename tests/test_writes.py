"""Issue #13 item 5: every writer is atomic, never writes through a link, and removes only what
kvproof wrote; a refused or failed write is exit 2 with one line, never a traceback."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kvproof
from kvproof.cli import main
from kvproof.solver.witnesses import write_documents

ROOT = Path(__file__).resolve().parents[1]
#: The checkout whose kvproof the tests import (the subprocesses run the same one).
CODE = Path(kvproof.__file__).resolve().parents[1]
GEOMETRY = ROOT / "examples" / "geometries" / "plain-32-full-attention.json"
GEMMA = ROOT / "examples" / "gemma-like-swa"


def _kvproof(*args, cwd: Path = CODE, preexec_fn=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(CODE)}
    env.pop("KVPROOF_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "kvproof", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env, preexec_fn=preexec_fn)


def _one_line_error(run: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_synth_under_a_file_size_limit_leaves_no_truncated_record(tmp_path) -> None:
    """`prlimit --fsize=2000 kvproof synth G -o D`: the records are ~10 kB each."""
    out = tmp_path / "records"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    run = _kvproof("synth", GEOMETRY, "-o", out, preexec_fn=limit)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "kvproof synth: cannot write the records to" in _one_line_error(run)
    assert "File too large" in run.stderr
    assert sorted(p.name for p in out.iterdir()) == []  # nothing half-written, no temporary left


def test_synth_stages_every_record_before_the_first_lands(tmp_path) -> None:
    out = tmp_path / "records"
    assert main(["synth", str(GEOMETRY), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"worker-dp0-tp0-pp0.json", "scheduler-dp0.json", ".kvproof-written"} <= set(before)
    (out / "notes.json").write_text("mine")  # a user's file beside the records is never touched
    assert main(["synth", str(GEOMETRY), "-o", str(out)]) == 0
    assert (out / "notes.json").read_text() == "mine"
    assert main(["check", str(out / "worker-dp0-tp0-pp0.json"), str(out / "scheduler-dp0.json")]) == 0


def test_synth_does_not_write_through_a_link(tmp_path, capsys) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    out = tmp_path / "records"
    out.mkdir()
    (out / "scheduler-dp0.json").symlink_to(outside)
    assert main(["synth", str(GEOMETRY), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the output file is a symbolic link; kvproof does not write through links" in err
    assert outside.read_text() == "precious"
    assert not (out / "worker-dp0-tp0-pp0.json").exists()  # staged, never committed


def test_check_output_does_not_write_through_a_link(tmp_path, capsys) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    report = tmp_path / "report.txt"
    report.symlink_to(outside)
    assert main(["check", str(GEMMA), "-o", str(report)]) == 2
    assert "kvproof check: cannot write the report: " in capsys.readouterr().err
    assert outside.read_text() == "precious"
    real = tmp_path / "real.txt"
    assert main(["check", str(GEMMA), "-o", str(real)]) == 0
    assert "2 document(s): 2 accepted" in real.read_text()


def test_witness_dir_with_a_linked_rule_folder_deletes_nothing(tmp_path) -> None:
    """`prove SC005 -o W` with W/SC005 a link to another folder deleted its *.json."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.json").write_text("{}")
    witnesses = tmp_path / "W"
    witnesses.mkdir()
    (witnesses / "SC005").symlink_to(other)
    run = _kvproof("prove", "SC005", "--output", witnesses)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "symbolic link" in _one_line_error(run)
    assert sorted(p.name for p in other.iterdir()) == ["keep.json"]


def test_write_documents_removes_only_its_own_stale_files(tmp_path) -> None:
    write_documents(tmp_path, "R", [("a.json", "1"), ("b/c.json", "2")])
    assert (tmp_path / "R" / "b" / "c.json").read_text() == "2"
    (tmp_path / "R" / "user.json").write_text("mine")
    assert write_documents(tmp_path, "R", [("a.json", "3"), ("d.json", "4")]) == str(tmp_path / "R")
    assert sorted(str(p.relative_to(tmp_path / "R")) for p in (tmp_path / "R").rglob("*")) == [
        "a.json", "d.json", "user.json"]  # b/c.json (kvproof's, stale) and its folder are gone
    assert write_documents(tmp_path, "R", [("only.json", "5")]) == str(tmp_path / "R.json")
    assert (tmp_path / "R.json").read_text() == "5"
    assert sorted(p.name for p in (tmp_path / "R").iterdir()) == ["user.json"]


def test_fuzz_writes_nothing_into_the_working_folder(tmp_path, capsys, monkeypatch) -> None:
    """A failure's documents go to a new temporary folder unless --output names one."""
    from kvproof.fuzz import explained

    monkeypatch.setattr(explained, "VALID_VARIANTS",
                        tuple(v for v in explained.VALID_VARIANTS if (v.owner, v.field) != ("CacheGroup", "name")))
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(ROOT / "examples" / "minimax-m27-tp4" / "profile.json", inputs / "profile.json")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["fuzz", "--campaign", "mutation", "--count", "0", str(inputs)]) == 1
    out = capsys.readouterr().out
    assert list(work.iterdir()) == []
    reproduce = next(line for line in out.splitlines() if "reproduce: kvproof check" in line)
    folder = Path(reproduce.split("kvproof check ", 1)[1].split()[0])
    assert folder.name == "mutant-0001" and folder.parent.name.startswith("kvproof-fuzz-")
    assert json.loads((folder / "profile.json").read_text())["resources"]["cache_groups"][0]["name"] == "kvproof-unknown"
    shutil.rmtree(folder.parent)


def test_fuzz_out_removes_only_its_own_artifacts(tmp_path, capsys, monkeypatch) -> None:
    """A later run clears the artifacts an earlier run wrote (not a folder the user keeps there)."""
    from kvproof.fuzz import explained

    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(ROOT / "examples" / "minimax-m27-tp4" / "profile.json", inputs / "profile.json")
    out = tmp_path / "o"
    with monkeypatch.context() as patch:
        patch.setattr(explained, "VALID_VARIANTS",
                      tuple(v for v in explained.VALID_VARIANTS if (v.owner, v.field) != ("CacheGroup", "name")))
        assert main(["fuzz", "--campaign", "mutation", "--count", "0", "--output", str(out), str(inputs)]) == 1
    assert (out / "mutant-0001" / "profile.json").exists()
    (out / "mine").mkdir()
    (out / "mine" / "keep.json").write_text("{}")
    assert main(["fuzz", "--campaign", "mutation", "--count", "0", "--output", str(out), str(inputs)]) == 0
    capsys.readouterr()
    assert not (out / "mutant-0001").exists()
    assert (out / "mine" / "keep.json").read_text() == "{}"


def test_gitignore_knows_the_fuzz_folders() -> None:
    ignored = (CODE / ".gitignore").read_text().split()
    assert "kvproof-fuzz/" in ignored and "kvproof-fuzz-*/" in ignored


@pytest.mark.parametrize("writer", ["synth", "check"])
def test_an_unwritable_output_is_exit_2_with_one_line(tmp_path, writer) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    args = {"synth": ("synth", GEOMETRY, "-o", blocker / "records"),
            "check": ("check", GEMMA, "-o", blocker / "report.txt")}[writer]
    run = _kvproof(*args)
    assert run.returncode == 2
    assert "cannot write" in _one_line_error(run)


def test_a_linked_counterexample_folder_is_refused_before_any_claim_is_decided(tmp_path) -> None:
    """As for witnesses: the destination is checked first, so the refusal costs no solving."""
    other = tmp_path / "other"
    other.mkdir()
    folder = tmp_path / "C"
    folder.mkdir()
    (folder / "CL001").symlink_to(other)
    run = _kvproof("claim", "--all", "--output", folder)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "symbolic link" in _one_line_error(run)
    assert run.stdout == ""  # no verdict: nothing was decided


def test_fuzz_leaves_nothing_in_the_working_directory(tmp_path) -> None:
    """Hypothesis keeps its caches in ``.hypothesis`` of the working directory by default: a
    campaign run from an empty folder leaves it empty (its caches go to a temporary folder)."""
    work = tmp_path / "empty"
    work.mkdir()
    run = _kvproof("fuzz", "--campaign", "all", "--seed", "5", "-n", "2", GEMMA, cwd=work)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert sorted(p.name for p in work.iterdir()) == []
