"""The proof cache of ``kvproof prove --cache DIR``: a verdict and its witness documents, kept in a
folder of small JSON files (like Hypothesis' example database: safe to delete, shareable through
a CI cache) and re-checked before it is believed.

An entry is keyed by a hash of what the rule's verdict depends on (:func:`rule_key`): the rule's
declaration and the source of every kvproof function and class its body, binding and explain
reach by name (walked through ``__globals__``, recursively), the solver's and the models' source
(``kvproof/solver``, ``kvproof/models``: a change there invalidates every entry), the shape
bound, the solver budget (:class:`~kvproof.solver.calls.Config`), the example documents' digest,
and the versions of z3 and Python.

Only **reachable** verdicts are stored. A hit is replayed through the concrete checker
(:func:`~kvproof.solver.witnesses.replay_refusal` with today's rules): the witness must load
strictly and be refused with that rule first, with the same text, so a stale or tampered entry can
never give a wrong verdict. A dead verdict is not cached: its proof is a set of unsat answers over
every shape of the bound, and re-solving a stored formula would only show that the stored formula
is unsat, not that it is today's encoding of the rule (that needs the shapes and the pins: the
cost the cache is meant to save). Unknown, mismatch and error are not cached either.

An entry that does not parse, names another rule or key, fails its checksum or its replay is
ignored; the rule is proved again and its entry overwritten. Entries are written through
:class:`kvproof.output.OutputFolder` (atomic; an entry of an older key of the same rule is
removed when kvproof wrote it).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import platform
import types
from pathlib import Path
from typing import Any

import attrs
import z3

from ..executor import folder_digest
from ..output import OutputFolder
from ..rules.core import Binding, Rule
from .witnesses import replay_refusal

__all__ = ["ProofCache", "rule_key", "reached_sources", "FORMAT"]

#: The entry format; a change of layout changes every key.
FORMAT = 1
#: The fields of a ``RuleResult`` an entry keeps (``seconds`` is the clock, ``witness`` the
#: path ``-o`` writes: both belong to the run, not to the proof).
_KEPT = ("rule", "verdict", "expect", "core", "shape", "shapes_tried", "reason", "documents", "changed", "gaps",
         "first_rule")
_PACKAGE = Path(__file__).resolve().parent.parent  # kvproof/


def _unwrap(obj: Any) -> Any:
    while True:
        inner = getattr(obj, "__wrapped__", None) or (getattr(obj, "fn", None) if not inspect.isfunction(obj) else None)
        if inner is None or inner is obj or not callable(inner):
            return obj
        obj = inner


def _ours(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == "kvproof" or module.startswith("kvproof.")


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _constant(value: Any) -> str | None:
    """A canonical text of a plain constant (a table a body reads), or None for anything else;
    sets sorted, so the text does not follow the hash seed."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        items = [_constant(v) for v in value]
        return None if None in items else f"{type(value).__name__}({', '.join(items)})"
    if isinstance(value, (set, frozenset)):
        items = [_constant(v) for v in value]
        return None if None in items else f"set({', '.join(sorted(items))})"
    if isinstance(value, dict):
        items = [(_constant(k), _constant(v)) for k, v in value.items()]
        return None if any(None in kv for kv in items) else f"dict({', '.join(f'{k}: {v}' for k, v in items)})"
    return None


def reached_sources(*roots: Any, memo: dict | None = None) -> dict[str, str]:
    """``module.qualname -> source`` of every kvproof function or class reachable by name from
    ``roots`` (functions; a :class:`~kvproof.rules.core.Binding` counts as its walk), and the value
    of every plain constant they read (``module.NAME -> canonical text``): each name a function's
    code (and its nested code) loads is looked up in its ``__globals__``, and, for a module global
    (``common.tensor_end``), in that module. ``memo``: sources already read, by
    name (shared by the rules of one run: ``inspect.getsource`` is most of the cost)."""
    memo = {} if memo is None else memo
    found: dict[str, str] = {}
    stack = [r for r in roots if r is not None]
    while stack:
        obj = _unwrap(stack.pop())
        if isinstance(obj, Binding):
            obj = _unwrap(obj.walk)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not _ours(obj):
            continue
        name = f"{obj.__module__}.{obj.__qualname__}"
        if name in found:
            continue
        if name not in memo:
            try:
                memo[name] = inspect.getsource(obj)
            except (OSError, TypeError):
                memo[name] = repr(obj)
        found[name] = memo[name]
        if not inspect.isfunction(obj):
            continue  # a class: its source is enough (its methods are in it)
        scope = obj.__globals__
        names = {n for code in _codes(obj.__code__) for n in code.co_names}
        for n in sorted(names):
            if n not in scope:  # a builtin, an attribute name
                continue
            value = scope[n]
            if isinstance(value, types.ModuleType):
                if _ours(types.SimpleNamespace(__module__=value.__name__)):
                    stack += [getattr(value, other) for other in sorted(names) if hasattr(value, other)]
            elif n.isupper() and not n.startswith("_") and _constant(value) is not None:
                # a public constant of kvproof code (a table, a bound); private names may be
                # process state (``logic._AST``, set on first use), which no key may follow
                found[f"{obj.__module__}.{n}"] = _constant(value)
            elif value is not None:
                stack.append(value)
    return found


def _environment(bound: Any, config: Any, examples: Path) -> str:
    """What every key shares: code the proofs run through, the bound, the budget, the examples."""
    parts = {
        "format": FORMAT,
        "solver": folder_digest(_PACKAGE / "solver", "*.py"),
        "models": folder_digest(_PACKAGE / "models", "*.py"),
        "bound": repr(attrs.astuple(bound)),
        "config": repr(attrs.astuple(config)),
        "examples": folder_digest(examples, "*.json"),
        "z3": z3.get_version_string(),
        "python": platform.python_version(),
    }
    return json.dumps(parts, sort_keys=True)


def rule_key(rule: Rule, environment: str, memo: dict | None = None) -> str:
    """The SHA-256 of the rule's declaration, the sources it reaches and ``environment``."""
    declaration = {
        "id": rule.id, "message": rule.message, "after": list(rule.after), "expect": rule.expect,
        "reason": rule.reason, "field": rule.field, "source": rule.source, "kinds": list(rule.over.kinds),
        "reached": reached_sources(rule.body, rule.over, rule.explain, memo=memo),
    }
    text = json.dumps({"rule": declaration, "environment": environment}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checksum(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


class ProofCache:
    """The entries of one folder for one prover's rules, bound, budget and examples."""

    def __init__(self, root: str | Path, rules: list[Rule], bound: Any, config: Any, examples: Path):
        self.root = Path(root)
        self.rules = rules
        self._environment = _environment(bound, config, examples)
        self._keys: dict[str, str] = {}
        self._sources: dict[str, str] = {}
        self.hits: list[str] = []
        self.rejected: list[str] = []  # rule IDs whose entry was present but not believed

    def key(self, rule: Rule) -> str:
        if rule.id not in self._keys:
            self._keys[rule.id] = rule_key(rule, self._environment, self._sources)
        return self._keys[rule.id]

    def _name(self, rule: Rule) -> str:
        return f"{rule.id}-{self.key(rule)[:40]}.json"

    def lookup(self, rule: Rule, result_type: type) -> Any | None:
        """The stored result of ``rule`` (a ``result_type``) when an entry exists for today's key
        and its witness replays as that rule's first refusal; else None."""
        path = self.root / self._name(rule)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            if path.exists():
                self.rejected.append(rule.id)
            return None
        fields = self._believed(rule, text)
        if fields is None:
            self.rejected.append(rule.id)
            return None
        self.hits.append(rule.id)
        return result_type(**fields)

    def _believed(self, rule: Rule, text: str) -> dict | None:
        try:
            entry = json.loads(text)
            payload, checksum = entry["payload"], entry["checksum"]
            fields = payload["result"]
            if payload["format"] != FORMAT or payload["key"] != self.key(rule) or fields["rule"] != rule.id:
                return None
            if checksum != _checksum(payload) or set(fields) != set(_KEPT):
                return None
            fields["documents"] = [(str(file), str(body)) for file, body in fields["documents"]]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if fields["verdict"] != "reachable" or fields["expect"] != rule.expect:
            return None
        # the re-check: today's checker refuses the stored witness with this rule first, same text
        verdict, reason, first = replay_refusal(rule.id, fields["documents"], self.rules)
        if (verdict, reason, first) != ("reachable", fields["reason"], fields["first_rule"]):
            return None
        return fields

    def store(self, result: Any) -> bool:
        """Keep a reachable result (False for any other verdict: not cached)."""
        if result.verdict != "reachable" or not result.documents:
            return False
        rule = next(r for r in self.rules if r.id == result.rule)
        fields = {name: getattr(result, name) for name in _KEPT}
        fields["documents"] = [list(d) for d in fields["documents"]]
        payload = {"format": FORMAT, "key": self.key(rule), "result": fields}
        text = json.dumps({"payload": payload, "checksum": _checksum(payload)}, indent=1, sort_keys=True) + "\n"
        with OutputFolder(self.root) as folder:
            folder.add(self._name(rule), text)
            folder.clear_own(f"{rule.id}-")  # the entries of this rule's older keys
            folder.commit()
        return True
