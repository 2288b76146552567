"""Witnesses: the documents a solver answer stands for, written to disk and replayed.

Every answer that comes with documents (a reachable rule's witness, a rule that is not implied,
a claim's counterexample, explore's optimum, a parity input) is confirmed the same way: the
documents are loaded strictly, each with the role of its folder (:func:`~kvproof.solver.encode.role_of`),
and the concrete checker is run on them (:func:`replay`); what it refuses, and with which rule
first, is compared with what the solver claimed. :func:`write_documents` writes them (one
writer for witnesses and counterexamples), :func:`load_witness` reads a stored one back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import attrs

from ..diagnostics import Diagnostic, InputError
from ..models.documents import Document, load_bytes, load_path, load_tree
from ..output import OutputFolder
from ..rules.check import check
from ..rules.core import Rule
from .encode import role_of

__all__ = ["Replayed", "load_documents", "replay", "replay_refusal", "load_witness", "write_documents"]


def load_documents(documents: Iterable[tuple[str, Any]], folder: str, roles: Iterable[str] | None = None) -> list[Document]:
    """Load ``(file, text or JSON tree)`` documents strictly as ``folder/file``, each with the role
    of its folder (or of ``roles``); a document that does not load raises :class:`InputError`."""
    documents = list(documents)
    roles = [role_of(file) for file, _ in documents] if roles is None else list(roles)
    out = []
    for (file, content), role in zip(documents, roles):
        path = f"{folder}/{file}"
        document = load_bytes(content.encode("utf-8"), file=path) if isinstance(content, str) else load_tree(content, path)
        out.append(attrs.evolve(document, role=role))
    return out


@attrs.frozen
class Replayed:
    """The concrete checker on a solver's documents: the loaded documents and the checker's
    diagnostics (first first), or the loader's when they do not load."""

    documents: list[Document] = attrs.field(factory=list)
    diagnostics: list[Diagnostic] = attrs.field(factory=list)
    load_errors: list[Diagnostic] = attrs.field(factory=list)

    @property
    def loaded(self) -> bool:
        return not self.load_errors

    @property
    def refusing(self) -> set[str]:
        """The rule IDs the documents are refused with (the loader's when they do not load)."""
        return {d.rule for d in (self.load_errors or self.diagnostics)}

    def not_loaded(self, what: str) -> str:
        first = self.load_errors[0]
        return f"the {what} does not load: {first.text()}"


def replay(documents: Iterable[tuple[str, str]], folder: str, rules: list[Rule] | None = None) -> Replayed:
    """Load ``(file, text)`` documents strictly (:func:`load_documents`) and check them with
    ``rules`` (default: every rule)."""
    try:
        loaded = load_documents(documents, folder)
    except InputError as exc:
        return Replayed(load_errors=list(exc.diagnostics))
    return Replayed(loaded, check(loaded, rules))


def replay_refusal(rule_id: str, documents: list[tuple[str, str]],
                   rules: list[Rule] | None = None) -> tuple[str, str, str | None]:
    """A witness of ``rule_id`` replayed: ("reachable", text, rule) when the concrete checker
    refuses it with ``rule_id`` first, ("mismatch", why, first rule or None) otherwise."""
    replayed = replay(documents, "witness", rules)
    if not replayed.loaded:
        return "mismatch", replayed.not_loaded("witness"), None
    if not replayed.diagnostics:
        return "mismatch", "the concrete checker accepts the witness", None
    first = replayed.diagnostics[0]
    if first.rule != rule_id:
        return ("mismatch", f"the concrete checker refuses the witness with {first.rule} first ({first.path}: "
                f"{first.message})", first.rule)
    return "reachable", first.at(), first.rule


def load_witness(case: Path) -> list:
    """The documents of a stored witness (``DIR/RULE.json``, or every ``*.json`` below
    ``DIR/RULE/``), each with the role of its folder (:func:`~kvproof.solver.encode.role_of`:
    ``probe/`` as ``check --probe`` loads it, ``replay/`` as ``kvproof plan`` does), as the
    checker is to be called on them."""
    if not case.is_dir():
        return [load_path(case)]
    files = sorted(case.rglob("*.json"), key=lambda p: (len(p.relative_to(case).parts), p.relative_to(case).as_posix()))
    return [attrs.evolve(load_path(path), role=role_of(path.relative_to(case).as_posix())) for path in files]


def write_documents(directory: Path, name: str, documents: list[tuple[str, str]]) -> str:
    """``DIR/NAME.json`` for one document, else ``DIR/NAME/<file>``; the path written. Witnesses
    and claim counterexamples share it.

    Through :class:`kvproof.output.OutputFolder`: every file is staged before the first lands,
    nothing is written through a link (``DIR/NAME`` a link to another folder is an
    ``OutputError``), and what an earlier run wrote as ``NAME.json`` or below ``NAME/`` is
    removed only when this run does not write it again and kvproof wrote it (never a user's file)."""
    # one document of the checked role is NAME.json; a role is kept by its folder (NAME/replay/..)
    single = len(documents) == 1 and "/" not in documents[0][0]
    with OutputFolder(directory) as folder:
        if single:
            folder.add(f"{name}.json", documents[0][1])
        else:
            for file, text in documents:
                folder.add(f"{name}/{file}", text)
        folder.clear_own(f"{name}.json")
        folder.clear_own(f"{name}/")
        folder.commit()
    return str(directory / (f"{name}.json" if single else name))
