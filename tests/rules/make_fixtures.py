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

from state_support_fixtures import state_support_cases

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
GLM_PROFILE = EXAMPLES / "glm53flash-tp4" / "profile.json"
GLM_WORKER = EXAMPLES / "glm53flash-tp4" / "worker-dp0-tp0-pp0.json"
GLM_SCHEDULER = EXAMPLES / "glm53flash-tp4" / "scheduler-dp0.json"
MM_WORKER = EXAMPLES / "minimax-m27-tp4" / "worker-dp0-tp0-pp0.json"
MM_SCHEDULER = EXAMPLES / "minimax-m27-tp4" / "scheduler-dp0.json"
SWA_SCHEDULER = EXAMPLES / "gemma-like-swa" / "scheduler-dp0.json"
SWA_WORKER = EXAMPLES / "gemma-like-swa" / "worker-dp0-tp0-pp0.json"

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
        # one ring group of 1-byte pages and a pool of 2**32 - 1 of them: the count at the bound
        # still admits one request (CA001)
        ("PF004", "good_count_at_u32", profile, [(rg, lambda g: [dict(g[5], page_size_bytes=1, blocks_per_request=2**32 - 1)]),
                                                 (rm + ["kv_cache_bytes"], 2**32 - 1)], []),
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
        # the MLA+indexer group's own layers fill 13,045,120 bytes of the 13,516,800-byte pool block;
        # the profile's page is the pool block (seed 001)
        ("PF021", "group_page_of_its_layers", profile, [(rg + [4, "page_size_bytes"], 13045120)],
         [("PF021", f"{G}[4].page_size_bytes", "cache groups must share one page_size_bytes (the pool block)")]),
        ("PF021", "good_state_and_attention_groups_share_the_pool_block", profile, [], []),
        ("PF022", "kv_bytes_one_byte_short", profile, [(rm + ["kv_cache_bytes"], 185126092799)],
         [("PF022", f"{RM}.kv_cache_bytes", "kv_cache_bytes must be a whole number of pool blocks")]),
        # 495 pool blocks: what one request at max_model_len needs (CA001 refuses one block)
        ("PF022", "good_495_pool_blocks", profile, [(rm + ["kv_cache_bytes"], 495 * 13516800)], []),
        ("PF023", "grouped_without_groups", profile, [(["resources", "cache_groups"], DELETE)],
         [("PF023", "$.resources.cache_layout", "linear cache requires kv_bytes_per_token only; grouped cache requires cache_groups without a scalar token rate")]),
        ("PF023", "grouped_with_no_group", profile, [(["resources", "cache_groups"], [])],
         [("PF023", "$.resources.cache_layout", "linear cache requires kv_bytes_per_token only; grouped cache requires cache_groups without a scalar token rate")]),
        ("PF023", "grouped_with_a_token_rate", profile, [(["resources", "kv_bytes_per_token"], 1)],
         [("PF023", "$.resources.cache_layout", "linear cache requires kv_bytes_per_token only; grouped cache requires cache_groups without a scalar token rate")]),
        ("PF023", "good_linear", profile, [(["resources", "cache_layout"], "linear"), (["resources", "cache_groups"], DELETE),
                                           (["resources", "kv_bytes_per_token"], 1536)], []),
        ("PF024", "two_groups_of_one_name", profile, [(rg + [3, "name"], "runtime_group_2")],
         [("PF024", f"{G}[3].name", "cache group names must be unique")]),
        ("PF024", "good_unique_names", profile, [(rg + [3, "name"], "runtime_group_9")], []),
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
        # The group's evidence against its (mutually uniform) layer specs; one layer off is SC009's.
        ("CK003", "state_disagrees_with_layers", worker, [(state0 + ["prefill_checkpoint_alignment"], 64)],
         [("CK003", "$.cache.groups[0].state", f"mamba prefill checkpoint evidence is inconsistent: {kda0}")]),
        ("CK003", "good_triton_no_checkpoint", worker,
         [(state0 + ["num_prefill_checkpoint_blocks"], 0), (state0 + ["prefill_checkpoint_alignment"], None)]
         + layer_edits("num_prefill_checkpoint_blocks", 0) + layer_edits("prefill_checkpoint_alignment", None), []),
    ]
    yield from record_cases()
    yield from state_support_cases()


def _edited(base, edits):
    doc = copy.deepcopy(base)
    for path, value in edits:
        if callable(value) and not isinstance(value, type):
            *parents, last = path
            target = doc
            for key in parents:
                target = target[key]
            target[last] = value(target[last])
        else:
            _set(doc, path, value)
    return doc


def _write_doc(path: Path, doc) -> None:
    compact = doc.get("kind") == "worker"
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n" if compact else json.dumps(doc, indent=2) + "\n")


def main() -> None:
    for rule_dir in HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]"):
        shutil.rmtree(rule_dir)
    for rule, case, base, edits, expected in cases():
        out = HERE / rule
        out.mkdir(exist_ok=True)
        _write_doc(out / f"{case}.json", _edited(base, edits))
        (out / f"{case}.expected.jsonl").write_text(
            "".join(json.dumps({"rule": r, "path": p, "message": m}) + "\n" for r, p, m in expected)
        )
    for rule, case, files, probe, expected in set_cases():
        out = HERE / rule / case
        out.mkdir(parents=True)
        for name, (base, edits) in files.items():
            _write_doc(out / name, _edited(base, edits))
        for name, (base, edits) in probe.items():
            (out / "probe").mkdir(exist_ok=True)
            _write_doc(out / "probe" / name, _edited(base, edits))
        (HERE / rule / f"{case}.expected.jsonl").write_text(
            "".join(json.dumps({"file": f, "rule": r, "path": p, "message": m}) + "\n" for f, r, p, m in expected)
        )
    print("fixtures written")



# ---------------------------------------------------------------------------------------------
# Record rules: single documents (cases) and record sets with an optional accepted probe (set_cases)

KDA0 = "model.layers.0.linear_attn"
IDX3 = "model.layers.3.self_attn.indexer.k_cache"
MLA3 = "model.layers.3.self_attn.attn"
RING3 = "model.layers.3.self_attn.indexer.tail_cache"
MM0 = "model.layers.0.self_attn.attn"


def lt(name, index=None):
    """The JSON path of a layer's view list (or one view)."""
    path = f'$.cache.layer_tensors["{name}"]'
    return path if index is None else f"{path}[{index}]"


def record_cases():
    worker = json.loads(GLM_WORKER.read_text())
    scheduler = json.loads(GLM_SCHEDULER.read_text())
    mm_worker = json.loads(MM_WORKER.read_text())
    mm_scheduler = json.loads(MM_SCHEDULER.read_text())
    swa_scheduler = json.loads(SWA_SCHEDULER.read_text())
    swa_worker_doc = json.loads(SWA_WORKER.read_text())
    gl = worker["cache"]["groups"]
    ring_layers = gl[5]["layer_names"]
    kda0_layers = ", ".join(gl[0]["layer_names"])
    sched = "prefill scheduler dp0"
    out = []
    for version in ["0.31.0", "0.32.0", "0.33.1", "0.33.0.post1", "0.33", "0.34.0"]:
        out.append(("VG001", f"version_{version.replace('.', '_')}", scheduler, [(["runtime", "version"], version)],
                    [("VG001", "$.runtime.version", f"hybrid cache evidence requires vLLM 0.33.0; the record names vLLM {version}")]))
    out += [
        ("VG001", "worker_version_0_32_0", worker, [(["runtime", "version"], "0.32.0")],
         [("VG001", "$.runtime.version", "hybrid cache evidence requires vLLM 0.33.0; the record names vLLM 0.32.0")]),
        ("VG001", "good_plain_record_of_0_32_0", mm_scheduler, [(["runtime", "version"], "0.32.0")], []),
        ("SC001", "rswa_spec", scheduler, [(["cache", "groups", 4, "spec_type"], "RSWASpec"),
                                           (["cache", "groups", 4, "spec", "spec_type"], "RSWASpec")],
         [("SC001", "$.cache.groups[4].spec_type", "unsupported runtime cache spec: RSWASpec"),
          ("SC001", "$.cache.groups[4].spec.spec_type", "unsupported runtime cache spec: RSWASpec")]),
        ("SC001", "hisparse_placement", scheduler, [(["cache", "groups", 4, "spec", "placement"], "hisparse_host")],
         [("SC001", "$.cache.groups[4].spec.spec_type", "unsupported runtime cache spec: MLAAttentionSpec")]),
        ("SC001", "unknown_layer_spec", worker, [(["cache", "groups", 5, "layer_specs", RING3, "spec_type"], "KpoolTailSpec")],
         [("SC001", f'$.cache.groups[5].layer_specs["{RING3}"].spec_type', "unsupported runtime cache spec: KpoolTailSpec")]),
        ("SC007", "layer_spec_under_another_name", worker,
         [(["cache", "groups", 5, "layer_specs"], lambda specs: {("model.layers.99.tail" if k == RING3 else k): v
                                                                  for k, v in specs.items()})],
         [("SC007", "$.cache.groups[5].layer_specs", f"runtime cache group layer specs do not match its layers: {', '.join(ring_layers)}")]),
        ("SC007", "one_group_without_layer_specs", swa_worker_doc, [(["cache", "groups", 1, "layer_specs"], DELETE)],
         [("SC007", "$.cache.groups[1].layer_specs", "runtime cache group layer specs do not match its layers: "
           + ", ".join(swa_worker_doc["cache"]["groups"][1]["layer_names"]))]),
        ("SC002", "attention_layer_in_ring_group", worker,
         [(["cache", "groups", 5, "layer_specs", ring_layers[2], "spec_type"], "FullAttentionSpec")],
         [("SC002", "$.cache.groups[5].layer_specs", f"runtime cache group mixes cache kinds: {', '.join(ring_layers)}")]),
        ("SC008", "indexer_block_size_differs", worker, [(["cache", "groups", 4, "layer_specs", IDX3, "block_size"], 1088)],
         [("SC008", "$.cache.groups[4].block_size_tokens",
           "runtime cache group block size contradicts its layer specs: " + ", ".join(gl[4]["layer_names"])),
          # 1088 tokens hold 272 indexer states of 132 bytes, not the 71,808-byte page
          ("SC013", f'$.cache.groups[4].layer_specs["{IDX3}"].page_size_bytes', f"layer spec page size contradicts its fields: {IDX3}"),
          ("VC001", lt(IDX3, 0) + ".kernel_block_size_tokens", f"layer view kernel block contradicts its cache spec: {IDX3}")]),
        ("SC008", "swa_group_block_size_differs", swa_worker_doc, [(["cache", "groups", 1, "block_size_tokens"], 32)],
         [("SC008", "$.cache.groups[1].block_size_tokens", "runtime cache group block size contradicts its layer specs: "
           + ", ".join(swa_worker_doc["cache"]["groups"][1]["layer_names"]))]),
        # Mamba layers are uniform only with one checkpoint alignment (kv_cache_interface.py:1155-1166);
        # the group's evidence then disagrees with that layer too.
        # the ring group's 4-token block differs from the other groups' 2176: each group has its own
        ("SC008", "good_ring_group_of_its_own_block_size", worker, [], []),
        ("SC009", "kda_layer_checkpoint_alignment_differs", worker,
         [(["cache", "groups", 0, "layer_specs", gl[0]["layer_names"][3], "prefill_checkpoint_alignment"], 64)],
         [("SC009", "$.cache.groups[0].layer_specs", f"runtime cache group layer specs are not of one uniform type: {kda0_layers}"),
          ("CK003", "$.cache.groups[0].state", f"mamba prefill checkpoint evidence is inconsistent: {kda0_layers}")]),
        ("SC009", "swa_layer_window_differs", swa_worker_doc,
         [(["cache", "groups", 1, "layer_specs", swa_worker_doc["cache"]["groups"][1]["layer_names"][2], "sliding_window"], 1023)],
         [("SC009", "$.cache.groups[1].layer_specs", "runtime cache group layer specs are not of one uniform type: "
           + ", ".join(swa_worker_doc["cache"]["groups"][1]["layer_names"]))]),
        ("SC009", "kda_layer_called_ring", worker,
         [(["cache", "groups", 0, "layer_specs", gl[0]["layer_names"][8], "spec_type"], "CircularBufferSpec")],
         [("SC009", "$.cache.groups[0].layer_specs", f"runtime cache group layer specs are not of one uniform type: {kda0_layers}")]),
        ("SC009", "good_mla_and_indexer_are_full_attention", worker, [], []),
        ("SC010", "good_uniform_page_is_the_sum_of_mixed_pages", worker, [], []),
        ("SC010", "uniform_page_not_the_sum", worker, [(["cache", "groups", 0, "page_size_bytes"], 10027007)],
         [("SC010", "$.cache.groups[0].page_size_bytes", f"runtime cache group page size contradicts its layer specs: {kda0_layers}")]),
        ("SC010", "merged_group_of_another_class", swa_worker_doc, [(["cache", "groups", 0, "spec_type"], "ChunkedLocalAttentionSpec")],
         [("SC010", "$.cache.groups[0].page_size_bytes", "runtime cache group page size contradicts its layer specs: "
           + ", ".join(swa_worker_doc["cache"]["groups"][0]["layer_names"]))]),
        ("SC011", "mla_group_without_spec", scheduler, [(["cache", "groups", 4, "spec"], DELETE)],
         [("SC011", "$.cache.groups[4].spec",
           "scheduler cache group lacks the spec the other groups state: " + ", ".join(gl[4]["layer_names"]))]),
        ("SC011", "good_plain_scheduler_without_specs", mm_scheduler, [], []),
        ("SC012", "good_ring_states_zero_speculative_blocks", worker,
         [(["cache", "groups", 5, "state", "num_speculative_blocks"], 0)], []),
        ("SC012", "kda_state_states_a_speculative_block", worker, [(["cache", "groups", 0, "state", "num_speculative_blocks"], 1)],
         [("SC012", "$.cache.groups[0].state.num_speculative_blocks",
           f"runtime state cache group speculative blocks contradict its cache spec: {kda0_layers}")]),
        ("SC012", "ring_state_states_a_speculative_block", worker, [(["cache", "groups", 5, "state", "num_speculative_blocks"], 1)],
         [("SC012", "$.cache.groups[5].state.num_speculative_blocks",
           f"runtime state cache group speculative blocks contradict its cache spec: {', '.join(ring_layers)}")]),
        ("SC013", "good_mla_padded_to_its_own_page", worker,
         [(["cache", "groups", 4, "layer_specs", MLA3, "page_size_padded"], 1114112)], []),
        # 1 head x 2176 states x 511 bytes is not the 1,114,112-byte MLA page
        ("SC013", "mla_head_size_511", worker, [(["cache", "groups", 4, "layer_specs", MLA3, "head_size"], 511)],
         [("SC013", f'$.cache.groups[4].layer_specs["{MLA3}"].page_size_bytes', f"layer spec page size contradicts its fields: {MLA3}")]),
        # a padded page must be the page, and never below the state it pads (1 x 2176 x 512 bytes)
        ("SC013", "mla_padded_below_its_state", worker,
         [(["cache", "groups", 4, "layer_specs", MLA3, "page_size_padded"], 1048576)],
         [("SC013", f'$.cache.groups[4].layer_specs["{MLA3}"].page_size_bytes', f"layer spec page size contradicts its fields: {MLA3}")]),
        ("SC013", "ring_of_three_heads", worker, [(["cache", "groups", 5, "layer_specs", RING3, "num_kv_heads"], 3)],
         [("SC013", f'$.cache.groups[5].layer_specs["{RING3}"].page_size_bytes', f"layer spec page size contradicts its fields: {RING3}")]),
        ("SC013", "scheduler_copy_of_the_indexer", scheduler, [(["cache", "groups", 4, "spec", "tokens_per_state"], 2)],
         [("SC013", "$.cache.groups[4].spec.page_size_bytes",
           "layer spec page size contradicts its fields: " + ", ".join(gl[4]["layer_names"]))]),
        ("SC003", "kda_group_called_attention", worker, [(["cache", "groups", 0, "kind"], "attention")],
         [("SC003", "$.cache.groups[0].kind", f"runtime cache group kind contradicts its cache specs: {kda0_layers}")]),
        ("SC003", "plain_group_called_state", mm_worker, [(["cache", "groups", 0, "kind"], "state")],
         [("SC003", "$.cache.groups[0].kind",
           "runtime cache group kind contradicts its cache specs: " + ", ".join(mm_worker["cache"]["groups"][0]["layer_names"]))]),
        ("SC004", "kda_two_blocks", worker, [(["cache", "groups", 0, "state", "blocks_per_request"], 2)],
         [("SC004", "$.cache.groups[0].state",
           f"runtime state cache group blocks_per_request contradicts its cache spec: {kda0_layers}")]),
        ("SC004", "ring_without_state", worker, [(["cache", "groups", 5, "state"], DELETE)],
         [("SC004", "$.cache.groups[5].state",
           f"runtime state cache group blocks_per_request contradicts its cache spec: {', '.join(ring_layers)}")]),
        ("PC001", "no_evidence", scheduler, [(["prefix_caching"], DELETE)],
         [("PC001", "$.prefix_caching", "runtime observation requires complete prefix-caching evidence")]),
        ("PC001", "no_hash_block_key", scheduler, [(["prefix_caching", "hash_block_size"], DELETE)],
         [("PC001", "$.prefix_caching", "runtime observation requires complete prefix-caching evidence")]),
        ("PC002", "mode_all", scheduler, [(["cache", "mamba_cache_mode"], "all")],
         [("PC002", "$.cache.mamba_cache_mode", "mamba cache mode must be 'none' or 'align' (vLLM 0.33.0 has no other mode)")]),
        # a model without Mamba layers: CacheConfig's default mode 'none', the resolved mode unstated
        ("PC010", "good_mode_none_without_mamba", swa_scheduler, [(["cache", "mamba_cache_mode"], "none")], []),
        ("PC010", "scheduler_cache_mode_none", scheduler, [(["cache", "mamba_cache_mode"], "none")],
         [("PC010", "$.cache.mamba_cache_mode", "mamba cache mode evidence contradicts the resolved mamba_cache_mode 'align'")]),
        ("PC010", "state_evidence_mode_none", worker, [(["cache", "groups", 0, "state", "mamba_cache_mode"], "none")],
         [("PC010", "$.cache.groups[0].state.mamba_cache_mode",
           "mamba cache mode evidence contradicts the resolved mamba_cache_mode 'align'")]),
        ("SC009", "kda_layer_mode_none", worker,
         [(["cache", "groups", 0, "layer_specs", gl[0]["layer_names"][1], "mamba_cache_mode"], "none")],
         [("SC009", "$.cache.groups[0].layer_specs", f"runtime cache group layer specs are not of one uniform type: {kda0_layers}"),
          ("PC010", f'$.cache.groups[0].layer_specs["{gl[0]["layer_names"][1]}"].mamba_cache_mode',
           "mamba cache mode evidence contradicts the resolved mamba_cache_mode 'align'")]),
        ("PC003", "align_without_prefix_caching", scheduler,
         [(["resolved_config", "enable_prefix_caching"], False), (["prefix_caching", "enable_prefix_caching"], False)],
         [("PC003", "$.resolved_config.mamba_cache_mode", "mamba cache mode 'align' requires prefix caching")]),
        ("PC004", "zero_hash_block", scheduler, [(["prefix_caching", "hash_block_size"], 0)],
         [("PC004", "$.prefix_caching.hash_block_size", "hash block size must be positive")]),
        ("PC005", "unit_not_resolved", scheduler, [(["prefix_caching", "prefix_match_unit"], 16)],
         [("PC005", "$.prefix_caching", "runtime prefix-caching evidence contradicts the resolved cache settings")]),
        ("PC006", "hash_block_differs", scheduler, [(["prefix_caching", "hash_block_size"], 1088)],
         [("PC006", "$.prefix_caching", "runtime prefix-caching evidence contradicts the scheduler block sizes")]),
        ("PC007", "scheduler_block_not_lcm", scheduler,
         [(["cache", "scheduler_block_size"], 4352), (["prefix_caching", "scheduler_block_size"], 4352)],
         [("PC007", "$.cache.scheduler_block_size", "scheduler block sizes contradict its cache groups")]),
        ("PC007", "single_group_prefix_match_unit", mm_scheduler,
         [(["resolved_config", "prefix_match_unit"], 8), (["prefix_caching", "prefix_match_unit"], 8)],
         [("PC007", "$.cache.scheduler_block_size", "scheduler block sizes contradict its cache groups")]),
        ("PC007", "good_single_group_unit_equal_to_block", mm_scheduler,
         [(["resolved_config", "prefix_match_unit"], 16), (["prefix_caching", "prefix_match_unit"], 16)], []),
        ("VC001", "kernel_block_not_divisor", worker, [(["cache", "layer_tensors", IDX3, 0, "kernel_block_size_tokens"], 100)],
         [("VC001", lt(IDX3, 0) + ".kernel_block_size_tokens", f"layer view kernel block contradicts its cache spec: {IDX3}")]),
        ("VC002", "negative_attention_group_stride", worker, [(["cache", "attention_groups", 4, "kernel_block_stride"], -3200)],
         [("VC002", "$.cache.attention_groups[4].kernel_block_stride",
           "kernel block stride must not be negative: " + ", ".join(worker["cache"]["attention_groups"][4]["layer_names"]))]
         + [("VC005", lt(name, 0), f"layer view kernel blocks contradict its attention group: {name}")
            for name in worker["cache"]["attention_groups"][4]["layer_names"]]),
        # the MLA layers and the indexer layers of one cache group in two attention groups
        ("VC008", "good_two_attention_groups_of_one_cache_group", worker, [], []),
        ("VC008", "attention_group_listed_twice", worker, [(["cache", "attention_groups"], lambda g: g + [g[0]])],
         [("VC008", f'$.cache.attention_groups[{len(worker["cache"]["attention_groups"])}].layer_names',
           "layers are bound by more than one attention group: " + ", ".join(sorted(worker["cache"]["attention_groups"][0]["layer_names"])))]),
        ("VC008", "layer_listed_twice", mm_worker,
         [(["cache", "attention_groups", 0, "layer_names"], lambda names: names + [names[0]])],
         [("VC008", "$.cache.attention_groups[0].layer_names",
           "layers are bound by more than one attention group: " + mm_worker["cache"]["attention_groups"][0]["layer_names"][0])]),
        ("VC009", "good_ring_kernel_block_is_its_block", worker, [], []),
        ("VC009", "ring_kernel_block_split", worker, [(["cache", "model_runner", "kernel_block_sizes", 5], 2)],
         [("VC009", "$.cache.model_runner.kernel_block_sizes", "model runner kernel block sizes contradict the cache groups")]),
        ("VC009", "one_kernel_block_size_short", worker, [(["cache", "model_runner", "kernel_block_sizes"], lambda k: k[:-1])],
         [("VC009", "$.cache.model_runner.kernel_block_sizes", "model runner kernel block sizes contradict the cache groups")]),
        # BLHNC packs the MLA/indexer pages block-outermost: the group is never split group-wide
        # (the indexer's 128-token kernel is its attention group's bind-time split).
        ("VC009", "packed_group_split", worker, [(["cache", "model_runner", "kernel_block_sizes", 4], 128)],
         [("VC009", "$.cache.model_runner.kernel_block_sizes", "model runner kernel block sizes contradict the cache groups")]),
        ("VC003", "one_kernel_block_short", worker, [(["cache", "layer_tensors", IDX3, 0, "shape", 0], 43827216)],
         [("VC003", lt(IDX3, 0) + ".shape", "kernel tensor block coverage contradicts pool block geometry")]),
        ("VC004", "ring_view_half_stride", worker, [(["cache", "layer_tensors", RING3, 0, "stride_bytes", 0], 6758400)],
         [("VC004", lt(RING3, 0) + ".stride_bytes", f"layer view block stride contradicts its tensor allocation: {RING3}")]),
        ("VC005", "ring_attention_group_kernel", worker, [(["cache", "attention_groups", 6, "kernel_block_size"], 2)],
         [("VC005", lt(name, 0), f"layer view kernel blocks contradict its attention group: {name}") for name in ring_layers]),
        ("VC006", "kda_ssm_shape", worker, [(["cache", "layer_tensors", KDA0, 3, "shape", 3], 64)],
         [("VC006", lt(KDA0), f"mamba layer views contradict its state shapes: {KDA0}")]),
        ("BO001", "tensor_size_differs", worker, [(["cache", "tensor_allocations", 0, "size"], lambda v: v - 1)],
         [("BO001", "$.cache.tensor_allocations[0]", "KV cache tensors must share one backing allocation.")]),
        ("BO002", "ring_layer_unallocated", worker, [(["cache", "tensor_allocations", 6, "layers"], lambda v: v[:-1])],
         [("BO002", lt(ring_layers[-1]), f"layer placement is missing, duplicated or unknown: {ring_layers[-1]}")]),
        ("BO003", "page_above_block_stride", mm_worker,
         [(["cache", "tensor_allocations", 0, "block_stride"], 8192)]
         + [(["cache", "layer_tensors", name, 0, "stride_bytes", 0], 8192) for name in mm_worker["cache"]["tensor_allocations"][0]["layers"]],
         [("BO003", "$.cache.tensor_allocations[0].block_stride",
           "tensor allocation page exceeds its block stride: " + ", ".join(mm_worker["cache"]["tensor_allocations"][0]["layers"]))]),
        ("BO004", "storage_short_of_the_last_mla_page", worker,
         [(["cache", "storages", 0, "size_bytes"], lambda v: v - 471_681)]
         + [(["cache", "tensor_allocations", i, "size"], lambda v: v - 471_681) for i in range(7)],
         [("BO004", "$.cache.tensor_allocations[5]",
           "tensor allocation region exceeds its backing storage: " + ", ".join(worker["cache"]["tensor_allocations"][5]["layers"]))]),
    ]
    stride = 13516800 - 2048
    ring_tensor = ", ".join(worker["cache"]["tensor_allocations"][6]["layers"])
    out.append(("BO005", "ring_tensor_other_stride", worker,
                [(["cache", "tensor_allocations", 6, "block_stride"], stride)]
                + [(["cache", "layer_tensors", name, 0, "stride_bytes", 0], stride) for name in ring_layers],
                [("BO005", f"$.cache.tensor_allocations[{i}].block_stride",
                  "intersecting tensor allocations have different block strides: "
                  + ", ".join(worker["cache"]["tensor_allocations"][i]["layers"]) + f" and {ring_tensor}") for i in range(6)]))
    # The MLA tensor moved to byte 0 of the block: MLA layer 3's page now covers every indexer
    # page of its own group at the same block IDs (the views moved with it).
    mlas = worker["cache"]["tensor_allocations"][5]["layers"]
    indexers = worker["cache"]["tensor_allocations"][4]["layers"]
    moved = [(["cache", "tensor_allocations", 5, "offset"], 0)]
    moved += [(["cache", "layer_tensors", name, 0, "storage_offset_bytes"], i * 1_114_112) for i, name in enumerate(mlas)]
    clash = "overlap, but only the same block of different groups may share bytes"
    out.append(("BO006", "mla_pages_over_indexer_pages", worker, moved,
                [("BO006", "$.cache.tensor_allocations[4]", f"pages of {indexers[0]} and {mlas[0]} {clash}")]
                + [("BO006", "$.cache.tensor_allocations[5]", f"pages of {mlas[0]} and {name} {clash}") for name in indexers[1:]]))
    swa_worker = json.loads(SWA_WORKER.read_text())
    out += [
        ("BO010", "whole_pages_called_lhbnc", swa_worker, [(["cache", "kv_cache_layout"], "LHBNC")],
         [("BO010", f"$.cache.tensor_allocations[{i}]", "tensor strides contradict the KV cache layout LHBNC: "
           + ", ".join(t["layers"])) for i, t in enumerate(swa_worker["cache"]["tensor_allocations"])]),
        ("BO010", "layer_outer_tensor_called_blhnc", mm_worker, [(["cache", "kv_cache_layout"], "BLHNC")],
         [("BO010", "$.cache.tensor_allocations[0]", "tensor strides contradict the KV cache layout BLHNC: "
           + ", ".join(mm_worker["cache"]["tensor_allocations"][0]["layers"]))]),
        ("BO007", "ssm_dimensions_overlap", worker, [(["cache", "layer_tensors", KDA0, 3, "stride_bytes"], [13516800, 65536, 512, 2])],
         [("BO007", lt(KDA0, 3), f"layer view dimensions overlap: {KDA0}")]),
        ("BO008", "mla_view_past_page", worker, [(["cache", "layer_tensors", MLA3, 0, "storage_offset_bytes"], lambda v: v + 512)],
         [("BO008", lt(MLA3, 0) + ".storage_offset_bytes", f"layer view exceeds its page: {MLA3}")]),
        ("BO009", "conv_views_overlap", worker, [(["cache", "layer_tensors", KDA0, 1, "storage_offset_bytes"], lambda v: v - 12288)],
         [("BO009", lt(KDA0), f"views of one layer overlap: {KDA0}")]),
        ("SU001", "zero", scheduler, [(["cache", "kv_cache_max_concurrency"], 0)],
         [("SU001", "$.cache.kv_cache_max_concurrency", f"{sched} lacks a positive kv_cache_max_concurrency")]),
        ("SU001", "bool", scheduler, [(["cache", "kv_cache_max_concurrency"], True)],
         [("SU001", "$.cache.kv_cache_max_concurrency", f"{sched} lacks a positive kv_cache_max_concurrency")]),
        ("SU001", "negative", scheduler, [(["cache", "kv_cache_max_concurrency"], -27.67070707070707)],
         [("SU001", "$.cache.kv_cache_max_concurrency", f"{sched} lacks a positive kv_cache_max_concurrency")]),
        ("SU001", "missing", scheduler, [(["cache", "kv_cache_max_concurrency"], DELETE)],
         [("SU001", "$.cache.kv_cache_max_concurrency", f"{sched} lacks a positive kv_cache_max_concurrency")]),
        ("SU002", "concurrency_of_0_31_0", scheduler,
         [(["cache", "kv_cache_max_concurrency"], 13697 / 491), (["cache", "kv_cache_size_tokens"], int(13697 / 491 * 1048576))],
         [("SU002", "$.cache.kv_cache_max_concurrency",
           f"{sched} records kv_cache_max_concurrency {13697 / 491!r}, which gives 491 blocks per request, but its cache groups reserve 495")]),
        # A sliding-window layout (which seed 001's importer skipped): the window costs
        # cdiv(min(W - 1 + in-flight tokens, L), bs) + 1 = 1,089 blocks per SWA group with async
        # scheduling (2 x 8,192 tokens in flight), not the 65 of the window alone.
        ("SU002", "sliding_window_without_in_flight_tokens", swa_scheduler,
         [(["cache", "kv_cache_max_concurrency"], 40960 / 2243), (["cache", "kv_cache_size_tokens"], int(40960 / 2243 * 32768))],
         [("SU002", "$.cache.kv_cache_max_concurrency",
           f"scheduler dp0 records kv_cache_max_concurrency {40960 / 2243!r}, which gives 2243 blocks per request, "
           "but its cache groups reserve 5315")]),
        ("SU003", "size_tokens_off_by_one", scheduler, [(["cache", "kv_cache_size_tokens"], 29014840)],
         [("SU003", "$.cache.kv_cache_size_tokens",
           f"{sched} records kv_cache_size_tokens 29014840, but int(kv_cache_max_concurrency * max_model_len) is 29014839")]),
        # 495 blocks per request need 496 with the null block: vLLM refuses to start with 495
        # (kv_cache_planning.py:1533-1558), however consistent the capacity figures are.
        ("SU005", "pool_of_exactly_one_request", scheduler,
         [(["cache", "num_blocks"], 495), (["cache", "kv_cache_max_concurrency"], 1.0),
          (["cache", "kv_cache_size_tokens"], 1048576)],
         [("SU005", "$.cache.num_blocks",
           f"{sched} has 495 blocks, but one request at max_model_len needs 495 blocks besides the null block")]),
        # max_concurrent_batches is 1 without async scheduling at PP 1 (config/vllm.py:587-609).
        ("SU007", "in_flight_of_two_batches_without_async", scheduler, [(["resolved_config", "max_in_flight_tokens"], 32768)],
         [("SU007", "$.resolved_config.max_in_flight_tokens",
           f"{sched} records max_in_flight_tokens 32768, but its batch settings give 16384")]),
        ("SU007", "in_flight_off_by_one_either_mode", scheduler,
         [(["resolved_config", "max_in_flight_tokens"], 16383), (["resolved_config", "async_scheduling"], DELETE)],
         [("SU007", "$.resolved_config.max_in_flight_tokens",
           f"{sched} records max_in_flight_tokens 16383, but its batch settings give 16384 or 32768")]),
        ("SU007", "good_two_batches_when_async_is_not_recorded", scheduler,
         [(["resolved_config", "max_in_flight_tokens"], 32768), (["resolved_config", "async_scheduling"], DELETE)], []),
        ("SU005", "good_pool_of_one_request_and_the_null_block", scheduler,
         [(["cache", "num_blocks"], 496), (["cache", "kv_cache_max_concurrency"], 496 / 495),
          (["cache", "kv_cache_size_tokens"], int(496 / 495 * 1048576))], []),
    ]
    return out


def set_cases():
    """(rule, case, {file: (base, edits)}, {probe file: (base, edits)}, expected[(file, rule, path, message)])."""
    worker = json.loads(MM_WORKER.read_text())
    scheduler = json.loads(MM_SCHEDULER.read_text())
    for record in (worker, scheduler):  # one worker is a whole record set at TP 1 (RS005)
        record["resolved_config"]["tensor_parallel_size"] = 1
    sched = "prefill scheduler dp0"
    names = worker["cache"]["groups"][0]["layer_names"]
    decode = [(["phase"], "decode")]
    return [
        ("SC005", "scheduler_with_two_groups", {"worker.json": (worker, []),
                                                "scheduler.json": (scheduler, [(["cache", "groups"], lambda g: g + g)])}, {},
         [("scheduler.json", "SC005", "$.cache.groups", "worker and scheduler cache group counts disagree"),
          ("scheduler.json", "SU002", "$.cache.kv_cache_max_concurrency",
           f"{sched} records kv_cache_max_concurrency 397.203125, which gives 512 blocks per request, but its cache groups reserve 1024")]),
        ("SC006", "scheduler_page_differs", {"worker.json": (worker, []),
                                            "scheduler.json": (scheduler, [(["cache", "groups", 0, "page_size_bytes"], 32768)])}, {},
         [("scheduler.json", "SC006", "$.cache.groups[0]",
           f"scheduler cache group differs from the worker's first layer spec: {', '.join(names)}")]),
        ("PC006", "worker_hash_block_differs", {"worker.json": (worker, [(["prefix_caching", "hash_block_size"], 32)]),
                                                "scheduler.json": (scheduler, [])}, {},
         [("worker.json", "PC006", "$.prefix_caching", "runtime prefix-caching evidence contradicts the scheduler block sizes")]),
        ("SU004", "scheduler_has_one_more_block", {"worker.json": (worker, []), "scheduler.json": (scheduler, [
            (["cache", "num_blocks"], 203369), (["cache", "kv_cache_max_concurrency"], 203369 / 512),
            (["cache", "kv_cache_size_tokens"], int(203369 / 512 * 8192))])}, {},
         [("scheduler.json", "SU004", "$.cache.num_blocks", f"{sched} and prefill worker dp0 tp0 pp0 disagree on num_blocks")]),
        # One VllmConfig per engine: a worker that resolved another max_model_len (or any shared
        # setting) was not started by this scheduler's engine.
        ("SU006", "worker_max_model_len_differs", {"worker.json": (worker, [(["resolved_config", "max_model_len"], 8191)]),
                                                   "scheduler.json": (scheduler, [])}, {},
         [("worker.json", "SU006", "$.resolved_config.max_model_len",
           f"prefill worker dp0 tp0 pp0 resolved max_model_len differently from {sched}")]),
        ("SU006", "worker_lacks_async_scheduling", {"worker.json": (worker, [(["resolved_config", "async_scheduling"], DELETE)]),
                                                    "scheduler.json": (scheduler, [])}, {},
         [("worker.json", "SU006", "$.resolved_config.async_scheduling",
           f"prefill worker dp0 tp0 pp0 resolved async_scheduling differently from {sched}")]),
        # The support table's settings are the one VllmConfig's too: a worker that resolved another model
        # runner (or Mamba backend) was validated by another engine's validate_mamba_cached_kernel.
        ("SU006", "worker_model_runner_differs", {
            "worker.json": (worker, [(["resolved_config", "use_v2_model_runner"], True)]),
            "scheduler.json": (scheduler, [(["resolved_config", "use_v2_model_runner"], False)])}, {},
         [("worker.json", "SU006", "$.resolved_config.use_v2_model_runner",
           f"prefill worker dp0 tp0 pp0 resolved use_v2_model_runner differently from {sched}")]),
        ("SU006", "worker_mamba_backend_differs", {
            "worker.json": (worker, [(["resolved_config", "mamba_backend"], "flashinfer")]),
            "scheduler.json": (scheduler, [(["resolved_config", "mamba_backend"], "triton")])}, {},
         [("worker.json", "SU006", "$.resolved_config.mamba_backend",
           f"prefill worker dp0 tp0 pp0 resolved mamba_backend differently from {sched}")]),
        ("SU006", "good_worker_mamba_block_size_aligned", {"worker.json": (worker, [(["resolved_config", "mamba_block_size"], 16)]),
                                                           "scheduler.json": (scheduler, [])}, {}, []),
        ("PC008", "probe_ran_without_prefix_caching", {"worker.json": (worker, decode), "scheduler.json": (scheduler, decode)},
         {"worker.json": (worker, [(["prefix_caching", "enable_prefix_caching"], False)]),
          "scheduler.json": (scheduler, [(["prefix_caching", "enable_prefix_caching"], False)])},
         [("scheduler.json", "PC008", "$.prefix_caching", "decode: runtime prefix-caching settings differ from the "
           "accepted probe: enable_prefix_caching true (probe false)"),
          ("worker.json", "PC008", "$.prefix_caching", "decode: runtime prefix-caching settings differ from the "
           "accepted probe: enable_prefix_caching true (probe false)")]),
        # Every differing setting is named with both values (issue 13 item 10).
        ("PC008", "probe_hash_block_and_unit_differ", {"worker.json": (worker, decode), "scheduler.json": (scheduler, decode)},
         {"worker.json": (worker, [(["prefix_caching", "hash_block_size"], 8), (["prefix_caching", "prefix_match_unit"], 8)]),
          "scheduler.json": (scheduler, [])},
         [("worker.json", "PC008", "$.prefix_caching", "decode: runtime prefix-caching settings differ from the "
           "accepted probe: hash_block_size 16 (probe 8); prefix_match_unit null (probe 8)")]),
        ("PC009", "probe_page_differs", {"worker.json": (worker, decode), "scheduler.json": (scheduler, decode)},
         {"worker.json": (worker, [(["cache", "groups", 0, "page_size_bytes"], 32768)]), "scheduler.json": (scheduler, [])},
         [("worker.json", "PC009", "$.cache.groups", "decode: runtime cache group geometry differs from the accepted probe")]),
        ("PC009", "good_same_as_probe", {"worker.json": (worker, decode), "scheduler.json": (scheduler, decode)},
         {"worker.json": (worker, []), "scheduler.json": (scheduler, [])}, []),
    ]


if __name__ == "__main__":
    main()
