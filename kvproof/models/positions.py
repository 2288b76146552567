"""Where a JSON path's value starts in a document's text (line and column, both from 1).

``kvproof check`` never pays for this: only the SARIF and GitHub reports ask, after the check,
and then only for the paths of their findings. The text is scanned again along each path: the
members and elements before the one a step names are skipped by the C JSON scanner
(``raw_decode``), so a lookup costs one parse of the value's preceding siblings, not a second
tree with positions for every value of every document.

Columns count Unicode code points (SARIF ``columnKind: unicodeCodePoints``); a byte-order mark
is not counted. A path that runs past what the document holds (a missing key, the value a rule
wants added) resolves to its deepest ancestor that the document holds.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from pathlib import Path

from .codec import MAX_DOCUMENT_BYTES

__all__ = ["locate", "steps", "Positions"]

_STEP = re.compile(r'\.([^\W\d]\w*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
#: "invalid JSON: ... at line N column M": where the parser stopped (LD001).
_SYNTAX_AT = re.compile(r" at line (\d+) column (\d+)$")


def steps(path: str) -> list[str | int]:
    """The keys and indexes of a JSON path as :func:`kvproof.rules.core.child` writes them
    (``$.a.b[3]["x.y"]``); parsing stops at the first step it cannot read."""
    out: list[str | int] = []
    if not path.startswith("$"):
        return out
    at = 1
    while at < len(path):
        match = _STEP.match(path, at)
        if match is None:
            break
        name, index, quoted = match.groups()
        if name is not None:
            out.append(name)
        elif index is not None:
            out.append(int(index))
        else:
            try:
                out.append(json.loads(quoted))
            except ValueError:
                break
        at = match.end()
    return out


def _offset(text: str, path: str) -> int:
    """The offset of the value at ``path``, or of its deepest ancestor in the text."""
    at = _SPACE.match(text, 0).end()
    try:
        for step in steps(path):
            found = _member(text, at, step) if isinstance(step, str) else _element(text, at, step)
            if found is None:
                break
            at = found
    except (ValueError, IndexError):  # text the loader refused: keep the deepest value reached
        pass
    return at


def _member(text: str, at: int, key: str) -> int | None:
    if text[at] != "{":
        return None
    found = None
    at = _SPACE.match(text, at + 1).end()
    while text[at] != "}":
        name, at = scanstring(text, at + 1)
        at = _SPACE.match(text, at).end() + 1  # the colon
        at = _SPACE.match(text, at).end()
        if name == key:
            found = at  # a repeated key: the loader keeps the last one, and so does this
        _value, at = _DECODER.raw_decode(text, at)
        at = _SPACE.match(text, at).end()
        if text[at] == ",":
            at = _SPACE.match(text, at + 1).end()
    return found


def _element(text: str, at: int, index: int) -> int | None:
    if text[at] != "[":
        return None
    at = _SPACE.match(text, at + 1).end()
    position = 0
    while text[at] != "]":
        if position == index:
            return at
        _value, at = _DECODER.raw_decode(text, at)
        at = _SPACE.match(text, at).end()
        if text[at] == ",":
            at = _SPACE.match(text, at + 1).end()
        position += 1
    return None


def locate(text: str, path: str) -> tuple[int, int]:
    """(line, column) of the value at ``path`` in ``text``, both counted from 1."""
    if text.startswith("\ufeff"):
        text = text[1:]
    offset = _offset(text, path) if text.strip() else 0
    line = text.count("\n", 0, offset) + 1
    return line, offset - text.rfind("\n", 0, offset)


class Positions:
    """The positions of findings in their files, each file read once (and only a regular file
    no larger than the loader reads: never a FIFO, a device or a link loop)."""

    def __init__(self) -> None:
        self._texts: dict[str, str | None] = {}

    def text(self, file: str) -> str | None:
        if file not in self._texts:
            self._texts[file] = _read(file)
        return self._texts[file]

    def of(self, file: str | None, rule: str, path: str, message: str = "") -> tuple[int, int] | None:
        """Where the finding ``rule`` at ``path`` of ``file`` starts, or None when the file
        cannot be read as text (a loader refusal of its bytes, a missing file)."""
        if rule == "LD001":
            at = _SYNTAX_AT.search(message)
            if at:
                return int(at.group(1)), int(at.group(2))
        if not file:
            return None
        text = self.text(file)
        if text is None:
            return None
        return locate(text, path)


def _read(file: str) -> str | None:
    path = Path(file)
    try:
        if not path.is_file() or path.stat().st_size > MAX_DOCUMENT_BYTES:
            return None
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
