"""The ReplaySSM / RecoverSSM support table: which state settings vLLM starts with, per revision.

Data that the rules (``kvproof/rules/state_support.py``), the solver
(``kvproof/solver/state_support.py``) and the docs read; it imports nothing of kvproof but
:mod:`kvproof.logic`, so every predicate here works on ints and bools and on z3 terms alike.

A combination of settings (the :data:`AXES`) is decided by exactly one :class:`Row` (the solver
proves the table total and its rows disjoint and reachable). vLLM 0.33.0's rows follow
``VllmConfig.validate_mamba_cached_kernel`` (``vllm/config/vllm.py:3454-3553``) branch by branch:
a row holds the conditions under which vLLM reaches its ``raise`` (or its ``return self``), the
negations of every earlier ``raise`` included, so "first refusal wins" holds by construction and
the conformance suite compares every row with vLLM's own validator. The rows of seed 004's
revision (vLLM PR #55688 at :data:`REVISION_PR_55688`) change only what that PR's "Support
boundaries" state (docs/state-storage.md gives the reading); refusals the seed gives no text for
carry a kvproof text that names the seed.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs

from ...logic import And, Not, Or

__all__ = [
    "REVISION_0_33_0", "REVISION_PR_55688", "REVISIONS", "DEFAULT_REVISION", "KDA_ARCHITECTURES",
    "REPLAYSSM_ARCHITECTURES", "NATIVE_MTP_METHODS", "EAGLE_METHODS", "AXES", "RefusalText", "REFUSALS",
    "Row", "ROWS", "ATOMS", "matches", "in_domain", "decide", "state_backend", "DictView", "rows_of",
    "VALIDATOR", "NUMBERS", "architecture_class", "speculative_class", "refusal_text", "refusal_names",
    "markdown_rows",
]

VALIDATOR = "vllm/config/vllm.py:3454-3553 (VllmConfig.validate_mamba_cached_kernel)"
REVISION_0_33_0 = "0.33.0"
#: Seed 004: vLLM PR #55688 ("FlashInfer ReplaySSM prefix caching") at this revision.
REVISION_PR_55688 = "d9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628"
REVISIONS = (REVISION_0_33_0, REVISION_PR_55688)
DEFAULT_REVISION = REVISION_0_33_0

#: config/vllm.py:3460-3463: the architectures whose speculative decode uses KDA RecoverSSM.
KDA_ARCHITECTURES = ("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration")
#: The registered architectures whose class implements ``SupportsReplaySSM``
#: (model_executor/models/interfaces.py:1217-1224): nemotron_h.py:719-729 (registered as
#: NemotronHForCausalLM and NemotronHPuzzleForCausalLM, models/registry.py:186-187) and
#: models/kimi_k3/nvidia/model.py:1402-1409, 1577 (registry.py:148-151, 488-491).
REPLAYSSM_ARCHITECTURES = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", *KDA_ARCHITECTURES)
#: ``MTPModelTypes`` (config/speculative.py:38-67): the native MTP methods.
NATIVE_MTP_METHODS = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
    "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
    "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
    "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp",
    "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
)
EAGLE_METHODS = ("eagle", "eagle3")

#: The finite axes and their values. ``architecture`` is a class of architectures: ``other``
#: (no SupportsReplaySSM), ``replayssm`` (SupportsReplaySSM, not KDA), ``kda``;
#: ``speculative`` is the method's class (``none`` exactly when num_speculative_tokens is 0).
AXES: dict[str, tuple] = {
    "revision": REVISIONS,
    "use_replayssm": (False, True),
    "architecture": ("other", "replayssm", "kda"),
    "mamba_backend": ("triton", "flashinfer", "cpu"),  # MambaBackendEnum, config/mamba.py:25-30
    "model_runner": ("V1", "V2"),
    "mamba_cache_mode": ("none", "align", "all"),
    "speculative": ("none", "eagle", "mtp", "other"),
    "kv_connector": (False, True),  # kv_transfer_config.is_kv_transfer_instance
    "stochastic_rounding": (False, True),  # mamba_config.enable_stochastic_rounding
}
#: The integer axes (each at least its bound).
NUMBERS: dict[str, int] = {"num_speculative_tokens": 0, "replayssm_buffer_len": 1, "pipeline_parallel_size": 1}


class DictView:
    """Settings as a plain mapping (the conformance grid, the docs, tests)."""

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = settings

    def is_(self, axis: str, value: Any) -> bool:
        return self.settings[axis] == value

    def num(self, axis: str) -> int:
        return self.settings[axis]


# Named predicates that span several axes (a row names them, ``!`` negates). Each is a line of
# validate_mamba_cached_kernel.
ATOMS: dict[str, Callable[[Any], Any]] = {
    # 3480-3485
    "flashinfer_buffer_over_16": lambda v: And(v.is_("mamba_backend", "flashinfer"), v.num("replayssm_buffer_len") > 16),
    # 3494-3499
    "align_on_v1": lambda v: And(v.is_("mamba_cache_mode", "align"), v.is_("model_runner", "V1")),
    # 3501
    "pipeline_parallel": lambda v: v.num("pipeline_parallel_size") > 1,
    # 3513-3514
    "buffer_below_query_len": lambda v: v.num("replayssm_buffer_len") < 1 + v.num("num_speculative_tokens"),
    # seed 004: prefix caching with a speculative method other than native MTP
    "prefix_caching_without_native_mtp": lambda v: And(Not(v.is_("mamba_cache_mode", "none")),
                                                       Not(v.is_("speculative", "mtp"))),
}


def in_domain(v: Any) -> Any:
    """The combinations vLLM can be given: 0.33.0 has no Mamba mode ``all``
    (``MambaCacheMode = Literal["align", "none"]``, config/cache.py:176); a speculative method
    exactly when there are speculative tokens (config/vllm.py:612-624); the integer bounds."""
    return And(
        Or(Not(v.is_("revision", REVISION_0_33_0)), Not(v.is_("mamba_cache_mode", "all"))),
        v.is_("speculative", "none") == (v.num("num_speculative_tokens") == 0),
        *[v.num(axis) >= low for axis, low in NUMBERS.items()],
    )


@attrs.frozen
class RefusalText:
    """One refusal text: the rule that reports it, the field that decides it, its source."""

    rule: str
    text: str
    field: str
    source: str
    #: The text is vLLM's own (False: kvproof's, for a refusal the seed gives no text for).
    vllm_text: bool = True


_SEED = "seed 004 (vLLM PR #55688 at d9cd1fd1, 'Support boundaries'; the seed gives no text)"

REFUSALS: dict[str, RefusalText] = {r.rule: r for r in (
    RefusalText("SS005", "--use-replayssm is not supported for architecture {architecture}", "architecture",
            "vllm/config/vllm.py:3475-3479"),
    RefusalText("SS006", "FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16", "replayssm_buffer_len",
            "vllm/config/vllm.py:3480-3486"),
    RefusalText("SS007", "RecoverSSM supports bfloat16/float32 SSM state caches, not --enable-mamba-cache-stochastic-"
            "rounding, which requires an explicit float16 cache", "mamba_stochastic_rounding",
            "vllm/config/vllm.py:3488-3493"),
    RefusalText("SS008", "RecoverSSM with prefix caching requires VLLM_USE_V2_MODEL_RUNNER=1", "use_v2_model_runner",
            "vllm/config/vllm.py:3494-3500"),
    RefusalText("SS009", "KDA RecoverSSM does not support mamba_cache_mode 'all' "
            "(kvproof text: " + _SEED + ": RecoverSSM supports none on V1 and none/align on V2)", "mamba_cache_mode",
            _SEED, vllm_text=False),
    RefusalText("SS010", "RecoverSSM currently requires pipeline_parallel_size=1", "pipeline_parallel_size",
            "vllm/config/vllm.py:3501-3504"),
    RefusalText("SS011", "RecoverSSM requires --mamba-backend triton", "mamba_backend", "vllm/config/vllm.py:3505-3506"),
    RefusalText("SS012", "FlashInfer ReplaySSM speculative decoding does not support prefix caching; "
            "use --disable-prefix-caching", "mamba_cache_mode", "vllm/config/vllm.py:3507-3512"),
    RefusalText("SS013", "FlashInfer ReplaySSM prefix caching with speculative decoding is supported for native MTP only "
            "(kvproof text: " + _SEED + ")", "speculative_method", _SEED, vllm_text=False),
    RefusalText("SS014", "FlashInfer ReplaySSM speculative decoding requires --replayssm-buffer-len >= "
            "1 + num_speculative_tokens ({query_len}); got {buffer_len}", "replayssm_buffer_len",
            "vllm/config/vllm.py:3513-3520"),
    RefusalText("SS015", "Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer", "mamba_backend",
            "vllm/config/vllm.py:3521-3525"),
    RefusalText("SS016", "FlashInfer ReplaySSM does not support prefix caching yet; use --disable-prefix-caching",
            "mamba_cache_mode", "vllm/config/vllm.py:3526-3531"),
    RefusalText("SS017", "--use-replayssm requires --mamba-backend triton or flashinfer", "mamba_backend",
            "vllm/config/vllm.py:3532-3535"),
    RefusalText("SS018", "Triton ReplaySSM does not support mamba_cache_mode 'all' (kvproof text: " + _SEED + ")",
            "mamba_cache_mode", _SEED, vllm_text=False),
    RefusalText("SS019", "Triton ReplaySSM requires Model Runner V1; use --mamba-backend flashinfer or Model Runner V1",
            "use_v2_model_runner", "vllm/config/vllm.py:3536-3540"),
    RefusalText("SS020", "--use-replayssm is incompatible with KV connectors (P/D disaggregation, KV cache offload)",
            "is_kv_transfer_instance", "vllm/config/vllm.py:3541-3552"),
)}


@attrs.frozen
class Row:
    """Combinations (every listed axis in its values, every atom as stated) and their verdict."""

    name: str
    revision: str
    when: Mapping[str, tuple] = attrs.field(converter=lambda m: dict(m))
    atoms: tuple[str, ...] = ()
    #: The refusal's rule ID; None: vLLM starts (the row's state backend is supported).
    rule: str | None = None
    #: Where the verdict comes from (the ``return self`` of a supported row, or the seed).
    source: str = ""

    @property
    def supported(self) -> bool:
        return self.rule is None


def matches(row: Row, v: Any) -> Any:
    """The settings seen through ``v`` (``is_``/``num``) fall in the row."""
    parts = [v.is_("revision", row.revision)]
    parts += [Or(*[v.is_(axis, value) for value in values]) for axis, values in row.when.items()]
    for atom in row.atoms:
        term = ATOMS[atom.lstrip("!")](v)
        parts.append(Not(term) if atom.startswith("!") else term)
    return And(*parts)


SPEC = ("eagle", "mtp", "other")
ON = (True,)
OFF = (False,)
BOTH_ARCHES = ("replayssm", "kda")
NOT_TRITON = ("flashinfer", "cpu")


def _rows_0_33_0() -> list[Row]:
    rev = REVISION_0_33_0
    R = {"use_replayssm": ON}
    kda_spec = {**R, "architecture": ("kda",), "speculative": SPEC}
    ok_kda = {**kda_spec, "stochastic_rounding": OFF}
    spec = {**R, "architecture": ("replayssm",), "speculative": SPEC}
    plain = {**R, "architecture": BOTH_ARCHES, "speculative": ("none",)}
    ret = "vllm/config/vllm.py:3553 (return self)"
    f16 = "!flashinfer_buffer_over_16"
    return [
        Row("full state", rev, {"use_replayssm": OFF}, source="vllm/config/vllm.py:3456-3458"),
        Row("no SupportsReplaySSM", rev, {**R, "architecture": ("other",)}, rule="SS005"),
        Row("FlashInfer buffer > 16", rev, {**R, "architecture": BOTH_ARCHES}, ("flashinfer_buffer_over_16",), rule="SS006"),
        Row("RecoverSSM stochastic rounding", rev, {**kda_spec, "stochastic_rounding": ON}, (f16,), rule="SS007"),
        Row("RecoverSSM align on V1", rev, ok_kda, (f16, "align_on_v1"), rule="SS008"),
        Row("RecoverSSM pipeline parallel", rev, ok_kda, (f16, "!align_on_v1", "pipeline_parallel"), rule="SS010"),
        Row("RecoverSSM not Triton", rev, {**ok_kda, "mamba_backend": NOT_TRITON},
            (f16, "!align_on_v1", "!pipeline_parallel"), rule="SS011"),
        Row("KDA RecoverSSM", rev, {**ok_kda, "mamba_backend": ("triton",)}, ("!align_on_v1", "!pipeline_parallel"),
            source=ret + "; the KV connector check skips RecoverSSM (3541-3548)"),
        Row("ReplaySSM speculative with prefix caching", rev, {**spec, "mamba_cache_mode": ("align",)}, (f16,), rule="SS012"),
        Row("ReplaySSM speculative buffer short", rev, {**spec, "mamba_cache_mode": ("none",)},
            (f16, "buffer_below_query_len"), rule="SS014"),
        Row("ReplaySSM speculative not FlashInfer", rev, {**spec, "mamba_cache_mode": ("none",), "mamba_backend": ("triton", "cpu")},
            ("!buffer_below_query_len",), rule="SS015"),
        Row("FlashInfer ReplaySSM speculative with a KV connector", rev,
            {**spec, "mamba_cache_mode": ("none",), "mamba_backend": ("flashinfer",), "kv_connector": ON},
            (f16, "!buffer_below_query_len"), rule="SS020"),
        Row("FlashInfer ReplaySSM speculative", rev,
            {**spec, "mamba_cache_mode": ("none",), "mamba_backend": ("flashinfer",), "kv_connector": OFF},
            (f16, "!buffer_below_query_len"), source=ret),
        Row("FlashInfer ReplaySSM with prefix caching", rev, {**plain, "mamba_backend": ("flashinfer",), "mamba_cache_mode": ("align",)},
            (f16,), rule="SS016"),
        Row("FlashInfer ReplaySSM with a KV connector", rev,
            {**plain, "mamba_backend": ("flashinfer",), "mamba_cache_mode": ("none",), "kv_connector": ON}, (f16,), rule="SS020"),
        Row("FlashInfer ReplaySSM", rev,
            {**plain, "mamba_backend": ("flashinfer",), "mamba_cache_mode": ("none",), "kv_connector": OFF}, (f16,), source=ret),
        Row("ReplaySSM on the CPU backend", rev, {**plain, "mamba_backend": ("cpu",)}, rule="SS017"),
        Row("Triton ReplaySSM on V2", rev, {**plain, "mamba_backend": ("triton",), "model_runner": ("V2",)}, rule="SS019"),
        Row("Triton ReplaySSM with a KV connector", rev,
            {**plain, "mamba_backend": ("triton",), "model_runner": ("V1",), "kv_connector": ON}, rule="SS020"),
        Row("Triton ReplaySSM", rev, {**plain, "mamba_backend": ("triton",), "model_runner": ("V1",), "kv_connector": OFF},
            source=ret),
    ]


def _rows_pr_55688() -> list[Row]:
    """Seed 004's revision: 0.33.0's chain with the PR's "Support boundaries" (docs/state-storage.md):
    FlashInfer ReplaySSM supports none, align and all (speculative: native MTP); ``all`` stays
    unsupported for Triton ReplaySSM and KDA RecoverSSM; RecoverSSM none on V1, none/align on V2."""
    rev = REVISION_PR_55688
    R = {"use_replayssm": ON}
    kda_spec = {**R, "architecture": ("kda",), "speculative": SPEC}
    ok_kda = {**kda_spec, "stochastic_rounding": OFF}
    ok_kda_mode = {**ok_kda, "mamba_cache_mode": ("none", "align")}
    spec = {**R, "architecture": ("replayssm",), "speculative": SPEC}
    plain = {**R, "architecture": BOTH_ARCHES, "speculative": ("none",)}
    seed = "seed 004 (vLLM PR #55688, 'Support boundaries'); otherwise " + VALIDATOR
    f16 = "!flashinfer_buffer_over_16"
    nomtp = "!prefix_caching_without_native_mtp"
    fi_spec = {**spec, "mamba_backend": ("flashinfer",)}
    return [
        Row("full state", rev, {"use_replayssm": OFF}, source="vllm/config/vllm.py:3456-3458 (unchanged by the seed)"),
        Row("no SupportsReplaySSM", rev, {**R, "architecture": ("other",)}, rule="SS005"),
        Row("FlashInfer buffer > 16", rev, {**R, "architecture": BOTH_ARCHES}, ("flashinfer_buffer_over_16",), rule="SS006"),
        Row("RecoverSSM stochastic rounding", rev, {**kda_spec, "stochastic_rounding": ON}, (f16,), rule="SS007"),
        Row("RecoverSSM align on V1", rev, ok_kda, (f16, "align_on_v1"), rule="SS008"),
        Row("RecoverSSM mode all", rev, {**ok_kda, "mamba_cache_mode": ("all",)}, (f16,), rule="SS009"),
        Row("RecoverSSM pipeline parallel", rev, ok_kda_mode, (f16, "!align_on_v1", "pipeline_parallel"), rule="SS010"),
        Row("RecoverSSM not Triton", rev, {**ok_kda_mode, "mamba_backend": NOT_TRITON},
            (f16, "!align_on_v1", "!pipeline_parallel"), rule="SS011"),
        Row("KDA RecoverSSM", rev, {**ok_kda_mode, "mamba_backend": ("triton",)}, ("!align_on_v1", "!pipeline_parallel"),
            source=seed),
        Row("ReplaySSM speculative prefix caching without native MTP", rev, spec,
            (f16, "prefix_caching_without_native_mtp"), rule="SS013"),
        Row("ReplaySSM speculative buffer short", rev, spec, (f16, nomtp, "buffer_below_query_len"), rule="SS014"),
        Row("ReplaySSM speculative not FlashInfer", rev, {**spec, "mamba_backend": ("triton", "cpu")},
            (nomtp, "!buffer_below_query_len"), rule="SS015"),
        Row("FlashInfer ReplaySSM speculative with a KV connector", rev, {**fi_spec, "kv_connector": ON},
            (f16, nomtp, "!buffer_below_query_len"), rule="SS020"),
        Row("FlashInfer ReplaySSM speculative", rev, {**fi_spec, "kv_connector": OFF},
            (f16, nomtp, "!buffer_below_query_len"), source=seed),
        Row("FlashInfer ReplaySSM with a KV connector", rev, {**plain, "mamba_backend": ("flashinfer",), "kv_connector": ON},
            (f16,), rule="SS020"),
        Row("FlashInfer ReplaySSM", rev, {**plain, "mamba_backend": ("flashinfer",), "kv_connector": OFF}, (f16,), source=seed),
        Row("ReplaySSM on the CPU backend", rev, {**plain, "mamba_backend": ("cpu",)}, rule="SS017"),
        Row("Triton ReplaySSM mode all", rev, {**plain, "mamba_backend": ("triton",), "mamba_cache_mode": ("all",)}, rule="SS018"),
        Row("Triton ReplaySSM on V2", rev,
            {**plain, "mamba_backend": ("triton",), "mamba_cache_mode": ("none", "align"), "model_runner": ("V2",)}, rule="SS019"),
        Row("Triton ReplaySSM with a KV connector", rev,
            {**plain, "mamba_backend": ("triton",), "mamba_cache_mode": ("none", "align"), "model_runner": ("V1",),
             "kv_connector": ON}, rule="SS020"),
        Row("Triton ReplaySSM", rev,
            {**plain, "mamba_backend": ("triton",), "mamba_cache_mode": ("none", "align"), "model_runner": ("V1",),
             "kv_connector": OFF}, source=seed),
    ]


#: Every row, revision by revision, each revision's rows in validate_mamba_cached_kernel's order.
ROWS: tuple[Row, ...] = tuple(_rows_0_33_0() + _rows_pr_55688())


def rows_of(rule_id: str) -> list[Row]:
    """The rows a refusal rule reports."""
    return [row for row in ROWS if row.rule == rule_id]


def decide(settings: Mapping[str, Any]) -> Row:
    """The one row that decides concrete settings (every axis given)."""
    view = DictView(settings)
    found = [row for row in ROWS if matches(row, view)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} rows decide {dict(settings)}: {[r.name for r in found]}")
    return found[0]


def state_backend(settings: Mapping[str, Any]) -> str:
    """The state storage the settings select (config/vllm.py:3456-3473 and 3526-3535):
    full state without ReplaySSM, KDA RecoverSSM for a KDA architecture's speculative decode,
    else ReplaySSM on the Mamba backend."""
    if not settings["use_replayssm"]:
        return "full state"
    if settings["architecture"] == "kda" and settings["num_speculative_tokens"] > 0:
        return "KDA RecoverSSM"
    return {"triton": "Triton ReplaySSM", "flashinfer": "FlashInfer ReplaySSM", "cpu": "ReplaySSM (CPU backend)"}[
        settings["mamba_backend"]]


def architecture_class(name: str | None) -> str:
    """The ``architecture`` axis value of an architecture name."""
    if name in KDA_ARCHITECTURES:
        return "kda"
    return "replayssm" if name in REPLAYSSM_ARCHITECTURES else "other"


def speculative_class(num_speculative_tokens: int, method: str | None) -> str:
    """The ``speculative`` axis value: ``none`` without speculative tokens, else the method's class."""
    if num_speculative_tokens == 0:
        return "none"
    if method in NATIVE_MTP_METHODS:
        return "mtp"
    return "eagle" if method in EAGLE_METHODS else "other"


def refusal_text(rule_id: str, architecture: str | None, num_speculative_tokens: int, replayssm_buffer_len: int) -> str:
    """A refusal's text with vLLM's placeholders filled as vLLM fills them (``{architecture!r}``,
    ``query_len = 1 + num_speculative_tokens``, config/vllm.py:3477-3478, 3513-3519)."""
    return REFUSALS[rule_id].text.format(**refusal_names(architecture, num_speculative_tokens, replayssm_buffer_len))


def refusal_names(architecture: str | None, num_speculative_tokens: int, replayssm_buffer_len: int) -> dict[str, str]:
    return {"architecture": repr(architecture), "query_len": str(1 + num_speculative_tokens),
            "buffer_len": str(replayssm_buffer_len)}


def markdown_rows(revision: str) -> list[str]:
    """The rows of a revision as a Markdown table (docs/state-storage.md holds it; a test compares)."""
    out = ["| # | row | conditions | verdict |", "|---|---|---|---|"]
    for number, row in enumerate((r for r in ROWS if r.revision == revision), 1):
        parts = [f"{axis} {'/'.join(str(v) for v in values)}" for axis, values in row.when.items()]
        parts += [atom.replace("!", "not ") for atom in row.atoms]
        verdict = f"{row.rule} ({REFUSALS[row.rule].source})" if row.rule else f"supported ({row.source})"
        out.append(f"| {number} | {row.name} | {'; '.join(parts)} | {verdict} |")
    return out
