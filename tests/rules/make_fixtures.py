"""Write the per-rule fixtures under tests/rules/<ID>/ (run: python tests/rules/make_fixtures.py).

Each case is one edit of an accepted example document and the diagnostics a reviewer expects,
written here by hand (never by running the checker): ``<case>.json`` is the edited document and
``<case>.expected.jsonl`` its complete expected report, one diagnostic per line. A ``good_``
case expects no diagnostic. tests/rules/test_rule_fixtures.py replays them all.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
GLM_PROFILE = EXAMPLES / "glm53flash-tp4" / "profile.json"
GLM_WORKER = EXAMPLES / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json"

G = "$.resources.cache_groups"
RM = "$.resources.runtime_memory"


def _set(doc, path, value):
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is DELETE:
        del doc[last]
    else:
        doc[last] = value


DELETE = object()


def _kda_layers(worker, group=0):
    return ", ".join(worker["cache"]["groups"][group]["layer_names"])


def cases():
    """(rule, case, base, edits, expected[(rule, path, message)])."""
    profile = json.loads(GLM_PROFILE.read_text())
    worker = json.loads(GLM_WORKER.read_text())
    rg = ["resources", "cache_groups"]
    rm = ["resources", "runtime_memory"]
    kda0 = _kda_layers(worker)
    state0 = ["cache", "groups", 0, "state"]

    def layer_edits(field, value):
        return [(["cache", "groups", 0, "layer_specs", name, field], value) for name in worker["cache"]["groups"][0]["layer_names"]]

    yield from [
        ("PF001", "zero_count", profile, [(rg + [0, "blocks_per_request"], 0)],
         [("PF001", f"{G}[0].blocks_per_request", "state cache group requires a positive blocks_per_request")]),
        ("PF001", "negative_count", profile, [(rg + [1, "blocks_per_request"], -1)],
         [("PF001", f"{G}[1].blocks_per_request", "state cache group requires a positive blocks_per_request")]),
        ("PF001", "missing_count", profile, [(rg + [5, "blocks_per_request"], DELETE)],
         [("PF001", f"{G}[5].blocks_per_request", "state cache group requires a positive blocks_per_request")]),
        ("PF002", "ring_window", profile, [(rg + [5, "sliding_window"], 4)],
         [("PF002", f"{G}[5].sliding_window", "state cache group cannot have a sliding_window")]),
        ("PF003", "attention_count", profile, [(rg + [4, "blocks_per_request"], 482)],
         [("PF003", f"{G}[4].blocks_per_request", "only state cache groups can have blocks_per_request")]),
        ("PF004", "count_past_u32", profile, [(rg + [0, "blocks_per_request"], 2**32)],
         [("PF004", f"{G}[0].blocks_per_request", "blocks_per_request must not exceed 2**32 - 1")]),
        ("PF004", "good_count_at_u32", profile, [(rg + [0, "blocks_per_request"], 2**32 - 1)], []),
        ("PF005", "attention_checkpoint", profile, [(rg + [4, "prefill_checkpoint_blocks"], 0)],
         [("PF005", f"{G}[4].prefill_checkpoint_blocks", "only state cache groups can have prefill_checkpoint_blocks")]),
        ("PF006", "two_checkpoints", profile, [(rg + [0, "prefill_checkpoint_blocks"], 2)],
         [("PF006", f"{G}[0].prefill_checkpoint_blocks", "prefill_checkpoint_blocks must be 0 or 1")]),
        ("PF007", "zero_alignment", profile, [(rg + [2, "prefill_checkpoint_alignment"], 0)],
         [("PF007", f"{G}[2].prefill_checkpoint_alignment", "prefill_checkpoint_alignment must be positive")]),
        ("PF008", "alignment_without_block", profile,
         [(rg + [3, "prefill_checkpoint_blocks"], 0)],
         [("PF008", f"{G}[3].prefill_checkpoint_alignment", "prefill_checkpoint_alignment requires prefill_checkpoint_blocks of 1")]),
        ("PF008", "good_block_without_alignment", profile, [(rg + [3, "prefill_checkpoint_alignment"], DELETE)], []),
        ("PF009", "zero_page", profile, [(rg + [4, "page_size_bytes"], 0)],
         [("PF009", f"{G}[4].page_size_bytes", "cache group page_size_bytes must be positive")]),
        ("PF010", "negative_block", profile, [(rg + [4, "block_size_tokens"], -2176)],
         [("PF010", f"{G}[4].block_size_tokens", "cache group block_size_tokens must be positive")]),
        ("PF012", "convolution_without_window", profile, [(rg + [4, "kind"], "convolution")],
         [("PF012", f"{G}[4].sliding_window", "convolution cache groups require a sliding_window")]),
        ("PF013", "zero_window", profile, [(rg + [4, "sliding_window"], 0)],
         [("PF013", f"{G}[4].sliding_window", "sliding_window must be positive")]),
        ("PF013", "good_null_window", profile, [(rg + [4, "sliding_window"], None)], []),
        ("PF014", "zero_layers", profile, [(rg + [4, "num_layers"], 0)],
         [("PF014", f"{G}[4].num_layers", "cache group num_layers must be positive")]),
        ("PF015", "mode_all", profile, [(rm + ["mamba_cache_mode"], "all")],
         [("PF015", f"{RM}.mamba_cache_mode", "mamba_cache_mode must be 'none' or 'align' (vLLM 0.33.0 has no other mode)")]),
        ("PF016", "align_without_prefix_caching", profile, [(rm + ["enable_prefix_caching"], False)],
         [("PF016", f"{RM}.mamba_cache_mode", "mamba_cache_mode 'align' requires enable_prefix_caching")]),
        ("PF016", "good_none_without_prefix_caching", profile,
         [(rm + ["enable_prefix_caching"], False), (rm + ["mamba_cache_mode"], "none")], []),
        ("PF017", "zero_hash_block", profile, [(rm + ["hash_block_size_tokens"], 0)],
         [("PF017", f"{RM}.hash_block_size_tokens", "hash_block_size_tokens must be positive")]),
        ("PF018", "zero_kv_bytes", profile, [(rm + ["kv_cache_bytes"], 0)],
         [("PF018", f"{RM}.kv_cache_bytes", "runtime memory requires positive kv_cache_bytes")]),
        ("PF019", "utilization_above_one", profile, [(rm + ["gpu_memory_utilization"], 1.5)],
         [("PF019", f"{RM}.gpu_memory_utilization", "gpu_memory_utilization must be in (0, 1]")]),
        ("PF019", "good_utilization_one", profile, [(rm + ["gpu_memory_utilization"], 1)], []),
        ("PF020", "zero_max_model_len", profile, [(rm + ["max_model_len"], 0)],
         [("PF020", f"{RM}.max_model_len", "runtime memory requires a positive max_model_len")]),
        # CK: worker records (compact JSON; derived from the GLM-5.3-Flash example)
        ("CK001", "missing_count", worker, [(state0 + ["num_prefill_checkpoint_blocks"], DELETE)],
         [("CK001", "$.cache.groups[0].state", f"runtime state cache group lacks prefill checkpoint evidence: {kda0}")]),
        ("CK001", "missing_alignment_key", worker, [(state0 + ["prefill_checkpoint_alignment"], DELETE)],
         [("CK001", "$.cache.groups[0].state", f"runtime state cache group lacks prefill checkpoint evidence: {kda0}")]),
        ("CK002", "two_blocks", worker, [(state0 + ["num_prefill_checkpoint_blocks"], 2)],
         [("CK002", "$.cache.groups[0].state.num_prefill_checkpoint_blocks", f"mamba prefill checkpoint blocks must be 0 or 1: {kda0}")]),
        ("CK002", "bool_count", worker, [(state0 + ["num_prefill_checkpoint_blocks"], True)],
         [("CK002", "$.cache.groups[0].state.num_prefill_checkpoint_blocks", f"mamba prefill checkpoint blocks must be 0 or 1: {kda0}")]),
        ("CK002", "float_count", worker, [(state0 + ["num_prefill_checkpoint_blocks"], 1.0)],
         [("CK002", "$.cache.groups[0].state.num_prefill_checkpoint_blocks", f"mamba prefill checkpoint blocks must be 0 or 1: {kda0}")]),
        ("CK003", "count1_without_alignment", worker,
         [(state0 + ["prefill_checkpoint_alignment"], None)] + layer_edits("prefill_checkpoint_alignment", None),
         [("CK003", "$.cache.groups[0].state", f"mamba prefill checkpoint evidence is inconsistent: {kda0}")]),
        ("CK003", "count0_with_alignment", worker,
         [(state0 + ["num_prefill_checkpoint_blocks"], 0)] + layer_edits("num_prefill_checkpoint_blocks", 0),
         [("CK003", "$.cache.groups[0].state", f"mamba prefill checkpoint evidence is inconsistent: {kda0}")]),
        ("CK003", "layer_disagrees", worker,
         [(["cache", "groups", 0, "layer_specs", worker["cache"]["groups"][0]["layer_names"][3], "prefill_checkpoint_alignment"], 64)],
         [("CK003", "$.cache.groups[0].state", f"mamba prefill checkpoint evidence is inconsistent: {kda0}")]),
        ("CK003", "good_triton_no_checkpoint", worker,
         [(state0 + ["num_prefill_checkpoint_blocks"], 0), (state0 + ["prefill_checkpoint_alignment"], None)]
         + layer_edits("num_prefill_checkpoint_blocks", 0) + layer_edits("prefill_checkpoint_alignment", None), []),
    ]


def main() -> None:
    for rule_dir in HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]"):
        shutil.rmtree(rule_dir)
    for rule, case, base, edits, expected in cases():
        doc = copy.deepcopy(base)
        for path, value in edits:
            _set(doc, path, value)
        out = HERE / rule
        out.mkdir(exist_ok=True)
        compact = base.get("kind") == "worker"
        text = json.dumps(doc, separators=(",", ":")) + "\n" if compact else json.dumps(doc, indent=2) + "\n"
        (out / f"{case}.json").write_text(text)
        (out / f"{case}.expected.jsonl").write_text(
            "".join(json.dumps({"rule": r, "path": p, "message": m}) + "\n" for r, p, m in expected)
        )
    print("fixtures written")


if __name__ == "__main__":
    main()
