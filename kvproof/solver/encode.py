"""Encoding a rule for a shape: its binding and body run on symbolic documents, one z3 Bool per
instance.

The checker's own binding (:func:`targets`) hands the rule its targets in the checker's order;
each instance's verdict becomes a z3 Bool (:func:`as_bool`) with z3's ``bool()`` made strict
(:class:`strict_bool`), so a symbolic value in Python control flow is caught instead of
silently compared by structure. :func:`encode_rule` is the one encoder and pinning protocol the
prover's sessions, claims, explore and the parity fuzzer share: a value a body reads as a
concrete one raises :class:`~kvproof.solver.pins.NeedPins`, and the caller builds again.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs
import z3

from ..logic import ConcreteRequired
from ..models.documents import Document
from ..rules.check import _targets, bundles
from ..rules.core import Rule
from ..rules.state_storage import REPLAY_ROLE
from .pins import NeedPins, spaths_of
from .symbolic import Leaf, ReadLog, SymbolicFlowError

__all__ = ["Encoded", "encode_rule", "instance_key", "read_symbolically", "strict_bool", "targets", "as_bool", "role_of",
           "ROLE_FOLDERS"]


@attrs.define
class Encoded:
    """A rule on one build of a shape: a z3 Bool per instance, or why its body cannot run."""

    terms: list | None = None
    error: str | None = None
    #: Per term: (file, subject, blame, the instance's string names): where the rule looks.
    keys: list[tuple] = attrs.field(factory=list)

    @property
    def subjects(self) -> list[str]:
        """JSON paths of the instances (subject and blame)."""
        return [path for _file, subject, blame, _names in self.keys for path in ((subject, blame) if blame else (subject,))]


def _strict(self):
    if z3.is_true(self):
        return True
    if z3.is_false(self):
        return False
    raise SymbolicFlowError(f"symbolic term used in Python control flow: {self}", term=self)


class strict_bool:  # noqa: N801 - used as ``with strict_bool():``, a context like the others
    """Make ``bool(z3 term)`` raise unless the term is literally true or false.

    z3's own ``__bool__`` answers ``x == y`` by *structural* equality, so a binding that wrote
    ``if a.dp_rank == b.dp_rank`` would silently see False on symbolic ranks. A class, not a
    generator context: it is entered once per rule and shape (thousands of times a run).
    Re-entrant (an inner ``with`` changes nothing). The depth is process state because the
    method it replaces is: ``z3.AstRef.__bool__`` is one for the whole process.
    """

    _depth = 0
    _saved: Any = None

    def __enter__(self) -> None:
        cls = strict_bool
        if cls._depth == 0:
            cls._saved = z3.AstRef.__bool__
            z3.AstRef.__bool__ = _strict
        cls._depth += 1

    def __exit__(self, *exc: Any) -> None:
        cls = strict_bool
        cls._depth -= 1
        if cls._depth == 0:
            z3.AstRef.__bool__ = cls._saved


def targets(rule: Rule, documents: tuple[Document, ...], groups: Any = None) -> Iterable[tuple[str | None, Any]]:
    """What the concrete checker hands the rule's binding (the same function, so the same order).
    ``groups``: the checker's bundles of these documents, when the caller keeps them."""
    yield from _targets(rule, documents, bundles(documents) if groups is None else groups)


#: The folders of a shape's (and a stored witness's) documents that give them a role other than
#: ``checked``: ``probe/`` the accepted probe (``check --probe``), ``replay/`` a profile being
#: sized or replayed (``kvproof plan``: ST028).
ROLE_FOLDERS = {"probe": "probe", "replay": REPLAY_ROLE}


def role_of(file: str) -> str:
    """The role of a shape's document by its folder (:data:`ROLE_FOLDERS`), else ``checked``."""
    folder, sep, _ = file.partition("/")
    return ROLE_FOLDERS.get(folder, "checked") if sep else "checked"


def as_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if z3.is_expr(value) and z3.is_bool(value):
        return value
    raise TypeError(f"rule body returned {type(value).__name__}, not a bool or a z3 Bool")


def instance_key(instance: Any, file: str | None) -> tuple:
    """Where an instance looks: (file, subject, blame, its string names), the same on symbolic and
    on concrete documents (the parity fuzzer pairs instances by it)."""
    names = tuple(sorted((k, v) for k, v in instance.names.items() if isinstance(v, str)))
    return (instance.file or file, instance.subject, instance.blame, names)


def read_symbolically(fn: Callable[[], Any], var_leaf: dict[str, Leaf], pinned: frozenset, reads: ReadLog) -> Any:
    """``fn()`` on symbolic documents under :class:`strict_bool`, with the pinning protocol: a
    value read as a concrete one (a :class:`~kvproof.logic.ConcreteRequired`: Python control
    flow, ``gcd``/``lcm``, a value that selects structure) raises :class:`NeedPins` for the
    leaves it names that are not ``pinned`` yet; any other failure pins the leaf read last
    (``reads``: a helper refused a symbolic value). A failure that names no new leaf propagates."""
    try:
        with strict_bool(), reads:
            return fn()
    except ConcreteRequired as exc:
        fresh = spaths_of(exc, var_leaf) - pinned
        if fresh:
            raise NeedPins(fresh) from None
        if isinstance(exc, SymbolicFlowError):
            raise
        _pin_last_read(reads, pinned)
        raise
    except Exception:
        _pin_last_read(reads, pinned)
        raise


def _pin_last_read(reads: ReadLog, pinned: frozenset) -> None:
    for leaf in reversed(reads.leaves):
        if leaf.spath not in pinned:
            raise NeedPins({leaf.spath}) from None


def encode_rule(rule: Rule, documents: tuple[Document, ...], var_leaf: dict[str, Leaf], pinned: frozenset,
                reads: ReadLog, groups: Any = None) -> Encoded:
    """The rule's instance verdicts on one build of a shape's documents (built with ``pinned``;
    ``groups``: their bundles, when the caller keeps them). Raises :class:`NeedPins` when the
    body read leaves that must be pinned first (:func:`read_symbolically`); a body that cannot
    run on symbolic values otherwise is an :class:`Encoded` with its ``error``."""
    terms: list = []
    keys: list[tuple] = []

    def run() -> None:
        for file, target in targets(rule, documents, groups):
            for instance in rule.over(target):
                reads.clear()  # the leaf read last is one of this instance's
                terms.append(as_bool(rule.holds(instance)))
                keys.append(instance_key(instance, file))

    try:
        read_symbolically(run, var_leaf, pinned, reads)
    except NeedPins:
        raise
    except SymbolicFlowError as exc:
        return Encoded(error=f"{exc}")
    except Exception as exc:  # noqa: BLE001 - a body the solver cannot run is reported, not fatal
        return Encoded(error=f"{type(exc).__name__}: {exc}")
    return Encoded(terms=terms, keys=keys)
