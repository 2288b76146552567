#!/usr/bin/env python3
"""Write seed 000's scheduler cases as request goldens' geometries (``seed000_*.json`` here).

Seed 000 (aisimulate's mamba_align PR) names its cases without their geometry: "a 24-token prompt
with 8-token pages and a 2-token hash unit"; "18 prompt/granularity combinations at each of three
draft depths"; "the logits cap still applies before the speculative hash-unit drop, so some exactly
aligned prompts still miss the tail". kvproof reads them as vLLM 0.33.0 runs them:

* a hybrid of Mamba2 state layers and full attention, both at block (page) size 8 (align mode: the
  platform's kernel block ``MultipleOf(8)``, a state page that fits 8 attention tokens), prefix
  caching on, ``prefix_match_unit`` the hash unit (``cache_config.prefix_match_unit``, resolved in
  ``resolve_kv_cache_block_sizes``, ``v1/core/kv_cache_utils.py:817-905``);
* granularity = the hash unit, 2, 4 or 8 tokens (8: no partial hash hits); prompts 15, 16, 17,
  23, 24, 25 tokens (both sides of two page boundaries; 16 and 24 exactly aligned): 3 x 6 = 18
  combinations;
* draft depth = ``num_speculative_tokens`` 1, 2, 3 of native MTP (``use_eagle()`` and the block
  drop hold for ``mtp``, ``config/speculative.py:2116-2149``);
* per combination three requests one after another: the first, a resend of the identical prompt
  (capped at ``num_tokens - 1`` for logits) and an extension (the prompt plus 8 tokens): the two
  replay positions vLLM retains (``replay_boundaries``, ``v1/core/kv_cache_coordinator.py:65-85``).

One geometry per (granularity, depth), 9 files, plus ``seed000_tail_24_page8_unit2.json``: the
single request of the seed's before/after example, probed. Run from the repository root:
``python tests/conformance/requests/seed000_cases.py`` (writes the geometries), then
``bash tests/conformance/requests/regenerate.sh tests/conformance/requests/seed000_*.json``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNITS = (2, 4, 8)
DEPTHS = (1, 2, 3)
PROMPTS = (15, 16, 17, 23, 24, 25)
EXTENSION = 8
#: Steps between two requests' arrivals: each earlier request has finished by then.
SPACING = 20

BASE = {
    "layers": [
        {"name": "model.layers.{i}.mixer", "indices": [0, 2], "spec": "MambaSpec",
         "shapes": [[3, 8], [1, 8, 8]], "dtypes": ["bfloat16", "bfloat16"], "mamba_type": "MAMBA2"},
        {"name": "model.layers.{i}.self_attn.attn", "indices": [1, 3], "spec": "FullAttentionSpec",
         "num_kv_heads": 1, "head_size": 8, "dtype": "bfloat16"},
    ],
    "block_size": 8,
    "max_model_len": 256,
    "num_gpu_blocks_override": 400,
    "enable_prefix_caching": True,
    "platform_alignment": {"num_kv_heads": 1, "head_size": 8, "model_dtype": "bfloat16",
                           "backend_kernel_block_sizes": [{"MultipleOf": 8}]},
}


def requests_of() -> list[dict]:
    """First, resend and extension of every prompt, one at a time."""
    out = []
    for p in PROMPTS:
        name = f"p{p}"
        for role, tokens in (("first", p), ("resend", p), ("extend", p + EXTENSION)):
            out.append({"id": f"{name}-{role}", "arrival_step": SPACING * len(out), "prompt_tokens": tokens,
                        "decode_tokens": 2, "shared_prefix": name, "shared_prefix_tokens": p})
    return out


def matrix_geometry(unit: int, depth: int) -> dict:
    doc = copy.deepcopy(BASE)
    doc = {"name": f"seed000_matrix_unit{unit}_depth{depth}: 2 Mamba2 + 2 full attention, 8-token pages, "
                   f"hash unit {unit}, MTP depth {depth}; prompts {', '.join(map(str, PROMPTS))} each first, "
                   f"resent and extended by {EXTENSION} (seed 000's scheduler matrix)", **doc}
    doc["prefix_match_unit"] = unit
    doc["speculative"] = {"method": "mtp", "num_speculative_tokens": depth}
    doc["simulate"] = {"requests": requests_of()}
    return doc


def tail_geometry() -> dict:
    doc = copy.deepcopy(BASE)
    doc = {"name": "seed000_tail_24_page8_unit2: a 24-token prompt, 8-token pages, a 2-token hash unit, MTP depth 1; "
                   "probed again (seed 000's before/after example)", **doc}
    doc["prefix_match_unit"] = 2
    doc["speculative"] = {"method": "mtp", "num_speculative_tokens": 1}
    doc["simulate"] = {"prompt_tokens": 24, "decode_tokens": 2, "prefix_hit_probe": True}
    return doc


def documents() -> dict[str, dict]:
    out = {"seed000_tail_24_page8_unit2.json": tail_geometry()}
    for unit in UNITS:
        for depth in DEPTHS:
            out[f"seed000_matrix_unit{unit}_depth{depth}.json"] = matrix_geometry(unit, depth)
    return out


def main() -> None:
    for name, doc in documents().items():
        (HERE / name).write_text(json.dumps(doc, indent=1) + "\n")
        print(HERE / name)


if __name__ == "__main__":
    main()
