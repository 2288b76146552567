"""``kvproof explore GEOMETRY``: the exact optimum of an expression over a geometry's open fields.

A geometry is what vLLM is given; its plan (``kvproof.sim.plan``) is a concrete Python program
(sorting, grouping, ``math.lcm``), so the rule bodies' z3 route does not reach it. This module
answers over the *planner itself*, exactly, by one of three routes, and says which:

* **symbolic** (z3): when every open field is the KV cache memory (``available_memory_bytes``,
  or one worker's element of it). The planner reads the memory in two places only, the pool
  sizing and the start-up memory check (``sim/plan.py``, vLLM ``get_kv_cache_configs``,
  ``v1/core/kv_cache_planning.py:1461-1604``); the groups, pages, bytes per block and blocks per
  request come before and do not read it. One plan (the *probe*, at the largest memory of the
  domain) gives those; the memory-dependent values are then the shared formulas on a z3 term
  (``formulas.pool.num_blocks_for_memory``, ``formulas.concurrency.max_concurrency`` and
  ``kv_cache_size_tokens``, the check ``needed <= memory - bytes_per_block`` of
  ``kv_cache_planning.py:50-87``), and z3 ``Optimize`` answers over the whole domain. A probe
  that vLLM refuses makes every smaller memory refused too (the check's need does not read the
  memory, and no other refusal does).
* **exhaustive**: the domain (the product of the open fields' values) has at most ``max_plans``
  candidates: every one is planned. Nothing is relied on.
* **bisection**: one open field with a larger domain. Relied on, and checked on the way: the
  candidates that meet the requirements form one interval reaching an end of the domain
  (feasibility is monotone in the field), and the objective is monotone over them. 65 evenly
  spaced candidates, every bisection probe and 16 candidates on each side of a boundary are
  checked against both; a violation is ``unknown`` (exit 3) with the candidates that show it,
  never a guess (and so is a domain in which no sampled candidate qualifies).

Every answer is replayed through ``simulate`` (``kvproof.sim.simulate_document`` of the written
document's text) before it is printed, with its neighbours in the domain (one step below and
above each open field). On the symbolic route each replayed plan must also have the probe's
structure and the z3 model's status, feasibility and objective: a disagreement is ``unknown``.

Expressions (``--minimize``/``--maximize`` and ``--require``) are :mod:`kvproof.solver.expression`
over ``doc`` (the candidate geometry) and ``plan`` (its ``simulate --format json`` output: a
started plan has ``status == 'ok'`` and the documented keys, a refused one ``status`` and
``error``). A field a plan of the other status lacks makes the candidate infeasible, so
``plan.status == 'ok' and plan.max_concurrency >= 2`` reads naturally. Without ``--require`` a
candidate must start (``plan.status == 'ok'``). Ties go to the first optimal candidate in domain
order (the smallest index of the first open field, then the next).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable

import attrs
import z3

from .. import logic
from ..diagnostics import InputError, KvproofError
from ..formulas import concurrency
from ..logic import is_symbolic
from ..models.codec import MAX_SAFE_INT, dumps, present
from ..models.geometry import load_geometry
from ..sim import plan
from ..sim.document import plan_to_document, simulate_document, simulate_geometry
from ..sim.startup import pool
from .calls import Config
from .expression import Expression, ExpressionError, describe, parse

__all__ = [
    "GeometryExploreError", "OpenField", "Domain", "GeometryExploreResult", "explore_geometry", "parse_open",
    "DEFAULT_REQUIREMENT", "DEFAULT_MAX_PLANS", "SAMPLES", "PlanNode", "plan_view", "render_text", "STARTED_KEYS",
]

#: The requirement when none is given: vLLM starts with the candidate.
DEFAULT_REQUIREMENT = "plan.status == 'ok'"
#: Most plans one search may compute (``--max-plans``); a GLM-5.3-Flash plan takes ~12 ms.
DEFAULT_MAX_PLANS = 2000
#: Evenly spaced candidates the bisection route checks its two monotonicity assumptions on.
SAMPLES = 65

#: The keys of a started plan's ``simulate --format json`` (``sim.document.plan_to_document``);
#: reading one on a refused plan (which has ``status`` and ``error`` only) makes it infeasible.
STARTED_KEYS = frozenset({
    "groups", "bytes_per_block", "memory_needed_for_one_max_len_request_bytes", "num_blocks", "num_usable_blocks",
    "kv_cache_tensors", "max_concurrency", "kv_cache_size_tokens", "per_group_blocks_per_request",
    "engine_cache_config_block_size", "scheduler_block_size", "hash_block_size", "cache_hit_alignment_tokens",
    "platform_alignment", "kv_cache_layout", "mamba_cache_mode", "enable_prefix_caching", "max_in_flight_tokens",
    "kv_tp_replicas", "workers", "max_model_len", "warnings", "worker_views", "simulation", "prefix_hit_probe",
    "workload",
})
REFUSED_KEYS = frozenset({"error"})
#: The keys of a started plan that the KV cache memory changes (everything else is the probe's).
MEMORY_KEYS = frozenset({"num_blocks", "num_usable_blocks", "max_concurrency", "kv_cache_size_tokens"})
MEMORY_FIELD = "available_memory_bytes"
#: vLLM's start-up memory refusals (kv_cache_planning.py:56-64 no memory, 66-87 not enough).
MEMORY_CHECK = "v1/core/kv_cache_planning.py:50-87"


class GeometryExploreError(ValueError, KvproofError):
    """Bad input of a geometry exploration (exit 2): an ``--open`` value, a candidate the loader
    refuses, an expression that cannot be evaluated on a plan."""


class NotPlanned(ExpressionError):
    """The expression read a key that a plan of this status does not have: the candidate does not
    meet the requirements (it is not an error of the expression)."""


class NotSymbolic(ExpressionError):
    """The expression read a value the symbolic route does not model: take another route."""


class BudgetExhausted(KvproofError):
    """The plan budget (``--max-plans``) ran out before the search decided."""


# -- open fields and their domains -----------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """The values an open field takes, in order: ``lo..hi`` by ``step`` (integers), or a list."""

    values: tuple | None = None
    lo: int = 0
    hi: int = 0
    step: int = 1

    def __len__(self) -> int:
        return len(self.values) if self.values is not None else (self.hi - self.lo) // self.step + 1

    def value(self, index: int) -> Any:
        return self.values[index] if self.values is not None else self.lo + index * self.step

    @property
    def ascending_ints(self) -> bool:
        if self.values is None:
            return True
        items = self.values
        return all(type(v) is int for v in items) and all(a < b for a, b in zip(items, items[1:]))

    def describe(self) -> str:
        if self.values is not None:
            return ",".join(json.dumps(v) for v in self.values)
        return f"{self.lo}..{self.hi}" + (f":{self.step}" if self.step != 1 else "")


@dataclass(frozen=True)
class OpenField:
    path: str  # as given, without the domain
    parts: tuple  # keys (str) and list indices (int) after $
    domain: Domain

    @property
    def is_memory(self) -> bool:
        return bool(self.parts) and self.parts[0] == MEMORY_FIELD and len(self.parts) <= 2 and all(
            type(p) is int for p in self.parts[1:])


_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")
_RANGE = re.compile(r"^\s*(-?\d[\d_]*)\s*\.\.\s*(-?\d[\d_]*)\s*(?::\s*(\d[\d_]*)\s*)?$")


def _parse_path(path: str) -> tuple:
    if not path.startswith("$"):
        raise GeometryExploreError(f"--open takes a JSON path starting with $ (got {path!r})")
    parts, position = [], 1
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None:
            raise GeometryExploreError(f"--open {path}: not a JSON path (.name or [index] steps) at character "
                                       f"{position + 1}")
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        position = match.end()
    if not parts:
        raise GeometryExploreError("--open $: open a field of the geometry, not the whole document")
    return tuple(parts)


def _lookup(tree: Any, parts: tuple) -> tuple[bool, Any]:
    """(found, value) of ``parts`` in ``tree``; the parent must exist (``GeometryExploreError``)."""
    node = tree
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise GeometryExploreError(f"{_render(parts[:depth + 1])}: the template has no such list item")
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise GeometryExploreError(f"{_render(parts[:depth + 1])}: the template has no object here")
            if part not in node:
                if last:
                    return False, None
                raise GeometryExploreError(f"{_render(parts[:depth + 1])}: the template has no such field")
            node = node[part]
    return True, node


def _render(parts: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _int(text: str, spec: str) -> int:
    value = int(text.replace("_", ""))
    if abs(value) > MAX_SAFE_INT:
        raise GeometryExploreError(f"--open {spec}: {value} exceeds 2**53")
    return value


def parse_open(spec: str, template: dict) -> OpenField:
    """``PATH``, ``PATH=LO..HI``, ``PATH=LO..HI:STEP`` or ``PATH=V1,V2,...`` (JSON scalars, e.g.
    ``null``). Without a domain an integer field takes its loader range (0..2**53 for the memory,
    1..2**53 otherwise) and a boolean ``false,true``."""
    path, equals, domain_text = spec.partition("=")
    path = path.strip()
    parts = _parse_path(path)
    found, current = _lookup(template, parts)
    if not equals:
        if found and type(current) is bool:
            return OpenField(path, parts, Domain(values=(False, True)))
        if parts[0] == MEMORY_FIELD and (not found or type(current) is int):
            return OpenField(path, parts, Domain(lo=0, hi=MAX_SAFE_INT))
        if not found or type(current) is int:
            return OpenField(path, parts, Domain(lo=1, hi=MAX_SAFE_INT))
        raise GeometryExploreError(f"--open {path}: the template's value is {describe(current)}; give the values "
                                   f"to try ({path}=V1,V2,... or {path}=LO..HI[:STEP])")
    match = _RANGE.match(domain_text)
    if match:
        lo, hi = _int(match.group(1), spec), _int(match.group(2), spec)
        step = _int(match.group(3), spec) if match.group(3) else 1
        if step < 1:
            raise GeometryExploreError(f"--open {spec}: the step must be at least 1")
        if hi < lo:
            raise GeometryExploreError(f"--open {spec}: the range is empty (HI {hi} < LO {lo})")
        return OpenField(path, parts, Domain(lo=lo, hi=hi - (hi - lo) % step, step=step))
    values = []
    for item in domain_text.split(","):
        try:
            value = json.loads(item)
        except json.JSONDecodeError:
            raise GeometryExploreError(f"--open {spec}: {item.strip()!r} is not a JSON value (numbers, true, false, "
                                       "null, \"strings\"), nor is the domain LO..HI[:STEP]") from None
        if isinstance(value, (dict, list)) or (isinstance(value, float) and not value == value):
            raise GeometryExploreError(f"--open {spec}: {item.strip()!r}: a value is a JSON scalar")
        if type(value) is int and abs(value) > MAX_SAFE_INT:
            raise GeometryExploreError(f"--open {spec}: {value} exceeds 2**53")
        if any(type(value) is type(v) and value == v for v in values):
            raise GeometryExploreError(f"--open {spec}: {item.strip()} is listed twice")
        values.append(value)
    return OpenField(path, parts, Domain(values=tuple(values)))


def _assign(tree: Any, parts: tuple, value: Any) -> None:
    node = tree
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


# -- the plan as an expression sees it -------------------------------------------------------------


class PlanNode:
    """One object of ``simulate --format json`` output, read-only: its keys are fields.

    A key a plan of the other status has (``num_blocks`` of a refused plan, ``error`` of a started
    one) raises :class:`NotPlanned`; ``reads`` collects the top-level keys read."""

    __slots__ = ("_data", "_absent", "_reads", "_top")

    def __init__(self, data: dict, absent: frozenset = frozenset(), reads: set | None = None, top: bool = True):
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_absent", absent)
        object.__setattr__(self, "_reads", reads if reads is not None else set())
        object.__setattr__(self, "_top", top)

    def __getattr__(self, name: str) -> Any:
        data = object.__getattribute__(self, "_data")
        if object.__getattribute__(self, "_top"):
            object.__getattribute__(self, "_reads").add(name)
        if name in data:
            value = data[name]
            if isinstance(value, BaseException):
                raise value
            return _wrap(value)
        if name in object.__getattribute__(self, "_absent"):
            status = data.get("status")
            raise NotPlanned(f"plan.{name}: a plan with status {status!r} has no {name}")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a plan is read-only")

    def __repr__(self) -> str:
        return f"PlanNode({sorted(object.__getattribute__(self, '_data'))})"


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return PlanNode(value, top=False)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


def plan_view(document: dict, reads: set | None = None) -> PlanNode:
    """The ``plan`` of an expression: a ``simulate --format json`` document."""
    absent = REFUSED_KEYS if document.get("status") == "ok" else STARTED_KEYS
    return PlanNode(document, absent, reads)


# -- results -----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One planned candidate."""

    index: tuple
    values: tuple
    status: str  # ok | refused
    feasible: bool
    value: Any = None  # the objective (feasible candidates only)
    message: str = ""  # the refusal, or why the requirements fail
    document: dict | None = None  # simulate's JSON

    def to_json(self, fields: list[OpenField]) -> dict:
        out = {"at": {f.path: v for f, v in zip(fields, self.values)}, "status": self.status,
               "meets_requirements": self.feasible, "objective": _json_number(self.value)}
        if self.message:
            out["message"] = self.message
        return out


@dataclass
class Reliance:
    property: str
    check: str
    holds: bool

    def to_json(self) -> dict:
        return {"property": self.property, "check": self.check, "holds": self.holds}


@dataclass
class GeometryExploreResult:
    status: str  # optimal | infeasible | unknown
    objective: str
    direction: str
    requires: list[str]
    fields: list[OpenField]
    route: str = ""
    value: Any = None
    document: str | None = None
    reason: str = ""
    relied_on: list[Reliance] = field(default_factory=list)
    replay: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plans: int = 0
    changed: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "status": self.status, "objective": self.objective, "direction": self.direction,
            "requires": self.requires, "value": _json_number(self.value), "route": self.route,
            "open": [{"path": f.path, "domain": f.domain.describe(), "size": len(f.domain)} for f in self.fields],
            "relied_on": [r.to_json() for r in self.relied_on],
            "replay": [o.to_json(self.fields) for o in self.replay],
            "notes": self.notes, "plans": self.plans, "changed": self.changed, "reason": self.reason,
            "document": json.loads(self.document) if self.document else None,
        }


def _json_number(value: Any) -> Any:
    if isinstance(value, Fraction):
        return int(value) if value.denominator == 1 else float(value)
    return value


# -- the evaluator: one candidate, one plan ---------------------------------------------------------


class Evaluator:
    """Plans candidates (each once) and judges them by the requirements and the objective."""

    def __init__(self, template: dict, file: str, fields: list[OpenField], objective: Expression,
                 requirements: list[Expression], direction: str, max_plans: int):
        self.template = template
        self.file = file
        self.fields = fields
        self.objective = objective
        self.requirements = requirements
        self.direction = direction
        self.max_plans = max_plans
        self.cache: dict[tuple, Outcome] = {}
        self.plans = 0

    def tree(self, index: tuple) -> dict:
        tree = copy.deepcopy(self.template)
        for open_field, i in zip(self.fields, index):
            _assign(tree, open_field.parts, open_field.domain.value(i))
        return tree

    def at(self, index: tuple) -> Outcome:
        if index in self.cache:
            return self.cache[index]
        if self.plans >= self.max_plans:
            raise BudgetExhausted()

        tree = self.tree(index)
        values = tuple(f.domain.value(i) for f, i in zip(self.fields, index))
        try:
            geometry = load_geometry(tree, self.file)
        except InputError as error:
            raise GeometryExploreError(f"the candidate {self._where(values)} is not a valid geometry:\n"
                                       + "\n".join(d.render() for d in error.diagnostics)) from None
        self.plans += 1
        document = simulate_geometry(geometry)
        outcome = self.judge(index, values, geometry, document)
        self.cache[index] = outcome
        return outcome

    def judge(self, index: tuple, values: tuple, geometry: Any, document: dict) -> Outcome:
        status = document["status"]
        message = document["error"]["message"] if status != "ok" else ""
        names = {"doc": geometry, "plan": plan_view(document)}
        for requirement in self.requirements:
            source = requirement.source
            try:
                verdict = requirement.evaluate(names)
            except NotPlanned as exc:
                return Outcome(index, values, status, False, None, message or exc.message, document)
            except ExpressionError as exc:
                raise GeometryExploreError(f"--require {exc.render()} (at {self._where(values)})") from None
            if type(verdict) is not bool:
                raise GeometryExploreError(f"--require {source!r}: a requirement is a truth value, not "
                                           f"{describe(verdict)} (at {self._where(values)})")
            if not verdict:
                return Outcome(index, values, status, False, None, message or f"requirement fails: {source}",
                               document)
        option = "--minimize" if self.direction == "minimize" else "--maximize"
        try:
            value = self.objective.evaluate(names)
        except NotPlanned as exc:
            return Outcome(index, values, status, False, None, message or exc.message, document)
        except ExpressionError as exc:
            raise GeometryExploreError(f"{option} {exc.render()} (at {self._where(values)})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
            raise GeometryExploreError(f"{option}: the objective is not a number: it is {describe(value)} "
                                       f"(at {self._where(values)})")
        return Outcome(index, values, status, True, value, message, document)

    def _where(self, values: tuple) -> str:
        return ", ".join(f"{f.path}={json.dumps(v)}" for f, v in zip(self.fields, values))

    def better(self, a: Outcome, b: Outcome | None) -> bool:
        """``a`` beats ``b`` (ties go to the earlier candidate in domain order)."""
        if b is None:
            return True
        if a.value != b.value:
            return a.value < b.value if self.direction == "minimize" else a.value > b.value
        return a.index < b.index


# -- the routes ------------------------------------------------------------------------------------


def _exhaustive(ev: Evaluator, out: GeometryExploreResult) -> GeometryExploreResult:
    best, count = None, 0
    for index in itertools.product(*(range(len(f.domain)) for f in ev.fields)):
        outcome = ev.at(index)
        count += 1
        if outcome.feasible and ev.better(outcome, best):
            best = outcome
    out.route = "exhaustive"
    out.notes.append(f"every one of the {count:,} candidates of the domain was planned: nothing is relied on")
    return _finish(ev, out, best)


def _samples(n: int) -> list[int]:
    if n <= SAMPLES:
        return list(range(n))
    return sorted({j * (n - 1) // (SAMPLES - 1) for j in range(SAMPLES)})


def _monotone_feasibility(points: list[Outcome]) -> tuple[bool, str]:
    ordered = sorted(points, key=lambda o: o.index)
    switches = [k for k in range(len(ordered) - 1) if ordered[k].feasible != ordered[k + 1].feasible]
    if len(switches) <= 1:
        return True, ""
    a, b, c = ordered[switches[0]], ordered[switches[0] + 1], ordered[switches[1] + 1]
    return False, (f"meets the requirements at {a.values[0]}: {a.feasible}, at {b.values[0]}: {b.feasible}, "
                   f"at {c.values[0]}: {c.feasible}")


def _monotone_objective(points: list[Outcome]) -> tuple[str | None, str]:
    """``nondecreasing``, ``nonincreasing``, ``constant`` or None (with the witnesses)."""
    ordered = [o for o in sorted(points, key=lambda o: o.index) if o.feasible]
    up = all(a.value <= b.value for a, b in zip(ordered, ordered[1:]))
    down = all(a.value >= b.value for a, b in zip(ordered, ordered[1:]))
    if up and down:
        return "constant", ""
    if up:
        return "nondecreasing", ""
    if down:
        return "nonincreasing", ""
    rise = next(k for k in range(len(ordered) - 1) if ordered[k].value < ordered[k + 1].value)
    fall = next(k for k in range(len(ordered) - 1) if ordered[k].value > ordered[k + 1].value)
    shown = sorted({rise, rise + 1, fall, fall + 1})
    return None, ", ".join(f"{ordered[k].values[0]} -> {ordered[k].value}" for k in shown)


def _bisection(ev: Evaluator, out: GeometryExploreResult) -> GeometryExploreResult:
    """One open field of ascending integers, too many values to plan: bisect, relying on (and
    checking at every candidate planned) monotone feasibility and a monotone objective."""
    open_field = ev.fields[0]
    n = len(open_field.domain)
    out.route = "bisection"
    at = lambda i: ev.at((i,))  # noqa: E731
    samples = [at(i) for i in _samples(n)]
    states = [o.feasible for o in samples]
    answer: Outcome | None = None
    if any(states) and _monotone_feasibility(samples)[0]:
        lo_i, hi_i = 0, n - 1  # the feasible interval
        if not all(states):
            k = next(k for k in range(len(samples) - 1) if samples[k].feasible != samples[k + 1].feasible)
            left, right = samples[k].index[0], samples[k + 1].index[0]
            while right - left > 1:  # left keeps samples[k]'s state, right the other one's
                mid = (left + right) // 2
                if at(mid).feasible == samples[k].feasible:
                    left = mid
                else:
                    right = mid
            lo_i, hi_i = (right, n - 1) if samples[k + 1].feasible else (0, left)
            _window(ev, right, n)
        if _monotone_objective(list(ev.cache.values()))[0] is not None:
            first, last = at(lo_i), at(hi_i)
            pick = min if ev.direction == "minimize" else max
            best_value = pick(first.value, last.value)
            answer = first
            if first.value != best_value:  # the optimum is at the far end: find where its value starts
                left, right = lo_i, hi_i  # at(left) is not optimal, at(right) is
                while right - left > 1:
                    mid = (left + right) // 2
                    if at(mid).value == best_value:
                        right = mid
                    else:
                        left = mid
                answer = at(right)
                _window(ev, right, n)
    seen = list(ev.cache.values())
    probes = len(seen) - len(samples)
    feasible_ok, witness = _monotone_feasibility(seen)
    out.relied_on.append(Reliance(
        f"the candidates that meet the requirements form one interval at an end of the domain of "
        f"{open_field.path} (feasibility is monotone in {open_field.path})",
        f"{len(samples)} evenly spaced candidates and {probes} more (bisection probes, {WINDOW} on each side of "
        f"each boundary) agree" if feasible_ok else f"FAILED: {witness}", feasible_ok))
    if not feasible_ok:
        out.status, out.reason = "unknown", (
            f"a property the search relied on failed: feasibility is not monotone in {open_field.path} ({witness}); "
            f"its {n:,} values are more than --max-plans ({ev.max_plans:,}) allows to plan one by one")
        return out
    if not any(o.feasible for o in seen):  # monotonicity would make it infeasible, but nothing shows it
        out.status, out.reason = "unknown", (
            f"none of the {len(samples)} sampled candidates meets the requirements, so the bisection has no interval "
            f"to search; a domain of at most --max-plans ({ev.max_plans:,}) values is planned one by one "
            f"({open_field.path}=LO..HI[:STEP])")
        return out
    trend, witness = _monotone_objective(seen)
    out.relied_on.append(Reliance(
        f"the objective is monotone in {open_field.path} over the candidates that meet the requirements",
        f"{sum(o.feasible for o in seen)} such candidates agree ({trend})" if trend else f"FAILED: {witness}",
        trend is not None))
    if trend is None or answer is None:
        out.status, out.reason = "unknown", (
            f"a property the search relied on failed: the objective is not monotone in {open_field.path} ({witness}); "
            f"its {n:,} values are more than --max-plans ({ev.max_plans:,}) allows to plan one by one")
        return out
    return _finish(ev, out, answer)


#: Candidates planned on each side of a boundary the bisection found (a periodic feasible set,
#: such as the divisors of a block size, shows there).
WINDOW = 16


def _window(ev: Evaluator, index: int, n: int) -> None:
    for i in range(max(0, index - WINDOW), min(n, index + WINDOW)):
        ev.at((i,))


def _finish(ev: Evaluator, out: GeometryExploreResult, best: Outcome | None) -> GeometryExploreResult:
    """The answer replayed through ``simulate`` (its text, as ``kvproof simulate`` reads it), with
    its neighbours in the domain."""
    if best is None:
        out.status = "infeasible"
        out.reason = "no candidate of the domain meets the requirements"
        return out
    text = dumps(ev.tree(best.index))
    replayed = simulate_document(text, ev.file)
    again = ev.judge(best.index, best.values, load_geometry(text, ev.file), replayed)
    if (again.feasible, again.value, replayed) != (True, best.value, best.document):
        out.status, out.reason = "unknown", "the replay through simulate disagrees with the search's own plan"
        return out
    out.replay = [best] + _neighbours(ev, best)
    for neighbour in out.replay[1:]:
        if neighbour.feasible and ev.better(neighbour, best):
            out.status, out.reason = "unknown", (f"a neighbour of the answer is better: {ev._where(neighbour.values)} "
                                                 f"-> {neighbour.value}")
            return out
    out.status, out.value, out.document = "optimal", best.value, text
    for open_field, value in zip(ev.fields, best.values):
        found, before = _lookup(ev.template, open_field.parts)
        if not found or before != value or type(before) is not type(value):
            out.changed[open_field.path] = value
    return out


def _neighbours(ev: Evaluator, best: Outcome) -> list[Outcome]:
    out = []
    for position, open_field in enumerate(ev.fields):
        for step in (-1, 1):
            i = best.index[position] + step
            if 0 <= i < len(open_field.domain):
                index = best.index[:position] + (i,) + best.index[position + 1:]
                try:
                    out.append(ev.at(index))
                except BudgetExhausted:
                    ev.max_plans += 1  # the replay's neighbours are planned past the budget
                    out.append(ev.at(index))
    return out


# -- the symbolic route ----------------------------------------------------------------------------


def _symbolic(ev: Evaluator, out: GeometryExploreResult, timeout: float, rlimit: int | None) -> str | None:
    """Answers into ``out`` and returns None, or returns why the route does not apply."""
    fields = ev.fields
    if not all(f.is_memory for f in fields):
        return "an open field other than available_memory_bytes"
    if len(fields) > 1 and any(len(f.parts) == 1 for f in fields):
        return "the memory is opened twice"
    if not all(f.domain.ascending_ints for f in fields):
        return "a memory domain that is not ascending integers"
    memory = ev.template.get(MEMORY_FIELD)
    if any(len(f.parts) == 1 for f in fields) and not (memory is None or type(memory) is int):
        return "available_memory_bytes is a list: open its elements ($.available_memory_bytes[i])"
    probe_index = tuple(len(f.domain) - 1 for f in fields)
    probe = ev.at(probe_index)  # the largest memory of the domain
    geometry = load_geometry(ev.tree(probe_index), ev.file)
    if present(geometry.num_gpu_blocks_override) and geometry.num_gpu_blocks_override is not None:
        return "num_gpu_blocks_override sizes the pool, not the memory"
    if geometry.original_max_model_len == -1:
        return "original_max_model_len -1: the auto-fit makes max_model_len depend on the memory"
    if present(geometry.simulate) and geometry.simulate is not None:
        return "the simulate block runs requests over the pool, whose size depends on the memory"

    z3 = logic.z3()
    ks = [z3.Int(f"k{i}") for i in range(len(fields))]
    axioms, memories = [], []
    for k, f in zip(ks, fields):
        axioms += [k >= 0, k <= len(f.domain) - 1]
        if f.domain.values is None:
            memories.append(f.domain.lo + f.domain.step * k)
        else:
            term = z3.IntVal(f.domain.values[-1])
            for i in range(len(f.domain) - 2, -1, -1):
                term = z3.If(k == i, f.domain.values[i], term)
            memories.append(term)
    planned = plan(geometry) if probe.status == "ok" else None
    workers = len(geometry.workers) if present(geometry.workers) and geometry.workers else 1
    per_worker = []
    for i in range(workers):
        term = memory[i] if isinstance(memory, list) and i < len(memory) else memory
        for f, m in zip(fields, memories):
            if len(f.parts) == 1 or f.parts[1] == i:
                term = m
        per_worker.append(term)
    if len(fields) == 1 and len(fields[0].parts) == 1:
        symbolic_doc = attrs.evolve(geometry, available_memory_bytes=memories[0])
    else:
        symbolic_doc = attrs.evolve(geometry, available_memory_bytes=list(per_worker))

    if planned is None:  # refused at the largest memory: at every smaller one too (see `prop` below)
        is_ok = z3.BoolVal(False)
        view = PlanNode({"status": "refused", "error": NotSymbolic(
            "plan.error: its text depends on the memory; not modelled by the symbolic route")}, STARTED_KEYS)
        prop = (f"the plan at the largest memory of the domain is refused, and so is the plan at every smaller one: "
                f"the memory check compares a need that does not read the memory with memory - bytes_per_block "
                f"(vLLM {MEMORY_CHECK}, 1533-1559), and kvproof.sim.plan's other refusals do not read the memory")
    else:
        if plan_to_document(planned) != probe.document:
            return "the probe's plan and its document disagree"
        if not planned.groups:
            return "an attention-free model (no pool)"

        started, own = [], []
        for worker, m in zip(planned.workers, per_worker):
            if not worker.groups:
                own.append(1)
                continue
            # the null block is reserved (kv_cache_planning.py:1533-1543), then _check_enough_kv_cache_memory
            # (50-87, called at 1551-1559); num_blocks = memory // bytes_per_block (1571-1573)
            check = m - worker.bytes_per_block
            started.append(z3.And(check > 0, worker.memory_needed_bytes <= check))
            own.append(pool.num_blocks_for_memory(m, worker.bytes_per_block))
        is_ok = z3.And(*started) if started else z3.BoolVal(True)
        num_blocks = logic.Min(own)  # every rank takes the smallest count (1580-1584)
        max_concurrency = concurrency.max_concurrency(num_blocks, planned.per_group_blocks_per_request)
        data = dict(probe.document)
        data.update({
            "status": z3.If(is_ok, z3.StringVal("ok"), z3.StringVal("refused")),
            "num_blocks": num_blocks, "num_usable_blocks": num_blocks - 1, "max_concurrency": max_concurrency,
            "kv_cache_size_tokens": concurrency.kv_cache_size_tokens(max_concurrency, planned.max_model_len),
            "kv_cache_tensors": NotSymbolic("plan.kv_cache_tensors: not modelled by the symbolic route"),
            "error": NotSymbolic("plan.error: its text depends on the memory; not modelled by the symbolic route"),
            "workers": [dict(w, available_memory_bytes=m, num_blocks=num_blocks)
                        for w, m in zip(probe.document["workers"], per_worker)],
        })
        view = PlanNode(data, frozenset())
        prop = ("kvproof.sim.plan reads the memory only where it sizes the pool and checks the memory: the groups, "
                "pages, bytes per block and blocks per request are the probe's")
    reads = object.__getattribute__(view, "_reads")
    names = {"doc": symbolic_doc, "plan": view}
    try:
        requirements = [r.evaluate(names) for r in ev.requirements]
        objective = ev.objective.evaluate(names)
    except NotPlanned:  # a started plan's key, and no plan of the domain starts
        requirements, objective = [False], 0
    except NotSymbolic as exc:
        return exc.message
    except ExpressionError as exc:
        return f"the expressions need concrete values ({exc.message})"
    except (z3.Z3Exception, logic.ConcreteRequired, TypeError) as exc:
        return f"the expressions use a symbolic value in Python control flow ({type(exc).__name__})"
    except Exception as exc:  # noqa: BLE001 - the solver's pinning protocol (SymbolicFlowError)
        if type(exc).__name__ == "SymbolicFlowError":
            return f"the expressions need concrete values ({exc})"
        raise
    if any(not _is_bool(r) for r in requirements):
        return "a requirement is not a truth value on the symbolic plan"
    if not _is_number(objective):
        return "the objective is not a number on the symbolic plan"
    conditions = [_bool(z3, r) for r in requirements]
    if reads - {"status"}:  # a started plan's key was read: a refused candidate does not qualify
        conditions.append(is_ok)
    feasible = z3.And(*conditions) if conditions else z3.BoolVal(True)
    objective_term = _number_term(z3, objective)

    optimizer = z3.Optimize()
    optimizer.set("timeout", max(1, int(timeout * 1000)))  # a safety net: the budget is the resource limit
    optimizer.set("rlimit", rlimit or Config().rlimit)  # the default of every solver command
    for axiom in axioms:
        optimizer.add(axiom)
    optimizer.add(feasible)
    if ev.direction == "minimize":
        optimizer.minimize(objective_term)
    else:
        optimizer.maximize(objective_term)
    for k in ks:  # ties: the first candidate in domain order (z3 optimizes lexicographically)
        optimizer.minimize(k)
    result = optimizer.check()
    if result == z3.unknown:
        return f"z3 gave no answer ({optimizer.reason_unknown()})"
    out.route = "symbolic"
    probe_at = ", ".join(f"{f.path}={f.domain.value(i)}" for f, i in zip(fields, probe_index))
    out.notes.append(
        f"z3 Optimize over the memory, with the plan of the probe at {probe_at}"
        + (" (formulas.pool.num_blocks_for_memory, formulas.concurrency.max_concurrency and kv_cache_size_tokens, the memory "
           f"check of vLLM {MEMORY_CHECK})" if planned is not None else ""))

    def predicted(index: tuple) -> tuple[bool, bool, Any]:
        pairs = [(k, z3.IntVal(i)) for k, i in zip(ks, index)]
        started_here = z3.is_true(z3.simplify(z3.substitute(is_ok, *pairs)))
        is_feasible = z3.is_true(z3.simplify(z3.substitute(feasible, *pairs)))
        value = _z3_number(z3.simplify(z3.substitute(objective_term, *pairs))) if is_feasible else None
        return started_here, is_feasible, value

    structure = _structure(probe.document) if planned is not None else None

    def disagreement(outcome: Outcome) -> str:
        where = ev._where(outcome.values)
        started_here, is_feasible, value = predicted(outcome.index)
        if (outcome.status == "ok") != started_here:
            model_status = "ok" if started_here else "refused"
            return f"at {where} the planner's status is {outcome.status}, the model's {model_status}"
        if outcome.status == "ok" and _structure(outcome.document) != structure:
            return f"the plan at {where} has another structure than the probe's"
        if is_feasible != outcome.feasible:
            return (f"at {where} the planner says meets the requirements: {outcome.feasible}, the model "
                    f"{is_feasible}")
        if is_feasible and not _same_number(value, outcome.value):
            return f"at {where} the planner's objective is {outcome.value}, the model's {value}"
        return ""

    if result == z3.unsat:
        best = None
        checked = [probe, ev.at(tuple(0 for _ in fields))]
    else:
        model = optimizer.model()
        best = ev.at(tuple(model.eval(k, model_completion=True).as_long() for k in ks))
        checked = [best] + _neighbours(ev, best) + [probe]
    problems = [p for p in (disagreement(o) for o in checked) if p]
    out.relied_on.append(Reliance(
        prop, f"FAILED: {problems[0]}" if problems else
        f"the plans at {'the answer, its neighbours and the probe' if best else 'both ends of the domain'} "
        f"({len(checked)}) agree with the model (status, structure, requirements, objective)", not problems))
    if problems:
        out.status, out.reason = "unknown", f"a property the symbolic route relied on failed: {problems[0]}"
        return None
    _finish(ev, out, best)
    return None


def _structure(document: dict) -> dict:
    """A started plan without the values the memory changes (the pool's size: block counts,
    concurrency, the tensors' sizes, strides and offsets, the workers' memory)."""
    out = {k: v for k, v in document.items() if k not in MEMORY_KEYS}
    out["kv_cache_tensors"] = [{"layers": t["layers"]} for t in document.get("kv_cache_tensors", [])]
    out["workers"] = [{k: v for k, v in w.items() if k not in ("available_memory_bytes", "num_blocks")}
                      for w in document.get("workers", [])]
    return out


def _is_bool(value: Any) -> bool:
    return type(value) is bool or (is_symbolic(value) and value.sort().name() == "Bool")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float, Fraction)) or (is_symbolic(value) and value.sort().name() in ("Int", "Real"))


def _bool(z3: Any, value: Any) -> Any:
    return z3.BoolVal(value) if type(value) is bool else value


def _number_term(z3: Any, value: Any) -> Any:
    if isinstance(value, int):
        return z3.IntVal(value)
    if isinstance(value, (float, Fraction)):
        return z3.RealVal(Fraction(value))
    return value


def _z3_number(value: Any) -> Any:
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    raise ValueError(f"not a number: {value}")


def _same_number(model: Any, planner: Any) -> bool:
    """The model's exact value and the planner's (a Python float where vLLM has one)."""
    if isinstance(planner, float):
        return float(model) == planner
    return Fraction(model) == Fraction(planner)


# -- the entry point -------------------------------------------------------------------------------


def explore_geometry(template: dict, file: str, objective: str, direction: str, open_specs: Iterable[str],
                     requires: Iterable[str] = (), max_plans: int = DEFAULT_MAX_PLANS, timeout: float = 120.0,
                     rlimit: int | None = None) -> GeometryExploreResult:
    """The optimum of ``objective`` over the candidates the ``open_specs`` make of ``template`` (a
    parsed geometry that loads). Raises :class:`GeometryExploreError` for bad input (exit 2)."""
    open_specs = list(open_specs)
    if not open_specs:
        raise GeometryExploreError("a geometry template needs at least one --open PATH[=DOMAIN] (the fields the "
                                   "search may change, e.g. --open '$.available_memory_bytes')")
    fields = [parse_open(spec, template) for spec in open_specs]
    seen: set = set()
    for f in fields:
        for other in seen:
            if f.parts[:len(other)] == other or other[:len(f.parts)] == f.parts:
                raise GeometryExploreError(f"--open {f.path}: it overlaps another open field")
        seen.add(f.parts)
    option = "--minimize" if direction == "minimize" else "--maximize"
    try:
        checked_objective = parse(objective, free=("doc", "plan"))
    except ExpressionError as exc:
        raise GeometryExploreError(f"{option} {exc.render()}") from None
    sources = list(requires) or [DEFAULT_REQUIREMENT]
    requirements = []
    for source in sources:
        try:
            requirements.append(parse(source, free=("doc", "plan")))
        except ExpressionError as exc:
            raise GeometryExploreError(f"--require {exc.render()}") from None
    ev = Evaluator(template, file, fields, checked_objective, requirements, direction, max_plans)
    out = GeometryExploreResult("unknown", objective, direction, sources, fields)
    try:
        first = ev.at(tuple(0 for _ in fields))  # validates the candidates and the expressions early
        del first
        why = _symbolic(ev, out, timeout, rlimit)
        if why is None:
            out.plans = ev.plans
            return out
        if all(f.is_memory for f in fields):
            out.notes.append(f"symbolic route not taken: {why}")
        out.route = ""
        size = 1
        for f in fields:
            size *= len(f.domain)
        if size <= ev.max_plans:
            _exhaustive(ev, out)
        elif len(fields) == 1 and fields[0].domain.ascending_ints:
            _bisection(ev, out)
        else:
            out.status = "unknown"
            out.reason = (f"the domain holds {size:,} candidates, more than --max-plans ({ev.max_plans:,}), and "
                          "bisection takes one open field of ascending integers")
    except BudgetExhausted:
        out.status = "unknown"
        out.reason = f"the search planned --max-plans ({ev.max_plans:,}) geometries without an answer"
    out.plans = ev.plans
    return out


def render_text(result: GeometryExploreResult, with_document: bool = True) -> str:
    """The text report (deterministic: no timings)."""
    lines = []
    value = "" if result.value is None else f" = {_json_number(result.value)}"
    lines.append(f"{result.status}: {result.direction} {result.objective}{value}")
    lines.append("requires: " + "; ".join(result.requires))
    lines.append("open: " + "; ".join(
        f"{f.path} in {f.domain.describe()} ({len(f.domain):,} value{'s' if len(f.domain) != 1 else ''})"
        for f in result.fields))
    if result.route:
        lines.append(f"route: {result.route}")
    for note in result.notes:
        lines.append(f"  {note}")
    for reliance in result.relied_on:
        lines.append(f"relied on: {reliance.property}")
        lines.append(f"  checked: {reliance.check}")
    for number, outcome in enumerate(result.replay):
        label = "replayed through simulate" if number == 0 else "neighbour"
        where = ", ".join(f"{f.path}={json.dumps(v)}" for f, v in zip(result.fields, outcome.values))
        verdict = "meets the requirements" if outcome.feasible else "does not meet the requirements"
        objective = f", objective {_json_number(outcome.value)}" if outcome.feasible else ""
        message = f": {outcome.message}" if outcome.message and outcome.status != "ok" else ""
        lines.append(f"{label}: {where}: {outcome.status}{message}; {verdict}{objective}")
    if result.changed:
        lines.append("changed: " + ", ".join(f"{path} = {json.dumps(v)}" for path, v in result.changed.items()))
    lines.append(f"plans: {result.plans}")
    if result.reason:
        lines.append(result.reason)
    text = "\n".join(lines) + "\n"
    if with_document and result.document:
        text += result.document
    return text
