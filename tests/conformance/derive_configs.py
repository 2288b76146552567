#!/usr/bin/env python3
"""Configs derived by code for the architectures no real ``config.json`` in reach covers
(tests/configs/SOURCES.md "Still needed"), written for the conformance suite only; never test data.

    .venv-vllm/bin/python tests/conformance/derive_configs.py OUT_DIR   # OUT_DIR/<name>/config.json

Each is the architecture's own transformers 5.20.2 config class with its defaults
(``to_dict()``: every key the class writes, as ``save_pretrained`` would) plus the one key the
class leaves null, ``architectures``. Kimi-Linear's is written in the checkpoint's schema, which
the same class reads back (models/kimi_linear/configuration_kimi_linear.py:115-136): its layer
kinds and linear attention sizes as ``linear_attn_config`` (``kda_layers`` / ``full_attn_layers``
1-based, ``num_heads``, ``head_dim``, ``short_conv_kernel_size``), and ``mla_use_nope`` true:
transformers' Kimi-Linear attention applies no rotary embedding (modeling_kimi_linear.py), the
only MLA vLLM 0.33.0 builds for it (models/kimi_k3/nvidia/model.py:744). The class documents its
defaults as ``moonshotai/Kimi-Linear-48B-A3B-Instruct``'s (configuration_kimi_linear.py:28-113).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: name -> (transformers config class, architecture).
DERIVED = {
    "derived--Mistral": ("MistralConfig", "MistralForCausalLM"),
    "derived--Qwen2Moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM"),
    "derived--DeepseekV2": ("DeepseekV2Config", "DeepseekV2ForCausalLM"),
    "derived--Gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
    "derived--Gemma3-text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "derived--Gemma3": ("Gemma3Config", "Gemma3ForConditionalGeneration"),
    "derived--Jamba": ("JambaConfig", "JambaForCausalLM"),
    "derived--GraniteMoeHybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM"),
    "derived--FalconH1": ("FalconH1Config", "FalconH1ForCausalLM"),
    "derived--Bamba": ("BambaConfig", "BambaForCausalLM"),
    "derived--Kimi-Linear": ("KimiLinearConfig", "KimiLinearForCausalLM"),
}


def _kimi_linear_checkpoint_schema(tree: dict) -> dict:
    kinds = tree.pop("layer_types")
    tree["linear_attn_config"] = {
        "kda_layers": [i + 1 for i, kind in enumerate(kinds) if kind == "linear_attention"],
        "full_attn_layers": [i + 1 for i, kind in enumerate(kinds) if kind == "full_attention"],
        "num_heads": tree.pop("linear_num_heads"),
        "head_dim": tree.pop("linear_head_dim"),
        "short_conv_kernel_size": tree.pop("linear_conv_kernel_dim"),
    }
    tree["mla_use_nope"] = True
    return tree


SCHEMA = {"derived--Kimi-Linear": _kimi_linear_checkpoint_schema}


def derive(name: str) -> dict:
    import transformers

    config_class, architecture = DERIVED[name]
    tree = getattr(transformers, config_class)().to_dict()
    tree["architectures"] = [architecture]
    return SCHEMA.get(name, lambda t: t)(tree)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for name in DERIVED:
        folder = Path(argv[0]) / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(derive(name), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
