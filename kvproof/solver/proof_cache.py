"""The proof cache of ``kvproof prove --cache DIR``: a verdict and its witness documents, kept in a
folder of small JSON files (like Hypothesis' example database: safe to delete, shareable through
a CI cache) and re-checked before it is believed.

An entry is keyed by a hash of what the rule's verdict depends on (:func:`rule_key`): the rule's
declaration and the source of every kvproof function and class its body, binding and explain
reach by name (walked through ``__globals__``, recursively), the solver's and the models' source
(``kvproof/solver``, ``kvproof/models``: a change there invalidates every entry), the shape
bound, the solver budget (:class:`~kvproof.solver.calls.Config`), the example documents' digest,
and the versions of z3 and Python.

**Reachable** and **dead** verdicts are stored, each re-checked on a hit:

* a reachable verdict keeps its witness documents; a hit is replayed through the concrete checker
  (:func:`~kvproof.solver.witnesses.replay_refusal` with today's rules): the witness must load
  strictly and be refused with that rule first, with the same text;
* a dead verdict keeps its proof (:attr:`RuleResult.steps`, :mod:`~kvproof.solver.core_check`):
  for every shape whose question was unsat, the shape's name, the labels of its unsat core (rule
  IDs, ``goal:R``, axiom names, held pins) and the index of its core's question, the core's
  assertions of the encoding written as SMT-LIB2 text when the verdict was stored (each distinct
  question once, each checked unsat then). A hit parses every question the steps point at and z3
  must answer unsat again (:func:`~kvproof.solver.core_check.recheck`): the core is re-solved.
  The text stands in for the encoding, so a dead entry is believed only under the code that
  wrote it: besides the rule's key it records the hash of every rule's key
  (:meth:`ProofCache.registry`: the verdict rests on the other rules too, its core's and those that
  closed the pins and repaired the templates its shapes came from) and the digest of kvproof's
  whole Python source (:meth:`ProofCache.package`), both compared on read; any edit of kvproof
  re-proves every dead verdict. The union of the steps' cores must be the reported core. The
  shape list, the cores' labels and the questions are the entry's (deriving them is the cost the
  cache saves): the key guards them against staleness and the checksum against corruption, not
  against someone who rewrites an entry and its checksum on purpose.

So a dead hit is believed when its key (rule sources, every rule's key, the package source, z3
and Python versions, bound, config, examples) matches, its checksum matches and every stored core
question is unsat again in z3. Unknown, mismatch and error verdicts are not cached.

An entry that does not parse, names another rule or key, fails its checksum or its re-check is
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
from .core_check import proof_payload, recheck
from .witnesses import replay_refusal

__all__ = ["ProofCache", "rule_key", "reached_sources", "FORMAT"]

#: The entry format; a change of layout changes every key.
FORMAT = 3
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
        self.config = config
        self._registry: str | None = None
        self._package: str | None = None
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
        and passes its re-check (:meth:`read`, then :meth:`verify`); else None."""
        entry = self.read(rule)
        if entry is None:
            return None
        if not self.verify(rule, entry):
            self.rejected.append(rule.id)
            return None
        return self.accept(rule, entry, result_type)

    def read(self, rule: Rule) -> dict | None:
        """The entry of ``rule`` for today's key when it parses, matches its checksum and holds a
        reachable verdict with a witness or a dead one with a proof written under today's rules
        and today's kvproof source, its steps' cores making the reported core (the cheap checks);
        None otherwise (a present entry counts as rejected). Its re-check is :meth:`verify`."""
        path = self.root / self._name(rule)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            if path.exists():
                self.rejected.append(rule.id)
            return None
        entry = self._parsed(rule, text)
        if entry is None:
            self.rejected.append(rule.id)
        return entry

    def _parsed(self, rule: Rule, text: str) -> dict | None:
        try:
            entry = json.loads(text)
            payload, checksum = entry["payload"], entry["checksum"]
            fields = payload["result"]
            if payload["format"] != FORMAT or payload["key"] != self.key(rule) or fields["rule"] != rule.id:
                return None
            if checksum != _checksum(payload) or set(fields) != set(_KEPT):
                return None
            fields["documents"] = [(str(file), str(body)) for file, body in fields["documents"]]
            if fields["expect"] != rule.expect:
                return None
            if fields["verdict"] == "reachable":
                return payload if fields["documents"] else None
            if fields["verdict"] != "dead" or fields["documents"]:
                return None
            # a dead verdict: written under today's rule set and code, its steps' cores the reported core
            proof = payload.get("proof")
            if payload.get("registry") != self.registry() or payload.get("package") != self.package():
                return None  # written under other rules or other code: its questions are not today's encoding
            if not isinstance(proof, dict) or not isinstance(proof["questions"], list) or not proof["steps"]:
                return None
            labels = {label for step in proof["steps"] for label in step["core"] if not label.startswith("goal:")}
            if labels != set(fields["core"]):
                return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        return payload

    def parts(self, entry: dict) -> int:
        """How many pieces the re-check of an entry splits into (one per step of a dead proof)."""
        return len(entry["proof"]["steps"]) if entry["result"]["verdict"] == "dead" else 1

    def verify(self, rule: Rule, entry: dict, part: int = 0, parts: int = 1) -> bool:
        """The re-check of an entry :meth:`read` returned (``part`` of ``parts``: the steps
        ``part::parts`` of a dead proof; a witness is replayed by part 0). A reachable verdict:
        today's checker refuses the stored witness with this rule first, with the stored text. A
        dead one: every stored core question these steps point at is unsat again (:func:`recheck`,
        in a fresh z3 context with this run's budget)."""
        fields = entry["result"]
        if fields["verdict"] == "dead":
            proof = dict(entry["proof"], steps=entry["proof"]["steps"][part::parts])
            return recheck(proof, self.config)
        if part:
            return True
        verdict, reason, first = replay_refusal(rule.id, fields["documents"], self.rules)
        return (verdict, reason, first) == ("reachable", fields["reason"], fields["first_rule"])

    def accept(self, rule: Rule, entry: dict, result_type: type) -> Any:
        """The result of an entry whose re-check passed."""
        self.hits.append(rule.id)
        return result_type(**entry["result"])

    def registry(self) -> str:
        """The hash of every rule's key: a dead verdict also rests on the other rules (its core's,
        and those that closed the pins and repaired the templates its shapes were built from)."""
        if self._registry is None:
            text = json.dumps([[r.id, self.key(r)] for r in self.rules])
            self._registry = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self._registry

    def package(self) -> str:
        """The digest of kvproof's whole Python source: a dead verdict's stored questions stand in
        for today's encoding, which any line of kvproof may change."""
        if self._package is None:
            self._package = folder_digest(_PACKAGE, "*.py")
        return self._package

    def store(self, result: Any) -> bool:
        """Keep a reachable result with its witness, or a dead one with its proof: the SMT-LIB2
        text of every step's core question, each checked unsat (:func:`proof_payload`). False for
        any other verdict, a dead verdict without steps, or a proof that cannot be written so: not
        cached."""
        if result.verdict == "reachable":
            if not result.documents:
                return False
        elif result.verdict != "dead" or not result.steps:
            return False
        rule = next(r for r in self.rules if r.id == result.rule)
        fields = {name: getattr(result, name) for name in _KEPT}
        fields["documents"] = [list(d) for d in fields["documents"]]
        payload = {"format": FORMAT, "key": self.key(rule), "result": fields}
        if result.verdict == "dead":
            payload["registry"] = self.registry()
            payload["package"] = self.package()
            proof = getattr(result, "proof", None)  # made by the process that proved it
            if proof is None:
                proof = proof_payload(rule, self.rules, self.config, result.steps)
            if not proof:  # a core today's encoding does not ask, or a question not unsat: not kept
                return False
            payload["proof"] = proof
        text = json.dumps({"payload": payload, "checksum": _checksum(payload)}, indent=1, sort_keys=True) + "\n"
        with OutputFolder(self.root) as folder:
            folder.add(self._name(rule), text)
            folder.clear_own(f"{rule.id}-")  # the entries of this rule's older keys
            folder.commit()
        return True
