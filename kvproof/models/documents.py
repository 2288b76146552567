"""Recognise a document's kind and load it strictly."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import attrs

from ..diagnostics import LOAD_KIND, LOAD_SYNTAX, Diagnostic, InputError
from .codec import ABSENT, MAX_SAFE_INT, parse_json, structure
from .profile import PROFILE_SCHEMA, Profile
from .record import RECORD_SCHEMA, SchedulerRecord, WorkerRecord

__all__ = ["Document", "detect_kind", "load_tree", "load_bytes", "load_parsed", "load_path", "read_document",
           "KINDS", "RankTwins", "rank_free_tree"]

KINDS = ("profile", "worker", "scheduler", "geometry")


@attrs.frozen
class Document:
    """A loaded document: its kind, the model object and where it came from."""

    kind: str
    obj: Any
    file: str | None = None
    #: ``checked`` or ``probe`` (an accepted probe's record that phases are compared with).
    role: str = "checked"
    #: The parsed JSON of a worker record read by :func:`load_bytes` (a tree nobody else holds, so
    #: it stays as structured; up to 8 MiB of document), else None: :class:`RankTwins` compares
    #: TP ranks by it in C instead of walking the attrs objects.
    tree: Any = attrs.field(default=None, eq=False, repr=False)
    #: The earlier worker record of the same load this one is a TP-rank twin of (:class:`RankTwins`:
    #: equal but for ranks and devices, types included), else None. The loader is the one place
    #: twins are found; the checker and the fuzzer read this.
    rank_twin_of: Any = attrs.field(default=None, eq=False, repr=False)

    def rank_original(self) -> "Document":
        """The record this one is a TP-rank twin of, else itself: records with the same original
        get the same findings from every rule of a worker record (none reads ranks or devices)."""
        return self.rank_twin_of if self.rank_twin_of is not None else self


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


def load_bytes(data: bytes | str, file: str | None = None, kind: str | None = None,
               ranks: RankTwins | None = None) -> Document:
    """Load one document. ``ranks`` (one per set of documents loaded together) structures a worker
    record that equals an earlier one but for its ranks and devices from the earlier's objects."""
    try:
        return load_parsed(data, parse_json(data, file), file, kind, ranks)
    except MemoryError:
        # One document too big to hold (for example a geometry whose layer range expands to
        # billions of layers) is that file's bad input; the other files are still checked.
        raise InputError([Diagnostic(LOAD_SYNTAX, "$", "document needs more memory than is available to load it", file)]) from None


def load_parsed(data: bytes | str, tree: Any, file: str | None = None, kind: str | None = None,
                ranks: RankTwins | None = None) -> Document:
    """:func:`load_bytes` of a document already parsed (``tree`` is ``data`` parsed): for a reader
    that keeps the tree too (the fuzzer edits it)."""
    if ranks is not None:
        twin = ranks.twin(data, tree, file, kind)
        if twin is not None:
            return twin
    document = load_tree(tree, file, kind)
    if document.kind == "worker" and len(data) <= _KEEP_TREE_BYTES:
        document = attrs.evolve(document, tree=tree)
        if ranks is not None:
            ranks.remember(data, document)
    return document


#: A worker record's tree is kept (for the TP-twin test of :class:`RankTwins`) up to this size of document:
#: the tree of a bigger one would hold several times its size in memory until the check ends.
_KEEP_TREE_BYTES = 8 * 1024 * 1024


def rank_free_tree(tree: dict) -> dict:
    """A worker record's JSON tree with its ranks and storage devices blanked: the TP ranks of one
    deployment are equal by it (:class:`RankTwins`)."""
    cache = tree["cache"]
    storages = [{**storage, "device": None} for storage in cache["storages"]]
    return {**tree, "dp_rank": 0, "tp_rank": 0, "pp_rank": 0, "cache": {**cache, "storages": storages}}


_RANK_VALUES = re.compile(rb'_rank"\s*:\s*\d+')
_DEVICE_VALUES = re.compile(rb'device"\s*:\s*(?:"(?:[^"\\]|\\.)*"|null)')


class RankTwins:
    """Worker records already structured in one load, to structure their TP-rank twins cheaply.

    A record is an earlier one's twin when (1) their rank-free trees are equal and (2) their texts
    are equal once every ``*_rank`` integer and ``device`` string is blanked. (1) alone is not
    enough: ``True == 1 == 1.0`` in Python, and the strict loader keeps bools and floats of
    ``Scalar`` fields for the rules to judge; (2) sees every such difference as text. The twin's
    objects are then the earlier's with its own ranks and devices, which is exactly what
    structuring it would give (only those values differ, and they are checked as the loader would).
    A record with any other difference is structured in full."""

    def __init__(self) -> None:
        self._seen: list[tuple[bytes, dict, Document]] = []

    @staticmethod
    def _text_key(data: bytes | str) -> bytes:
        raw = data.encode() if isinstance(data, str) else data
        return _DEVICE_VALUES.sub(b"@", _RANK_VALUES.sub(b"@", raw))

    def remember(self, data: bytes | str, document: Document) -> None:
        self._seen.append((self._text_key(data), rank_free_tree(document.tree), document))

    def twin(self, data: bytes | str, tree: Any, file: str | None, kind: str | None) -> Document | None:
        if not self._seen or kind not in (None, "worker") or detect_kind(tree) != "worker" or len(data) > _KEEP_TREE_BYTES:
            return None
        try:
            ranks = {key: tree[key] for key in ("dp_rank", "tp_rank", "pp_rank")}
            devices = [storage.get("device", ABSENT) for storage in tree["cache"]["storages"]]
        except (KeyError, TypeError, AttributeError):
            return None  # malformed: the full loader reports it with its path
        if not all(type(v) is int and 0 <= v <= MAX_SAFE_INT for v in ranks.values()):
            return None
        if not all(d is ABSENT or d is None or type(d) is str for d in devices):
            return None
        key = self._text_key(data)
        mine = None
        for text_key, rank_free, earlier in self._seen:
            if text_key != key:
                continue
            if mine is None:
                mine = rank_free_tree(tree)
            if rank_free == mine:
                record = earlier.obj
                storages = [attrs.evolve(storage, device=device)
                            for storage, device in zip(record.cache.storages, devices)]
                obj = attrs.evolve(record, **ranks, cache=attrs.evolve(record.cache, storages=storages))
                return Document("worker", obj, file, tree=tree, rank_twin_of=earlier)
        return None


def read_document(path: str | Path) -> bytes:
    """The bytes of a document file, read with bounded time and memory.

    At most ``MAX_DOCUMENT_BYTES + 1`` bytes are read, so a device such as ``/dev/zero`` or an
    endless pipe is refused as too large instead of filling memory. A file that is not a regular
    file (a FIFO, a terminal, a device) is read without ever blocking: one that nobody writes
    reads as empty, and one whose writer sends nothing for :data:`PIPE_IDLE_SECONDS` is refused
    instead of hanging. Every failure is an ``LD001`` :class:`InputError` naming the file.
    """
    from .codec import MAX_DOCUMENT_BYTES

    name = str(path)
    too_large = InputError([Diagnostic(LOAD_SYNTAX, "$", f"document is larger than {MAX_DOCUMENT_BYTES} bytes", name)])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb", buffering=0) as handle:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                if info.st_size > MAX_DOCUMENT_BYTES:
                    raise too_large
                os.set_blocking(fd, True)  # a regular file never blocks; read it in one call
                data = _read_bounded(handle, info.st_size + 1, MAX_DOCUMENT_BYTES + 1)
            else:
                data = _read_stream(fd, MAX_DOCUMENT_BYTES + 1, name)
    except OSError as exc:
        raise InputError([Diagnostic(LOAD_SYNTAX, "$", f"cannot read file: {unreadable_reason(exc)}", name)]) from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise too_large
    return data


def unreadable_reason(exc: OSError) -> str:
    """What an ``OSError`` of opening a document means, in words (a link loop says so)."""
    import errno

    if exc.errno == errno.ELOOP:
        return "a symbolic link loop (too many levels of symbolic links)"
    return exc.strerror or str(exc)


#: A FIFO (or another stream) whose writer sends nothing for this long is refused: a writer that
#: never writes would otherwise block the reader for ever.
PIPE_IDLE_SECONDS = 5.0

#: Read size for a file whose size is unknown (a FIFO, a device): read(n) allocates n bytes first,
#: so one read(MAX_DOCUMENT_BYTES + 1) would cost a 64 MiB allocation for every small document.
_CHUNK = 1 << 20


def _read_stream(fd: int, limit: int, name: str) -> bytes:
    """At most ``limit`` bytes of a non-blocking stream, to its end: a FIFO without a writer
    ends at once (empty); :data:`PIPE_IDLE_SECONDS` without data is an ``LD001``."""
    import select

    parts: list[bytes] = []
    total = 0
    while total < limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit - total))
        except BlockingIOError:  # a writer is there but has sent nothing yet
            ready, _, _ = select.select([fd], [], [], PIPE_IDLE_SECONDS)
            if not ready:
                raise InputError([Diagnostic(
                    LOAD_SYNTAX, "$", f"cannot read file: a pipe or device that sent no data for "
                    f"{PIPE_IDLE_SECONDS:g} s (is its writer stuck?)", name)]) from None
            continue
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def _read_bounded(handle, first: int, limit: int) -> bytes:
    """At most ``limit`` bytes: a first read of ``first`` bytes (a regular file's size + 1, so a
    file is normally read in one call that sees its end), then chunks until the end or the limit."""
    data = handle.read(min(first, limit))
    if len(data) < min(first, limit):  # a read returns less than asked only at the end
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


def load_path(path: str | Path, kind: str | None = None, ranks: RankTwins | None = None) -> Document:
    return load_bytes(read_document(path), str(path), kind, ranks)
