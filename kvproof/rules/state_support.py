"""SS: the ReplaySSM / RecoverSSM state settings a record resolved are ones vLLM starts with.

The support table (``kvproof/sim/startup/state_support.py``) decides every combination of the settings by
exactly one row; a record whose settings fall in a refused row is refused with that row's text
(vLLM's exact ``ValueError`` text for the 0.33.0 rows, ``VllmConfig.validate_mamba_cached_kernel``,
``vllm/config/vllm.py:3454-3553``) and the path of the field that decides it. SS001-SS004 make the
settings well-formed first (a known revision and backend, the fields the table needs, positive
integers); SS005-SS020 are the table's refusals, one rule per text, in vLLM's order.

An absent key takes vLLM's default: revision 0.33.0, ``use_replayssm`` false, backend ``triton``
(config/mamba.py:40), ``replayssm_buffer_len`` 16 (config/cache.py:318), 0 speculative tokens,
pipeline_parallel_size 1, no KV connector, no stochastic rounding, and a Mamba mode that follows
prefix caching (``align`` with it, ``none`` without: model_executor/models/config.py:763-787).
"""

from __future__ import annotations

from ..logic import And, Implies, Not, Or, Present, ValueOf, symbolic_table
from ..sim.startup.state_support import (AXES, DEFAULT_REVISION, EAGLE_METHODS, KDA_ARCHITECTURES, NATIVE_MTP_METHODS,
                                 REFUSALS, REPLAYSSM_ARCHITECTURES, REVISIONS, RefusalText, matches,
                                 refusal_names, rows_of)
from .core import Binding, Instance, binding, rule

__all__ = ["RecordView", "resolved_state"]

_TABLE = "kvproof/sim/startup/state_support.py"
#: The vLLM defaults of absent integer keys.
_NUMBER_DEFAULTS = {"num_speculative_tokens": 0, "replayssm_buffer_len": 16, "pipeline_parallel_size": 1}
#: Every setting a view reads (its axes, its numbers): what its shared table is keyed by.
_READ = ("vllm_revision", "use_replayssm", "is_kv_transfer_instance", "mamba_stochastic_rounding",
         "use_v2_model_runner", "mamba_backend", "architecture", "enable_prefix_caching", "mamba_cache_mode",
         "num_speculative_tokens", "speculative_method", "replayssm_buffer_len", "pipeline_parallel_size")


def _flag(value):
    """An optional bool that holds true (absent and null: false)."""
    return And(Present(value), value == True)  # noqa: E712 - a z3 term in the solver


def _string_is(value, default: str, wanted: str):
    """An optional string equals ``wanted`` (absent and null: ``default``)."""
    if default == wanted:
        return Or(Not(Present(value)), value == wanted)
    return And(Present(value), value == wanted)


def _one_of(value, names) -> object:
    return And(Present(value), Or(*[value == name for name in names]))


class RecordView:
    """A record's resolved settings as the table's axes (``is_``/``num``): concrete values or z3
    terms, through the :mod:`kvproof.logic` helpers.

    A verdict is remembered per axis and value, and a row's per row (the table's 16 rules ask the
    same ones many times, and a record is not changed while it is checked): a view of plain
    settings keeps its own plain verdicts; the views of symbolic settings with the same terms
    share one table (:func:`~kvproof.logic.symbolic_table`: a shape's settings are its kind's
    other shapes' terms, so a search builds each axis term once, not once per rule and shape).
    Building these terms cannot fail (no control flow on a symbolic value), which that table asks."""

    __slots__ = ("c", "_known", "_shared")

    def __init__(self, config):
        self.c = config
        table = symbolic_table("RecordView", *(getattr(config, name) for name in _READ))
        self._shared = table is not None
        self._known: dict = {} if table is None else table

    def row(self, row) -> object:
        """The settings fall in ``row`` (:func:`~kvproof.sim.startup.state_support.matches`)."""
        key = ("row", row.revision, row.name)
        verdict = self._known.get(key)
        if verdict is None:
            verdict = matches(row, self)
            if self._shared or type(verdict) is bool:
                self._known[key] = verdict
        return verdict

    def num(self, axis: str):
        return ValueOf(getattr(self.c, axis), _NUMBER_DEFAULTS[axis])

    def is_(self, axis: str, value):
        key = (axis, value)
        verdict = self._known.get(key)
        if verdict is None:
            verdict = self._axis_is(axis, value)
            if self._shared or type(verdict) is bool:
                self._known[key] = verdict
        return verdict

    def _axis_is(self, axis: str, value):
        c = self.c
        if axis == "revision":
            return _string_is(c.vllm_revision, DEFAULT_REVISION, value)
        if axis == "use_replayssm":
            return _flag(c.use_replayssm) if value else Not(_flag(c.use_replayssm))
        if axis == "kv_connector":
            return _flag(c.is_kv_transfer_instance) if value else Not(_flag(c.is_kv_transfer_instance))
        if axis == "stochastic_rounding":
            return _flag(c.mamba_stochastic_rounding) if value else Not(_flag(c.mamba_stochastic_rounding))
        if axis == "model_runner":
            return _flag(c.use_v2_model_runner) if value == "V2" else Not(_flag(c.use_v2_model_runner))
        if axis == "mamba_backend":
            return _string_is(c.mamba_backend, "triton", value)
        if axis == "architecture":
            kda = _one_of(c.architecture, KDA_ARCHITECTURES)
            replayssm = _one_of(c.architecture, [a for a in REPLAYSSM_ARCHITECTURES if a not in KDA_ARCHITECTURES])
            return {"kda": kda, "replayssm": replayssm, "other": Not(Or(kda, replayssm))}[value]
        if axis == "mamba_cache_mode":
            derived = {"align": c.enable_prefix_caching == True, "none": c.enable_prefix_caching == False}  # noqa: E712
            stated = And(Present(c.mamba_cache_mode), c.mamba_cache_mode == value)
            return Or(stated, And(Not(Present(c.mamba_cache_mode)), derived[value])) if value in derived else stated
        if axis == "speculative":
            k = self.num("num_speculative_tokens")
            mtp = _one_of(c.speculative_method, NATIVE_MTP_METHODS)
            eagle = _one_of(c.speculative_method, EAGLE_METHODS)
            return {"none": k == 0, "mtp": And(k > 0, mtp), "eagle": And(k > 0, eagle),
                    "other": And(k > 0, Not(mtp), Not(eagle))}[value]
        raise KeyError(axis)


@binding("worker", "scheduler")
def resolved_state(record):
    """A record's resolved settings."""
    yield Instance("$.resolved_config", (record.resolved_config,))


def _resolved_state_view(record):
    """A record's resolved settings seen as the table's axes: one view per record, so the table's
    rules (SS005-SS020) share its verdicts."""
    yield Instance("$.resolved_config", (RecordView(record.resolved_config),))


#: The table rules' binding: it judges what ``resolved_state`` judges (and ``kvproof rules`` names
#: it so), its instances carry the record's view instead of the bare settings.
resolved_state_view = Binding(("worker", "scheduler"), _resolved_state_view, "resolved_state")


@rule(
    id="SS001",
    message="vllm_revision {revision} is not a revision of the state support table: "
    "'0.33.0' or 'd9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628' (vLLM PR #55688, seed 004)",
    over=resolved_state,
    field="vllm_revision",
    explain=lambda config: {"revision": repr(config.vllm_revision)},
    source=_TABLE + " (REVISIONS)",
)
def revision_known(config):
    """A record names the revision its settings come from; absent means vLLM 0.33.0."""
    return Implies(Present(config.vllm_revision), Or(*[config.vllm_revision == r for r in REVISIONS]))


@binding("worker", "scheduler")
def replayssm_evidence(record):
    """The fields the table needs once ``use_replayssm`` is on (no vLLM default for either:
    ``architecture`` is the model's, ``use_v2_model_runner`` a property of the platform and
    features, config/vllm.py:730-767)."""
    config = record.resolved_config
    for field in ("architecture", "use_v2_model_runner"):
        yield Instance(f"$.resolved_config.{field}", (config, getattr(config, field)), {"field": field})


@rule(
    id="SS002",
    message="use_replayssm requires the resolved {field} (the state support table decides on it)",
    over=replayssm_evidence,
    source="vllm/config/vllm.py:3475 (model_config.architecture), 3536 (use_v2_model_runner)",
)
def replayssm_evidence_complete(config, value):
    """With ``use_replayssm`` on, the architecture and the model runner are stated."""
    return Implies(_flag(config.use_replayssm), Present(value))


@rule(
    id="SS003",
    message="mamba_backend {backend} is not a MambaBackendEnum value: 'triton', 'flashinfer' or 'cpu'",
    over=resolved_state,
    field="mamba_backend",
    explain=lambda config: {"backend": repr(config.mamba_backend)},
    source="vllm/config/mamba.py:25-30 (MambaBackendEnum)",
)
def backend_known(config):
    """The resolved backend is the enum's value (the CLI's upper-case spelling resolves to it)."""
    return Implies(Present(config.mamba_backend), Or(*[config.mamba_backend == b for b in AXES["mamba_backend"]]))


@binding("worker", "scheduler")
def positive_settings(record):
    config = record.resolved_config
    for field in ("replayssm_buffer_len", "pipeline_parallel_size"):
        yield Instance(f"$.resolved_config.{field}", (getattr(config, field),), {"field": field})


@rule(
    id="SS004",
    message="{field} must be at least 1",
    over=positive_settings,
    source="vllm/config/cache.py:318 (replayssm_buffer_len: Field(gt=0)), "
    "vllm/config/parallel.py:140 (pipeline_parallel_size: Field(ge=1))",
)
def positive_setting(value):
    """A stated buffer length and pipeline size are positive (the loader already refuses negatives)."""
    return Implies(Present(value), ValueOf(value) >= 1)


_PREREQUISITES = ("SS001", "SS002", "SS003", "SS004", "PC002")


def _explain(view: RecordView) -> dict[str, str]:
    config = view.c
    return refusal_names(config.architecture if Present(config.architecture) else None,
                         view.num("num_speculative_tokens"), view.num("replayssm_buffer_len"))


def _declare(refusal: RefusalText) -> None:
    rows = rows_of(refusal.rule)

    def body(view):
        return Not(Or(*[view.row(row) for row in rows]))

    kind = "vLLM's text" if refusal.vllm_text else "kvproof's text (the seed gives none)"
    body.__name__ = f"state_support_{refusal.rule.lower()}"
    body.__doc__ = (f"The settings fall in none of the table's rows refused with {kind}: "
                    + "; ".join(f"{row.revision[:12]} {row.name}" for row in rows) + ".")
    rule(id=refusal.rule, message=refusal.text, over=resolved_state_view, field=refusal.field, after=_PREREQUISITES,
         explain=_explain, source=refusal.source)(body)


for _refusal in REFUSALS.values():
    _declare(_refusal)
