"""Recognise a document's kind and load it strictly."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import attrs

from ..diagnostics import LOAD_KIND, LOAD_SYNTAX, Diagnostic, InputError
from .codec import parse_json, structure
from .profile import PROFILE_SCHEMA, Profile
from .record import RECORD_SCHEMA, SchedulerRecord, WorkerRecord

__all__ = ["Document", "detect_kind", "load_tree", "load_bytes", "load_path", "read_document", "KINDS"]

KINDS = ("profile", "worker", "scheduler", "geometry")


@attrs.frozen
class Document:
    """A loaded document: its kind, the model object and where it came from."""

    kind: str
    obj: Any
    file: str | None = None
    #: ``checked`` or ``probe`` (an accepted probe's record that phases are compared with).
    role: str = "checked"


def detect_kind(tree: Any) -> str | None:
    """``profile``, ``worker``, ``scheduler`` or ``geometry``; None when it is none of them."""
    if not isinstance(tree, dict):
        return None
    schema = tree.get("schema_version")
    if schema == PROFILE_SCHEMA:
        return "profile"
    if schema == RECORD_SCHEMA:
        kind = tree.get("kind")
        return kind if kind in ("worker", "scheduler") else None
    if schema is None and "layers" in tree:
        return "geometry"
    return None


def load_tree(tree: Any, file: str | None = None, kind: str | None = None) -> Document:
    kind = kind or detect_kind(tree)
    if kind == "profile":
        return Document(kind, structure(tree, Profile, file), file)
    if kind == "worker":
        return Document(kind, structure(tree, WorkerRecord, file), file)
    if kind == "scheduler":
        return Document(kind, structure(tree, SchedulerRecord, file), file)
    if kind == "geometry":
        from .geometry import load_geometry

        return Document(kind, load_geometry(tree, file), file)
    raise InputError([Diagnostic(
        LOAD_KIND, "$",
        f"unrecognised document: expected schema_version {PROFILE_SCHEMA!r} or {RECORD_SCHEMA!r} "
        "(with kind worker or scheduler), or a geometry with layers",
        file,
    )])


def load_bytes(data: bytes | str, file: str | None = None, kind: str | None = None) -> Document:
    try:
        return load_tree(parse_json(data, file), file, kind)
    except MemoryError:
        # One document too big to hold (for example a geometry whose layer range expands to
        # billions of layers) is that file's bad input; the other files are still checked.
        raise InputError([Diagnostic(LOAD_SYNTAX, "$", "document needs more memory than is available to load it", file)]) from None


def read_document(path: str | Path) -> bytes:
    """The bytes of a document file, read with bounded time and memory.

    At most ``MAX_DOCUMENT_BYTES + 1`` bytes are read, so a device such as ``/dev/zero`` or an
    endless pipe is refused as too large instead of filling memory; a FIFO is opened without
    blocking, so one that nobody writes reads as empty instead of hanging. Every failure is an
    ``LD001`` :class:`InputError` naming the file.
    """
    from .codec import MAX_DOCUMENT_BYTES

    name = str(path)
    too_large = InputError([Diagnostic(LOAD_SYNTAX, "$", f"document is larger than {MAX_DOCUMENT_BYTES} bytes", name)])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if hasattr(os, "O_NONBLOCK"):
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
            info = os.fstat(fd)
            regular = stat.S_ISREG(info.st_mode)
            if regular and info.st_size > MAX_DOCUMENT_BYTES:
                raise too_large
            data = _read_bounded(handle, info.st_size + 1 if regular else _CHUNK, MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise InputError([Diagnostic(LOAD_SYNTAX, "$", f"cannot read file: {exc.strerror or exc}", name)]) from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise too_large
    return data


#: Read size for a file whose size is unknown (a FIFO, a device): read(n) allocates n bytes first,
#: so one read(MAX_DOCUMENT_BYTES + 1) would cost a 64 MiB allocation for every small document.
_CHUNK = 1 << 20


def _read_bounded(handle, first: int, limit: int) -> bytes:
    """At most ``limit`` bytes: a first read of ``first`` bytes (a regular file's size + 1, so a
    file is normally read in one call that sees its end), then chunks until the end or the limit."""
    data = handle.read(min(first, limit))
    if len(data) < min(first, limit):  # a buffered read returns less than asked only at the end
        return data
    parts = [data]
    total = len(data)
    while total < limit:
        chunk = handle.read(min(_CHUNK, limit - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def load_path(path: str | Path, kind: str | None = None) -> Document:
    return load_bytes(read_document(path), str(path), kind)
