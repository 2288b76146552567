"""The terminal: colour, ``--quiet`` and progress for a person at a TTY.

Every report is built as plain text, so a pipe or a file gets the same bytes on every run. Only
when the stream a report goes to is a terminal (or ``--color always``) does :mod:`rich` colour it,
and only then is rich imported: ``kvproof check ... > file`` never loads it. Colour follows
``--color auto|always|never`` (auto: on a terminal, unless NO_COLOR is set and not empty, or
TERM=dumb; https://no-color.org). Progress bars go to stderr, only when stderr is a terminal, and
never under ``--quiet``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Iterable, Iterator, TypeVar

import attrs

COLOR_MODES = ("auto", "always", "never")
T = TypeVar("T")


@attrs.define
class Settings:
    color: str = "auto"
    quiet: bool = False


#: This command's settings (set by the ``--color`` and ``--quiet`` options of kvproof.cli).
settings = Settings()

#: The live progress display, if one is shown: report lines written to the terminal pause it.
_live = None


def color_on(stream) -> bool:
    """Whether text written to ``stream`` is coloured."""
    if settings.color != "auto":
        return settings.color == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _console(stream):
    """A rich console on ``stream`` that follows ``--color``: ``always`` forces the 16 standard
    colours even into a pipe, ``never`` none (a progress bar too), ``auto`` leaves it to rich
    (a terminal, NO_COLOR, TERM=dumb)."""
    from rich.console import Console

    forced = settings.color == "always"
    return Console(file=stream, force_terminal=True if forced else None,
                   no_color={"always": False, "never": True}.get(settings.color),
                   color_system="standard" if forced else "auto", highlight=False, markup=False, emoji=False,
                   soft_wrap=True)


def _highlighter():
    """What a report's reader looks for first: verdicts, rule IDs, JSON paths, files."""
    from rich.highlighter import RegexHighlighter
    from rich.theme import Theme

    class ReportHighlighter(RegexHighlighter):
        base_style = "kvproof."
        highlights = [
            r"(?m)^(?P<file>[^\s:][^:\n]*?):(?= [A-Z][A-Za-z]*-?[A-Z]*\d{3} )",
            r"(?<![\w/.-])(?P<rule>(?:[A-Z]{2,3}\d{3}|fuzz-[a-z]+))(?![\w/.])",
            r"(?<!\S)(?P<path>\$[^\s:]*)",
            r"(?P<good>\b(?:accepted|reachable|holds|optimal|needed|as expected|ok: no failure)\b)",
            r"(?<!\b0 )(?P<bad>\b(?:refused|refuted|refuses|rejects|rejected|raises|FAILED|SURVIVING|mismatch|contrary|"
            r"bad input)\b)",
            r"(?<!\b0 )(?P<warn>\b(?:unknown|warning|known gap|note)\b)",
        ]

    theme = Theme({"kvproof.file": "bold", "kvproof.rule": "bold cyan", "kvproof.path": "magenta",
                   "kvproof.good": "green", "kvproof.bad": "bold red", "kvproof.warn": "yellow"})
    return ReportHighlighter(), theme


class Painter:
    """Writes text to a terminal with the report highlighter's colours (rich, imported here)."""

    def __init__(self, stream):
        self.console = _console(stream)
        self.highlighter, theme = _highlighter()
        self.console.push_theme(theme)

    def write(self, text: str) -> None:
        from rich.text import Text

        self.console.print(self.highlighter(Text(text)), end="")


class ReportStream:
    """stdout during one command: under ``--quiet`` the text report is held and only its verdict
    line is written at the end; on a terminal each line is coloured, and a live progress display
    on the same terminal is paused while it is written."""

    def __init__(self, stream, colour: bool, quiet: bool, verdict: Callable[[list[str]], list[str]]):
        self._stream = stream
        self._quiet = quiet
        self._verdict = verdict
        self._pending = ""
        self._held: list[str] = []
        self._painter = Painter(stream) if colour else None

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            self._emit(complete + "\n")
        return len(text)

    def flush(self) -> None:
        if not self._quiet and self._pending:
            self._emit(self._pending)
            self._pending = ""
        self._stream.flush()

    def close(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""
        if self._quiet:
            lines = self._verdict([line for line in "".join(self._held).splitlines() if line.strip()])
            self._held = []
            self._quiet = False
            if lines:
                self._emit("\n".join(lines) + "\n")
        self._stream.flush()

    def _emit(self, text: str) -> None:
        if self._quiet:
            self._held.append(text)
            return
        with _paused(self._stream):
            if self._painter is not None:
                self._painter.write(text)
            else:
                self._stream.write(text)
            self._stream.flush()

    def isatty(self) -> bool:
        return _isatty(self._stream)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def last_line(lines: list[str]) -> list[str]:
    """The verdict line of most reports: the summary they end with."""
    return lines[-1:]


def first_line(lines: list[str]) -> list[str]:
    return lines[:1]


def line_starting(*prefixes: str) -> Callable[[list[str]], list[str]]:
    """The verdict line of a report that lists details after it (``fuzz``: ``FAILED: ...``)."""
    def pick(lines: list[str]) -> list[str]:
        found = [line for line in lines if line.startswith(prefixes)]
        return found[-1:] or lines[-1:]
    return pick


@contextlib.contextmanager
def report(fmt: str = "text", verdict: Callable[[list[str]], list[str]] = last_line) -> Iterator[None]:
    """Route the command's stdout through a :class:`ReportStream` when it needs one: a text
    report under ``--quiet``, or stdout a terminal (colour, and pausing a progress display).
    Machine formats are never shrunk or coloured."""
    stream = sys.stdout
    quiet = settings.quiet and fmt == "text"
    colour = fmt == "text" and color_on(stream)
    if not (quiet or colour or _isatty(stream)):
        yield  # a pipe or a file: the report's bytes, untouched, and rich never imported
        return
    proxy = ReportStream(stream, colour, quiet, verdict)
    sys.stdout = proxy
    try:
        yield
    finally:
        sys.stdout = stream
        proxy.close()


@contextlib.contextmanager
def _paused(stream) -> Iterator[None]:
    """A live progress display is stopped (a transient one erases itself) while report lines are
    written to the terminal it is drawn on, then drawn again below them."""
    live = _live
    if live is None or not _isatty(stream):
        yield
        return
    live.stop()
    try:
        yield
    finally:
        live.start()


def progress_enabled() -> bool:
    return not settings.quiet and _isatty(sys.stderr) and os.environ.get("TERM") != "dumb"


@contextlib.contextmanager
def progress(label: str, total: int | None = None) -> Iterator[Callable[..., None] | None]:
    """A progress bar on stderr, for a long run: yields ``update(done, total=None)``, or None when
    stderr is not a terminal (or ``--quiet``): then nothing is drawn and rich is not imported."""
    global _live
    if not progress_enabled():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(sys.stderr)
    bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("{task.fields[item]}"), console=console, transient=True,
                   redirect_stdout=False, redirect_stderr=False)
    task = bar.add_task(label, total=total, item="")

    def update(done: int, total: int | None = None, item: str = "") -> None:
        if total is not None:
            bar.update(task, total=max(total, 1))
        bar.update(task, completed=done, item=item)

    previous, _live = _live, bar
    bar.start()
    try:
        yield update
    finally:
        bar.stop()
        _live = previous


def tracked(items: Iterable[T], label: str, total: int, name: Callable[[T], str], finished: bool) -> Iterator[T]:
    """``items`` as they come, each advancing a :func:`progress` bar named by ``name(item)``:
    ``finished``, each item arrives done (prove's results); else each is worked on once handed out
    (the claims ``claim`` proves)."""
    with progress(label, total) as update:
        for done, item in enumerate(items, start=1):
            if update is not None:
                update(done if finished else done - 1, item=name(item))
            yield item


def number(value) -> str:
    """A number as a person reads it: thousands separated (1,048,576); None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)  # a float keeps every digit (a concurrency is compared with vLLM's)
