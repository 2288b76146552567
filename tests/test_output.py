"""kvproof.output: atomic, confined writes that remove only kvproof's own files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kvproof.output import MANIFEST, OutputError, OutputFolder, write_file


def test_write_file_replaces_atomically(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    write_file(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary left


def test_write_file_refuses_a_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    link = tmp_path / "report.json"
    link.symlink_to(outside)
    with pytest.raises(OutputError, match="symbolic link"):
        write_file(link, "x")
    assert outside.read_text() == "precious"


def test_write_file_needs_an_existing_folder(tmp_path):
    with pytest.raises(OutputError, match="does not exist"):
        write_file(tmp_path / "missing" / "r.json", "x")


def test_folder_refuses_links_inside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.json").write_text("precious")
    root = tmp_path / "out"
    root.mkdir()
    (root / "sub").symlink_to(outside)
    (root / "file.json").symlink_to(outside / "keep.json")
    with OutputFolder(root) as folder:
        with pytest.raises(OutputError):
            folder.add("sub/a.json", "x")
        with pytest.raises(OutputError):
            folder.add("file.json", "x")
        with pytest.raises(OutputError):
            folder.add("../escape.json", "x")
    assert (outside / "keep.json").read_text() == "precious"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.json"]


def test_folder_stages_then_commits_and_aborts_cleanly(tmp_path):
    root = tmp_path / "out"
    with OutputFolder(root) as folder:
        folder.add("a.json", "1")
        folder.add("b/c.json", "2")
        assert not (root / "a.json").exists()  # nothing lands before commit
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == []  # aborted: temporaries gone
    with OutputFolder(root) as folder:
        folder.add("a.json", "1")
        folder.add("b/c.json", "2")
        written = folder.commit()
    assert [p.relative_to(root).as_posix() for p in written] == ["a.json", "b/c.json"]
    assert (root / MANIFEST).read_text() == "a.json\nb/c.json\n"


def test_clear_own_removes_only_what_kvproof_wrote(tmp_path):
    root = tmp_path / "w"
    with OutputFolder(root) as folder:
        folder.add("SC005/one.json", "1")
        folder.add("SC005/two.json", "2")
        folder.commit()
    (root / "SC005" / "mine.json").write_text("the user's")
    with OutputFolder(root) as folder:
        folder.clear_own("SC005/")
        folder.add("SC005/one.json", "1'")
        folder.commit()
    assert sorted(p.name for p in (root / "SC005").iterdir()) == ["mine.json", "one.json"]


def test_clear_own_never_follows_a_link(tmp_path):
    root = tmp_path / "w"
    with OutputFolder(root) as folder:
        folder.add("SC005/one.json", "1")
        folder.commit()
    other = tmp_path / "other"
    other.mkdir()
    (other / "one.json").write_text("precious")
    for p in (root / "SC005").iterdir():
        p.unlink()
    (root / "SC005").rmdir()
    (root / "SC005").symlink_to(other)
    with OutputFolder(root) as folder:
        folder.clear_own("SC005/")
        folder.add("SC006.json", "x")
        folder.commit()
    assert (other / "one.json").read_text() == "precious"


def test_file_size_limit_leaves_no_truncated_file(tmp_path):
    """Under RLIMIT_FSIZE the write fails and neither a partial target nor a temporary remains."""
    code = (
        "import resource, sys\n"
        "from kvproof.output import OutputFolder\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "try:\n"
        "    with OutputFolder(sys.argv[1]) as f:\n"
        "        f.add('small.json', 'x' * 100)\n"
        "        f.add('big.json', 'y' * 100000)\n"
        "        f.commit()\n"
        "except OSError as exc:\n"
        "    print('failed', exc.errno)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "o")], capture_output=True, text=True)
    assert "failed" in proc.stdout, proc.stderr
    assert [p.name for p in (tmp_path / "o").iterdir()] == []
