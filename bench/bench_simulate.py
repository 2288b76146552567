"""kvproof simulate on a 100-layer hybrid geometry, against a bare json.loads of the same document.

Run: python bench/bench_simulate.py [--rounds N]

The geometry has 100 layers: 75 Mamba2 layers and 25 full-attention layers (one in four), prefix
caching on (Mamba align mode), the platform's hybrid block-size alignment and kernel-block views,
so every stage of the plan runs (settings, alignment, layout, uniform-page hybrid grouping with
padding, pool, memory check with its estimate skipped, concurrency, block sizes, views).  A second
case plans the GLM-5.3-Flash-like packed example.  Cases are interleaved round by round; the
medians and the ratio to json.loads are printed with the machine's core count.  No target: this is
a measurement, not a test.

vLLM's own planning: when ``.venv-vllm/bin/python`` exists (``scripts/conformance-setup.sh``;
``KVPROOF_ORACLE_PYTHON`` names another interpreter; ``--no-vllm`` skips it), the conformance
oracle (``tests/conformance/oracle.py --jsonl``, vLLM 0.33.0's own functions in the order of
``EngineCore._initialize_kv_caches``) is started once and the same geometry is sent to it every
round, interleaved with the kvproof cases: its median is a round trip (a line of JSON each way
through a pipe, well under a millisecond of it) and the ratio vLLM / kvproof is printed.  The two
answers' pool numbers are compared first, so the bench times the same plan.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess

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
    parser.add_argument("--no-vllm", action="store_true", help="skip vLLM's own planning even if .venv-vllm exists")
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
    oracle = None if args.no_vllm else start_oracle()
    if oracle is not None:
        ours = simulate_document(json.loads(hybrid_text))
        theirs = oracle(hybrid_text)
        keys = ("status", "num_blocks", "bytes_per_block", "max_concurrency", "kv_cache_size_tokens")
        if any(ours.get(k) != theirs.get(k) for k in keys):
            print("vLLM's plan differs:", {k: (ours.get(k), theirs.get(k)) for k in keys})
            return 1
        for _ in range(3):  # warm up
            oracle(hybrid_text)
        cases["vLLM 0.33.0 planning (oracle round trip, 100-layer hybrid)"] = lambda: oracle(hybrid_text)
    samples = interleaved(cases, args.rounds)
    print(machine())
    for name, values in samples.items():
        print(f"{name:<60} {spread(values)}")
    base = median_ms(samples["json.loads (100-layer hybrid)"])
    ours_ms = median_ms(samples["simulate_document (100-layer hybrid)"])
    print(f"simulate / json.loads (100-layer hybrid): {ours_ms / base:,.0f}x")
    if oracle is not None:
        theirs_ms = median_ms(samples["vLLM 0.33.0 planning (oracle round trip, 100-layer hybrid)"])
        print(f"vLLM planning / kvproof simulate (100-layer hybrid): {theirs_ms / ours_ms:,.1f}x")
    else:
        print("vLLM planning: not measured (no .venv-vllm/bin/python; see docs/conformance.md)")
    return 0


def start_oracle():
    """A function sending one geometry (JSON text) to a running oracle and returning its answer;
    None when no vLLM interpreter is installed."""
    python = os.environ.get("KVPROOF_ORACLE_PYTHON") or str(ROOT / ".venv-vllm" / "bin" / "python")
    script = ROOT / "tests" / "conformance" / "oracle.py"
    if not (os.path.exists(python) and script.exists()):
        return None
    proc = subprocess.Popen([python, str(script), "--jsonl"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def ask(text: str) -> dict:
        proc.stdin.write(text.replace("\n", " ") + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the vLLM oracle exited")
        return json.loads(line)

    return ask


if __name__ == "__main__":
    raise SystemExit(main())
