"""kvproof simulate on a 100-layer hybrid geometry, against a bare json.loads of the same document.

Run: python bench/bench_simulate.py [--rounds N]

The geometry has 100 layers: 75 Mamba2 layers and 25 full-attention layers (one in four), prefix
caching on (Mamba align mode), the platform's hybrid block-size alignment and kernel-block views,
so every stage of the plan runs (settings, alignment, layout, uniform-page hybrid grouping with
padding, pool, memory check with its estimate skipped, concurrency, block sizes, views).  A second
case plans the GLM-5.3-Flash-like packed example.  Cases are interleaved round by round; the
medians and the ratio to json.loads are printed with the machine's core count.  No target: this is
a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json

from _common import ROOT, interleaved, machine, median_ms, spread

from kvproof.sim import simulate_document


def hybrid_100() -> dict:
    attention = [i for i in range(100) if i % 4 == 3]
    mamba = [i for i in range(100) if i % 4 != 3]
    return {
        "name": "100-layer hybrid: 75 Mamba2 + 25 full attention",
        "layers": [
            {"name": "model.layers.{i}.mixer", "indices": mamba, "spec": "MambaSpec",
             "shapes": [[3, 8448], [128, 64, 128]], "dtypes": ["bfloat16", "bfloat16"],
             "num_prefill_checkpoint_blocks": 1, "prefill_checkpoint_alignment": 1},
            {"name": "model.layers.{i}.self_attn.attn", "indices": attention, "spec": "FullAttentionSpec",
             "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"},
        ],
        "block_size": 16,
        "max_model_len": 131072,
        "available_memory_bytes": 60 * 2**30,
        "enable_prefix_caching": True,
        "platform_alignment": {"num_kv_heads": 8, "head_size": 128, "backend_kernel_block_sizes": [{"MultipleOf": 16}],
                               "mamba_prefill_checkpoint_alignment": 1},
        "views": {"num_blocks": 3, "backends": [{"match": "self_attn", "kernel_block_sizes": [{"MultipleOf": 16}]}]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="rounds (default 100)")
    args = parser.parse_args()

    hybrid_text = json.dumps(hybrid_100())
    glm_text = (ROOT / "examples" / "geometries" / "glm-like-packed.json").read_text()
    for text in (hybrid_text, glm_text):  # warm up; and the plans must be computed, not refused
        assert simulate_document(json.loads(text))["status"] == "ok"

    cases = {
        "json.loads (100-layer hybrid)": lambda: json.loads(hybrid_text),
        "simulate_document (100-layer hybrid)": lambda: simulate_document(json.loads(hybrid_text)),
        "simulate_document (GLM-like packed, 78 layers)": lambda: simulate_document(json.loads(glm_text)),
    }
    samples = interleaved(cases, args.rounds)
    print(machine())
    for name, values in samples.items():
        print(f"{name:<48} {spread(values)}")
    base = median_ms(samples["json.loads (100-layer hybrid)"])
    ratio = median_ms(samples["simulate_document (100-layer hybrid)"]) / base
    print(f"simulate / json.loads (100-layer hybrid): {ratio:,.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
