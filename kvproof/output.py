"""Safe writes: every file kvproof writes goes through here.

Three promises, for every command that writes (``synth``, ``check -o``, ``explore -o``, witness and
counterexample folders, ``fuzz`` artifacts, ``import``):

* **Atomic.** Text goes to a temporary file in the target's own folder, is flushed and fsynced, and
  is renamed over the target. A failure (a full disk, ``RLIMIT_FSIZE``, a signal) leaves the old file
  or nothing, never a truncated one. A folder of several files is staged completely before the first
  rename, so a failure while staging changes nothing.
* **Confined.** A path is never followed through a symbolic link: the target itself and every folder
  between the output root and the target must not be links (``OutputError`` otherwise). Names are
  relative and may not climb out of the root (``..``, absolute names).
* **Own files only.** A folder remembers what kvproof wrote into it (``.kvproof-written``); a later run
  removes only those files, and only when they are still regular files kvproof wrote, never a link,
  never another file the user put there.

This module imports nothing of kvproof, so any layer may use it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterable

from .diagnostics import KvproofError

__all__ = ["OutputError", "write_file", "OutputFolder", "MANIFEST", "failure"]

#: The list of the files kvproof wrote into an output folder (one relative POSIX path per line).
MANIFEST = ".kvproof-written"


class OutputError(KvproofError):
    """A write kvproof refuses or cannot do; ``str()`` is the user-facing reason (exit code 2).
    Callers catch it next to ``OSError``."""


def failure(exc: OSError | OutputError, target: str | Path) -> str:
    """One line for a refused or failed write to ``target``: ``PATH: reason`` (an ``OutputError``
    names its own path; an ``OSError`` is told with the target the user named, not a temporary
    file's name)."""
    if isinstance(exc, OutputError):
        return str(exc)
    return f"{target}: {exc.strerror or exc}"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _refuse_link(path: Path, what: str) -> None:
    st = _lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OutputError(f"{path}: {what} is a symbolic link; kvproof does not write through links")


def _check_target(path: Path) -> None:
    _refuse_link(path, "the output file")
    st = _lstat(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path}: the output path exists and is not a regular file")


def check_destination(root: str | Path, names: Iterable[str]) -> None:
    """Refuse now (``OutputError``) what writing ``names`` into ``root`` later would refuse: a root
    that is not a folder, a link or a non-folder on the way, a target that is a link or not a
    regular file. Creates nothing. A command that computes for minutes before its first write
    (``prove --witness-dir``, ``claim --counterexample-dir``) calls it first."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise OutputError(f"{root}: the output path exists and is not a folder")
    for name in names:
        here = root
        parts = PurePosixPath(name).parts
        for part in parts[:-1]:
            here = here / part
            _refuse_link(here, "a folder inside the output folder")
            st = _lstat(here)
            if st is None:
                break
            if not stat.S_ISDIR(st.st_mode):
                raise OutputError(f"{here}: exists and is not a folder")
        else:
            _check_target(here / parts[-1])


def _stage(path: Path, text: str | bytes, errors: str = "strict") -> str:
    """Write ``text`` (bytes: as they are, a picture) to a new temporary file beside ``path``; its
    name. Removed on failure."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        binary = isinstance(text, bytes)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", errors=errors, newline="")) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _remove_quietly(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_file(path: str | Path, text: str | bytes, errors: str = "strict") -> Path:
    """Write one file atomically (``check -o``, ``explore -o``, ``simulate --plot``); the path written.

    The file's folder must exist (it is not created: a typo in ``-o`` should not make folders). The
    target may not be a symbolic link or a non-regular file."""
    target = Path(path)
    if not target.name or target.name in (".", ".."):
        raise OutputError(f"{path}: not a file name")
    parent = target.parent
    if not parent.is_dir():
        raise OutputError(f"{path}: the folder {parent} does not exist")
    _check_target(target)
    tmp = _stage(target, text, errors)
    try:
        os.replace(tmp, target)
    except BaseException:
        _remove_quietly(tmp)
        raise
    return target


class OutputFolder:
    """An output folder: files are staged with ``add`` and land together with ``commit``.

    >>> with OutputFolder("out") as folder:       # doctest: +SKIP
    ...     folder.add("worker-dp0-tp0-pp0.json", text)
    ...     folder.commit()

    Leaving the ``with`` block without ``commit`` (an exception) removes every staged temporary and
    changes nothing. ``clear_own(prefix)`` removes, at commit time, the files an earlier run wrote
    under ``prefix`` that this run does not write again."""

    def __init__(self, root: str | Path, create: bool = True):
        # The root itself may be a link: the user named it. Nothing below it may be one.
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise OutputError(f"{root}: the output path exists and is not a folder")
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        self._staged: dict[str, str] = {}  # relative name -> temporary file
        self._clear: list[str] = []
        self.written: list[Path] = []

    # -- names ---------------------------------------------------------------------------------
    def _relative(self, name: str) -> PurePosixPath:
        rel = PurePosixPath(name)
        if rel.is_absolute() or not rel.parts or any(p in ("", ".", "..") for p in rel.parts):
            raise OutputError(f"{name}: not a relative name inside {self.root}")
        return rel

    def _prepare_dirs(self, rel: PurePosixPath) -> Path:
        here = self.root
        for part in rel.parts[:-1]:
            here = here / part
            _refuse_link(here, "a folder inside the output folder")
            st = _lstat(here)
            if st is None:
                here.mkdir()
            elif not stat.S_ISDIR(st.st_mode):
                raise OutputError(f"{here}: exists and is not a folder")
        target = here / rel.parts[-1]
        _check_target(target)
        return target

    # -- staging and commit --------------------------------------------------------------------
    def add(self, name: str, text: str) -> None:
        rel = self._relative(name)
        key = rel.as_posix()
        if key == MANIFEST:
            raise OutputError(f"{name}: reserved name")
        target = self._prepare_dirs(rel)
        old = self._staged.pop(key, None)
        if old:
            _remove_quietly(old)
        self._staged[key] = _stage(target, text)

    def clear_own(self, prefix: str = "") -> None:
        """At commit, remove what an earlier run wrote under ``prefix`` and this run did not."""
        self._clear.append(prefix)

    def _manifest(self) -> list[str]:
        path = self.root / MANIFEST
        st = _lstat(path)
        if st is None or not stat.S_ISREG(st.st_mode):
            return []
        try:
            return [line for line in path.read_text(encoding="utf-8").splitlines() if line]
        except (OSError, UnicodeDecodeError):
            return []

    def commit(self) -> list[Path]:
        """Rename every staged file into place; the paths written (in the order added)."""
        previous = self._manifest()
        keep = set(self._staged)
        for key, tmp in list(self._staged.items()):
            target = self.root / key
            _check_target(target)  # again: nothing may have become a link since staging
            os.replace(tmp, target)
            del self._staged[key]
            self.written.append(target)
        stale = [k for k in previous if k not in keep and any(k.startswith(p) for p in self._clear)]
        for key in stale:
            try:
                rel = self._relative(key)
            except OutputError:
                continue
            if self._own_regular_file(rel):
                _remove_quietly(self.root / rel)
                self._remove_empty_folders(rel)
        listed = sorted(keep | {k for k in previous if k not in stale})
        manifest = self.root / MANIFEST
        _check_target(manifest)
        os.replace(_stage(manifest, "".join(f"{k}\n" for k in listed)), manifest)
        return self.written

    def _own_regular_file(self, rel: PurePosixPath) -> bool:
        """``rel`` is a regular file reached from the root without passing through a link."""
        here = self.root
        for part in rel.parts[:-1]:
            here = here / part
            st = _lstat(here)
            if st is None or not stat.S_ISDIR(st.st_mode):  # lstat: a link is not a folder here
                return False
        st = _lstat(here / rel.parts[-1])
        return st is not None and stat.S_ISREG(st.st_mode)

    def _remove_empty_folders(self, rel: PurePosixPath) -> None:
        """The folders between the root and a removed file, deepest first, while they are empty
        (``rmdir`` removes only an empty folder, so a user's file keeps its folder)."""
        for depth in range(len(rel.parts) - 1, 0, -1):
            try:
                os.rmdir(self.root.joinpath(*rel.parts[:depth]))
            except OSError:
                return

    def abort(self) -> None:
        for tmp in self._staged.values():
            _remove_quietly(tmp)
        self._staged.clear()

    def __enter__(self) -> "OutputFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.abort()
