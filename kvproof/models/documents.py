"""Recognise a document's kind and load it strictly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..diagnostics import LOAD_KIND, Diagnostic, InputError
from .codec import parse_json, structure
from .profile import PROFILE_SCHEMA, Profile
from .record import RECORD_SCHEMA, SchedulerRecord, WorkerRecord

__all__ = ["Document", "detect_kind", "load_tree", "load_bytes", "load_path", "KINDS"]

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
    return load_tree(parse_json(data, file), file, kind)


def load_path(path: str | Path, kind: str | None = None) -> Document:
    path = Path(path)
    from .codec import MAX_DOCUMENT_BYTES

    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise InputError([Diagnostic("LD001", "$", f"document is larger than {MAX_DOCUMENT_BYTES} bytes", str(path))])
        data = path.read_bytes()
    except OSError as exc:
        raise InputError([Diagnostic("LD001", "$", f"cannot read file: {exc.strerror or exc}", str(path))]) from None
    return load_bytes(data, str(path), kind)
