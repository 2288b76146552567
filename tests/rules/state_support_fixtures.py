"""The SS fixtures (ReplaySSM / RecoverSSM state support), written by make_fixtures.py.

Each case edits the resolved settings of the MiniMax scheduler record (plain full attention, prefix
caching on, no Mamba mode stated, so the table derives ``align``; a stated mode is stated in the
prefix-caching evidence too, and two pipeline stages double max_in_flight_tokens) and names, by hand, the
diagnostics vLLM 0.33.0's validator or seed 004's support boundaries give (docs/state-storage.md).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MM_SCHEDULER = HERE.parents[1] / "examples" / "minimax-m27-tp4" / "scheduler-dp0.json"
PR = "d9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628"
RC = "$.resolved_config"


def _settings(**values):
    edits = [(["resolved_config", key], value) for key, value in values.items()]
    if "mamba_cache_mode" in values:  # the probe's evidence states the mode it resolved (PC005)
        edits.append((["prefix_caching", "mamba_cache_mode"], values["mamba_cache_mode"]))
    return edits


def nemotron(**values):
    """Triton ReplaySSM on Model Runner V1 for NemotronH, plus ``values``."""
    return _settings(**{"use_replayssm": True, "architecture": "NemotronHForCausalLM", "use_v2_model_runner": False,
                        **values})


def kimi(**values):
    """KDA RecoverSSM (Kimi-Linear, one speculative token, Triton, V2), plus ``values``."""
    return _settings(**{"use_replayssm": True, "architecture": "KimiLinearForCausalLM", "use_v2_model_runner": True,
                        "num_speculative_tokens": 1, "speculative_method": "mtp", **values})


def state_support_cases():
    """(rule, case, base, edits, expected[(rule, path, message)])."""
    base = json.loads(MM_SCHEDULER.read_text())
    fi_pc = "FlashInfer ReplaySSM does not support prefix caching yet; use --disable-prefix-caching"
    return [
        ("SS001", "revision_0_34_0", base, nemotron(vllm_revision="0.34.0"),
         [("SS001", f"{RC}.vllm_revision", "vllm_revision '0.34.0' is not a revision of the state support table: "
           "'0.33.0' or 'd9cd1fd1fcfc5a08d14ff29ba7439f76ad42d628' (vLLM PR #55688, seed 004)")]),
        ("SS001", "good_revision_of_the_pr", base, nemotron(vllm_revision=PR), []),
        ("SS002", "no_model_runner", base, _settings(use_replayssm=True, architecture="NemotronHForCausalLM"),
         [("SS002", f"{RC}.use_v2_model_runner",
           "use_replayssm requires the resolved use_v2_model_runner (the state support table decides on it)")]),
        ("SS002", "good_full_state_needs_neither", base, _settings(use_replayssm=False), []),
        ("SS003", "backend_rocm", base, nemotron(mamba_backend="rocm"),
         [("SS003", f"{RC}.mamba_backend",
           "mamba_backend 'rocm' is not a MambaBackendEnum value: 'triton', 'flashinfer' or 'cpu'")]),
        ("SS004", "buffer_len_zero", base, nemotron(replayssm_buffer_len=0),
         [("SS004", f"{RC}.replayssm_buffer_len", "replayssm_buffer_len must be at least 1")]),
        ("SS005", "jamba", base, nemotron(architecture="JambaForCausalLM"),
         [("SS005", f"{RC}.architecture", "--use-replayssm is not supported for architecture 'JambaForCausalLM'")]),
        ("SS006", "flashinfer_buffer_17", base, nemotron(mamba_backend="flashinfer", replayssm_buffer_len=17),
         [("SS006", f"{RC}.replayssm_buffer_len", "FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16")]),
        ("SS006", "good_flashinfer_buffer_16", base,
         nemotron(mamba_backend="flashinfer", replayssm_buffer_len=16, mamba_cache_mode="none"), []),
        ("SS007", "recoverssm_stochastic_rounding", base, kimi(mamba_stochastic_rounding=True),
         [("SS007", f"{RC}.mamba_stochastic_rounding",
           "RecoverSSM supports bfloat16/float32 SSM state caches, not --enable-mamba-cache-stochastic-rounding, "
           "which requires an explicit float16 cache")]),
        ("SS008", "recoverssm_prefix_caching_on_v1", base, kimi(use_v2_model_runner=False),
         [("SS008", f"{RC}.use_v2_model_runner", "RecoverSSM with prefix caching requires VLLM_USE_V2_MODEL_RUNNER=1")]),
        ("SS008", "good_recoverssm_prefix_caching_on_v2", base, kimi(), []),
        ("SS008", "good_recoverssm_with_a_kv_connector", base, kimi(is_kv_transfer_instance=True), []),
        ("SS009", "recoverssm_mode_all_at_the_pr", base, kimi(vllm_revision=PR, mamba_cache_mode="all"),
         [("SS009", f"{RC}.mamba_cache_mode",
           "KDA RecoverSSM does not support mamba_cache_mode 'all' (kvproof text: seed 004 (vLLM PR #55688 at d9cd1fd1, "
           "'Support boundaries'; the seed gives no text): RecoverSSM supports none on V1 and none/align on V2)")]),
        ("SS010", "recoverssm_pipeline_parallel", base, kimi(pipeline_parallel_size=2, max_in_flight_tokens=16384),
         [("SS010", f"{RC}.pipeline_parallel_size", "RecoverSSM currently requires pipeline_parallel_size=1")]),
        ("SS011", "recoverssm_on_flashinfer", base, kimi(mamba_backend="flashinfer"),
         [("SS011", f"{RC}.mamba_backend", "RecoverSSM requires --mamba-backend triton")]),
        ("SS012", "flashinfer_mtp_with_prefix_caching", base,
         nemotron(mamba_backend="flashinfer", num_speculative_tokens=1, speculative_method="mtp"),
         [("SS012", f"{RC}.mamba_cache_mode",
           "FlashInfer ReplaySSM speculative decoding does not support prefix caching; use --disable-prefix-caching")]),
        ("SS012", "good_flashinfer_mtp_with_prefix_caching_at_the_pr", base,
         nemotron(vllm_revision=PR, mamba_backend="flashinfer", num_speculative_tokens=1, speculative_method="mtp",
                  mamba_cache_mode="all"), []),
        ("SS013", "flashinfer_eagle_with_prefix_caching_at_the_pr", base,
         nemotron(vllm_revision=PR, mamba_backend="flashinfer", num_speculative_tokens=1, speculative_method="eagle"),
         [("SS013", f"{RC}.speculative_method",
           "FlashInfer ReplaySSM prefix caching with speculative decoding is supported for native MTP only (kvproof text: "
           "seed 004 (vLLM PR #55688 at d9cd1fd1, 'Support boundaries'; the seed gives no text))")]),
        ("SS014", "flashinfer_buffer_below_query_len", base,
         nemotron(mamba_backend="flashinfer", num_speculative_tokens=3, speculative_method="mtp", mamba_cache_mode="none",
                  replayssm_buffer_len=3),
         [("SS014", f"{RC}.replayssm_buffer_len", "FlashInfer ReplaySSM speculative decoding requires "
           "--replayssm-buffer-len >= 1 + num_speculative_tokens (4); got 3")]),
        ("SS014", "good_flashinfer_buffer_equal_to_query_len", base,
         nemotron(mamba_backend="flashinfer", num_speculative_tokens=3, speculative_method="mtp", mamba_cache_mode="none",
                  replayssm_buffer_len=4), []),
        ("SS015", "triton_speculative", base, nemotron(num_speculative_tokens=1, mamba_cache_mode="none"),
         [("SS015", f"{RC}.mamba_backend", "Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer")]),
        ("SS016", "flashinfer_with_prefix_caching", base, nemotron(mamba_backend="flashinfer"),
         [("SS016", f"{RC}.mamba_cache_mode", fi_pc)]),
        ("SS016", "good_flashinfer_with_prefix_caching_at_the_pr", base,
         nemotron(vllm_revision=PR, mamba_backend="flashinfer"), []),
        ("SS017", "cpu_backend", base, nemotron(mamba_backend="cpu"),
         [("SS017", f"{RC}.mamba_backend", "--use-replayssm requires --mamba-backend triton or flashinfer")]),
        ("SS018", "triton_mode_all_at_the_pr", base, nemotron(vllm_revision=PR, mamba_cache_mode="all"),
         [("SS018", f"{RC}.mamba_cache_mode", "Triton ReplaySSM does not support mamba_cache_mode 'all' (kvproof text: "
           "seed 004 (vLLM PR #55688 at d9cd1fd1, 'Support boundaries'; the seed gives no text))")]),
        ("SS019", "triton_on_v2", base, nemotron(use_v2_model_runner=True),
         [("SS019", f"{RC}.use_v2_model_runner",
           "Triton ReplaySSM requires Model Runner V1; use --mamba-backend flashinfer or Model Runner V1")]),
        ("SS019", "good_triton_on_v1_with_prefix_caching", base, nemotron(), []),
        ("SS020", "triton_with_a_kv_connector", base, nemotron(is_kv_transfer_instance=True),
         [("SS020", f"{RC}.is_kv_transfer_instance",
           "--use-replayssm is incompatible with KV connectors (P/D disaggregation, KV cache offload)")]),
    ]
