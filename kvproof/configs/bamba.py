"""Bamba (``BambaForCausalLM``): what vLLM 0.33.0 itself does with such a config, a refusal.

vLLM 0.33.0 no longer has a Bamba model class (``_PREVIOUSLY_SUPPORTED_MODELS``,
vllm/model_executor/models/registry.py:841-880), but an architecture outside its registry first
falls back to the Transformers modeling backend (``inspect_model_cls`` / ``resolve_model_cls``,
registry.py:1367-1418, with ``model_impl`` ``auto``): transformers 5.20.2's ``BambaForCausalLM``
can set its attention implementation, so ``_try_resolve_transformers`` (registry.py:1266-1339)
returns the backend's class and the removal message is never reached. Building that model,
``_create_attention_instances`` (model_executor/models/transformers/base.py:609-640) refuses the
first decoder layer of the pipeline rank whose mixer is not attention (``layer_types``, which
``BambaConfig`` makes ``full_attention`` at ``attn_layer_indices`` and ``linear_attention`` elsewhere,
transformers configuration_bamba.py:46, 97-100). Checked by hand on vLLM 0.33.0 (the conformance
oracle, no real Bamba config at hand): ``ValueError: Layer 0 (linear_attention) does not dispatch
through the Transformers attention interface and vLLM has no other way to handle it.``
"""

from __future__ import annotations

from .common import Layer, Parallel, check_attention_heads, pp_ranges
from .hf import CONFIG_ARCH, CONFIG_FIELD, VLLM_REFUSAL, ConfigError, HFConfig

__all__ = ["ARCHITECTURES"]


def bamba(config: HFConfig, parallel: Parallel) -> list[Layer]:
    num_layers = config.int("num_hidden_layers", minimum=1)
    # VllmConfig checks the heads before any model is built (config/model.py:1557-1564).
    check_attention_heads(config, config.int("num_attention_heads", minimum=1), "num_attention_heads", parallel.tp)
    attention = config.raw("attn_layer_indices", [])
    if type(attention) is not list or not all(type(i) is int for i in attention):
        raise ConfigError(CONFIG_FIELD, config.key_path("attn_layer_indices"), "expected an array of layer indices",
                          config.file)
    for span in pp_ranges(num_layers, min(parallel.pp, num_layers)):
        for i in span:
            if i not in attention:
                raise ConfigError(VLLM_REFUSAL, config.key_path("attn_layer_indices"), (
                    f"Layer {i} (linear_attention) does not dispatch through the Transformers attention "
                    "interface and vLLM has no other way to handle it."), config.file)
    raise ConfigError(CONFIG_ARCH, config.key_path("attn_layer_indices"), (
        "a Bamba config whose every layer is attention runs on vLLM's Transformers modeling backend "
        "(model_executor/models/transformers/), which kvproof does not map"), config.file)


ARCHITECTURES = {"BambaForCausalLM": bamba}
