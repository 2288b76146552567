"""Write the fixtures of the import gate's rules (RS, PA, CA, CK004) under tests/rules/<ID>/
(run: python tests/rules/make_import_fixtures.py; it rewrites only those folders).

As in make_fixtures.py: each case is an edit of the bundled examples and its complete expected
report, written by hand. A record-set case is a folder; a single document a file.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

from make_fixtures import DELETE, EXAMPLES, HERE, _edited, _write_doc

GLM = EXAMPLES / "glm53flash-tp4"
MM = EXAMPLES / "minimax-m27-tp4"
OWN = ("RS", "PA", "CA")
OWN_IDS = ("CK004",)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _tp(doc: dict, size: int, rank: int | None = None) -> dict:
    doc = copy.deepcopy(doc)
    doc["resolved_config"]["tensor_parallel_size"] = size
    if rank is not None:
        doc["tp_rank"] = rank
    return doc


def _glm_layers(worker: dict, group: int) -> str:
    return ", ".join(worker["cache"]["groups"][group]["layer_names"])


def _uneven_stages() -> dict:
    """vLLM's records of two pipeline stages of 24 and 8 layers (conformance geometry
    plain_32_two_workers split unevenly: the stages' pool blocks differ) with the profile of the
    first stage's pages, which no import writes (RS010)."""
    from kvproof.importer import profile_of
    from kvproof.models.codec import unstructure
    from kvproof.models.geometry import load_geometry
    from kvproof.sim.synth import synthesize

    geometry = json.loads((HERE.parents[0] / "conformance" / "geometries" / "plain_32_two_workers.json").read_text())
    layers = geometry["workers"][0] + geometry["workers"][1]
    geometry["workers"] = [layers[:24], layers[24:]]
    records = synthesize(load_geometry(json.dumps(geometry)))
    files = {name: unstructure(record) for name, record in records.files()}
    files["profile.json"] = unstructure(profile_of(records.scheduler, records.workers, model="kvproof/synthesized"))
    return files


def _triton(record: dict) -> dict:
    """The GLM record as the Triton KDA backend writes it: no prefill checkpoint block, no
    alignment (kda.py:168-176), the scheduler's concurrency and size from its groups' blocks."""
    from kvproof.models.documents import load_tree
    from kvproof.rules.startup_concurrency import kv_cache_size_tokens, total_blocks

    record = copy.deepcopy(record)
    for group in record["cache"]["groups"]:
        specs = [group.get("state") or {}, group.get("spec") or {}] + list((group.get("layer_specs") or {}).values())
        for spec in specs:
            if "num_prefill_checkpoint_blocks" in spec:
                spec["num_prefill_checkpoint_blocks"], spec["prefill_checkpoint_alignment"] = 0, None
    if record["kind"] == "scheduler":
        loaded = load_tree(record, "scheduler.json").obj
        concurrency = record["cache"]["num_blocks"] / total_blocks(loaded.cache, loaded.resolved_config)
        record["cache"]["kv_cache_max_concurrency"] = concurrency
        record["cache"]["kv_cache_size_tokens"] = kv_cache_size_tokens(concurrency, record["resolved_config"]["max_model_len"])
    return record


def _imported(files: dict) -> dict:
    from kvproof.importer import profile_of
    from kvproof.models.codec import unstructure
    from kvproof.models.documents import load_tree

    scheduler = load_tree(files["scheduler.json"], "scheduler.json").obj
    worker = load_tree(files["worker.json"], "worker.json").obj
    return unstructure(profile_of(scheduler, [worker], model="zai-org/GLM-5.3-Flash"))


def set_cases():
    """(rule, case, {file: document}, expected[(file, rule, path, message)])."""
    mw, ms, mp = _tp(_load(MM / "worker-dp0-tp0-pp0.json"), 1), _tp(_load(MM / "scheduler-dp0.json"), 1), _load(MM / "profile.json")
    gw, gs, gp = _tp(_load(GLM / "worker-dp0-tp0-pp0.json"), 1), _tp(_load(GLM / "scheduler-dp0.json"), 1), _load(GLM / "profile.json")
    sched, worker = "prefill scheduler dp0", "prefill worker dp0 tp0 pp0"
    at = f"which {sched} (scheduler.json) gives at"
    G, RM, R = "$.resources.cache_groups", "$.resources.runtime_memory", "$.resources"
    glm = {"worker.json": gw, "scheduler.json": gs}
    triton = {"worker.json": _triton(gw), "scheduler.json": _triton(gs)}

    def profile_case(rule, case, edits, expected, records=glm, base=gp):
        return (rule, case, {**records, "profile.json": _edited(base, edits)}, [("profile.json", *e) for e in expected])

    rg, rm = ["resources", "cache_groups"], ["resources", "runtime_memory"]
    original = {f"worker-dp0-tp{t}-pp0.json": _load(MM / f"worker-dp0-tp{t}-pp0.json") for t in (0, 1, 3)}
    return [
        # RS: completeness and agreement
        ("RS001", "worker_without_scheduler", {"worker.json": mw, "scheduler.json": _edited(ms, [(["dp_rank"], 1)])},
         [("scheduler.json", "RS005", "$.resolved_config.tensor_parallel_size",
           "prefill scheduler dp1 has 0 worker records, but tensor_parallel_size x pipeline_parallel_size is 1"),
          ("worker.json", "RS001", "$.dp_rank", f"{worker} has no scheduler record of its DP rank and phase in the record set")]),
        # a worker of a DP rank with no scheduler, next to a complete DP-0 set: RS001 alone
        ("RS001", "worker_of_another_dp_rank", {"worker.json": mw, "worker-dp1.json": _edited(mw, [(["dp_rank"], 1)]),
                                                "scheduler.json": ms},
         [("worker-dp1.json", "RS001", "$.dp_rank",
           "prefill worker dp1 tp0 pp0 has no scheduler record of its DP rank and phase in the record set")]),
        ("RS002", "scheduler_twice", {"worker.json": mw, "scheduler.json": ms, "scheduler-copy.json": ms},
         [("scheduler.json", "RS002", "$.dp_rank", f"{sched} appears twice in the record set (also scheduler-copy.json)")]),
        ("RS003", "rank_past_tp_size", {"worker.json": _edited(mw, [(["tp_rank"], 1)]), "scheduler.json": ms},
         [("worker.json", "RS003", "$.tp_rank",
           "prefill worker dp0 tp1 pp0 lies outside tensor_parallel_size 1 x pipeline_parallel_size 1")]),
        ("RS004", "worker_twice", {"worker.json": mw, "worker-copy.json": mw, "scheduler.json": ms},
         [("scheduler.json", "RS005", "$.resolved_config.tensor_parallel_size",
           f"{sched} has 2 worker records, but tensor_parallel_size x pipeline_parallel_size is 1"),
          ("worker.json", "RS004", "$.tp_rank", f"{worker} appears twice in the record set (also worker-copy.json)")]),
        # the same rank twice in a TP-2 set of two workers: RS004 alone (RS005 counts two)
        ("RS004", "rank_0_twice_at_tp2", {"worker.json": _tp(mw, 2, 0), "worker-copy.json": _tp(mw, 2, 0),
                                          "scheduler.json": _tp(ms, 2)},
         [("worker.json", "RS004", "$.tp_rank", f"{worker} appears twice in the record set (also worker-copy.json)")]),
        # the user finding: a TP-4 record set with one worker removed
        ("RS005", "tp4_without_rank_2", {**original, "scheduler-dp0.json": _load(MM / "scheduler-dp0.json")},
         [("scheduler-dp0.json", "RS005", "$.resolved_config.tensor_parallel_size",
           f"{sched} has 3 worker records, but tensor_parallel_size x pipeline_parallel_size is 4")]),
        ("RS005", "good_tp2", {"worker-tp0.json": _tp(mw, 2, 0), "worker-tp1.json": _tp(mw, 2, 1), "scheduler.json": _tp(ms, 2)}, []),
        ("RS006", "rank_resolved_another_mamba_block", {
            "worker-tp0.json": _tp(mw, 2, 0), "scheduler.json": _tp(ms, 2),
            "worker-tp1.json": _edited(_tp(mw, 2, 1), [(["resolved_config", "mamba_block_size"], 16)])},
         [("worker-tp1.json", "RS006", "$.resolved_config.mamba_block_size",
           "prefill worker dp0 tp1 pp0 resolved mamba_block_size differently from prefill worker dp0 tp0 pp0")]),
        ("RS007", "worker_of_another_vllm", {"worker.json": _edited(mw, [(["runtime", "version"], "0.33.1")]), "scheduler.json": ms},
         [("worker.json", "RS007", "$.runtime.version", f"{worker} names vLLM '0.33.1', but {sched} names '0.33.0'")]),
        ("RS008", "worker_of_another_model", {"worker.json": _edited(mw, [(["model"], "other/model")]), "scheduler.json": ms},
         [("worker.json", "RS008", "$.model", f"{worker} names model 'other/model', but {sched} names 'MiniMaxAI/MiniMax-M2.7'")]),
        ("RS009", "one_record_names_a_configuration", {"worker.json": _edited(mw, [(["model_config_sha256"], "a" * 64)]),
                                                       "scheduler.json": ms},
         [("worker.json", "RS009", "$.model_config_sha256",
           f"{worker} names model configuration '{'a' * 64}', but {sched} names nothing")]),
        ("RS010", "stages_with_two_pool_blocks", _uneven_stages(),
         [("worker-dp0-tp0-pp1.json", "RS010", "$.cache.storages",
           "worker dp0 tp0 pp1 has a pool block of 524288 bytes, but worker dp0 tp0 pp0 has 1572864: "
           "a profile holds one page per group")]),
        # PA: the profile against its records (GLM-5.3-Flash at TP 1)
        profile_case("PA001", "profile_without_the_ring_group", [(rg, lambda g: g[:5])],
                     [("PA001", G, f"profile has 5 cache groups, but {sched} (scheduler.json) gives 6 at $.cache.groups")]),
        profile_case("PA002", "group_renamed", [(rg + [0, "name"], "kda")],
                     [("PA002", f"{G}[0].name", f"name 'kda' differs from 'runtime_group_0', {at} $.cache.groups[0]")]),
        profile_case("PA003", "ring_as_attention", [(rg + [5, "kind"], "attention"), (rg + [5, "blocks_per_request"], DELETE)],
                     [("PA003", f"{G}[5].kind", f"kind 'attention' differs from 'state', {at} $.cache.groups[5].spec.spec_type"),
                      ("PA008", f"{G}[5].blocks_per_request",
                       f"blocks_per_request nothing differs from 1, {at} $.cache.groups[5].spec.num_speculative_blocks"),
                      ("CA001", f"{RM}.kv_cache_bytes", "one request at max_model_len 1048576 needs 262638 blocks = "
                       "3550025318400 bytes, more than kv_cache_bytes 185126092800")]),
        profile_case("PA004", "one_layer_more", [(rg + [0, "num_layers"], 10)],
                     [("PA004", f"{G}[0].num_layers", f"num_layers 10 differs from 9, which the workers of {sched} give at $.cache.groups[0].layer_names")]),
        profile_case("PA005", "attention_block_doubled", [(rg + [4, "block_size_tokens"], 4352)],
                     [("PA005", f"{G}[4].block_size_tokens",
                       f"block_size_tokens 4352 differs from 2176, {at} $.cache.groups[4].block_size_tokens")]),
        profile_case("PA006", "pages_doubled", [(rg, lambda g: [dict(x, page_size_bytes=27033600) for x in g])],
                     [("PA006", f"{G}[{i}].page_size_bytes", f"page_size_bytes 27033600 differs from 13516800, which {worker} "
                       "(worker.json) gives at $.cache.storages / $.cache.num_blocks") for i in range(6)]),
        profile_case("PA007", "attention_with_a_window", [(rg + [4, "sliding_window"], 4096)],
                     [("PA007", f"{G}[4].sliding_window",
                       f"sliding_window 4096 differs from nothing, {at} $.cache.groups[4].spec.sliding_window")]),
        # the user finding: 3 blocks per request where the records say 1
        profile_case("PA008", "three_blocks_per_request", [(rg + [0, "blocks_per_request"], 3)],
                     [("PA008", f"{G}[0].blocks_per_request",
                       f"blocks_per_request 3 differs from 1, {at} $.cache.groups[0].spec.num_speculative_blocks")]),
        profile_case("PA009", "no_checkpoint_block", [(rg + [0, "prefill_checkpoint_blocks"], 0),
                                                      (rg + [0, "prefill_checkpoint_alignment"], DELETE)],
                     [("PA009", f"{G}[0].prefill_checkpoint_blocks",
                       f"prefill_checkpoint_blocks 0 differs from 1, {at} $.cache.groups[0].spec.num_prefill_checkpoint_blocks"),
                      ("PA010", f"{G}[0].prefill_checkpoint_alignment", f"prefill_checkpoint_alignment nothing differs from 16, "
                       f"{at} $.cache.groups[0].spec.prefill_checkpoint_alignment")]),
        # records without a checkpoint block (Triton KDA), a profile with one: PA009 alone
        profile_case("PA009", "checkpoint_block_next_to_triton_records", [(rg + [0, "prefill_checkpoint_blocks"], 1)],
                     [("PA009", f"{G}[0].prefill_checkpoint_blocks",
                       f"prefill_checkpoint_blocks 1 differs from 0, {at} $.cache.groups[0].spec.num_prefill_checkpoint_blocks")],
                     records=triton, base=_imported(triton)),
        profile_case("PA010", "alignment_32", [(rg + [0, "prefill_checkpoint_alignment"], 32)],
                     [("PA010", f"{G}[0].prefill_checkpoint_alignment", f"prefill_checkpoint_alignment 32 differs from 16, "
                       f"{at} $.cache.groups[0].spec.prefill_checkpoint_alignment")]),
        profile_case("PA011", "null_block_counted", [(rm + ["kv_cache_bytes"], 13697 * 13516800)],
                     [("PA011", f"{RM}.kv_cache_bytes", "kv_cache_bytes 185139609600 differs from 185126092800, which the workers "
                       "give at $.cache.num_blocks x the pool block (the null block excluded)")]),
        profile_case("PA012", "half_the_context", [(rm + ["max_model_len"], 524288)],
                     [("PA012", f"{RM}.max_model_len", f"max_model_len 524288 differs from 1048576, {at} $.resolved_config.max_model_len")]),
        profile_case("PA013", "prefix_caching_off", [(rm + ["enable_prefix_caching"], False)],
                     [("PA013", f"{RM}.enable_prefix_caching",
                       f"enable_prefix_caching false differs from true, {at} $.resolved_config.enable_prefix_caching")],
                     records={"worker.json": mw, "scheduler.json": ms}, base=mp),
        profile_case("PA014", "mamba_mode_none", [(rm + ["mamba_cache_mode"], "none")],
                     [("PA014", f"{RM}.mamba_cache_mode", f"mamba_cache_mode 'none' differs from 'align', {at} $.cache.mamba_cache_mode")]),
        profile_case("PA015", "hash_block_doubled", [(rm + ["hash_block_size_tokens"], 4352)],
                     [("PA015", f"{RM}.hash_block_size_tokens",
                       f"hash_block_size_tokens 4352 differs from 2176, {at} $.cache.hash_block_size")]),
        profile_case("PA016", "utilization_of_another_run", [],
                     [("PA016", f"{RM}.gpu_memory_utilization",
                       f"gpu_memory_utilization 0.9 differs from 0.8, {at} $.raw_cache_config.gpu_memory_utilization")],
                     records={"worker.json": gw, "scheduler.json": _edited(gs, [(["raw_cache_config"], {"gpu_memory_utilization": 0.8})])}),
        # issue 13 item 7 / issue 15: a worker that states the engine's utilization judges it too
        profile_case("PA016", "worker_states_another_utilization", [],
                     [("PA016", f"{RM}.gpu_memory_utilization",
                       f"gpu_memory_utilization 0.9 differs from 0.5, which {worker} (worker.json) gives at "
                       "$.raw_cache_config.gpu_memory_utilization")],
                     records={"worker.json": _edited(gw, [(["raw_cache_config"], {"block_size": 2176, "gpu_memory_utilization": 0.5})]),
                              "scheduler.json": gs}),
        profile_case("PA016", "good_utilization_as_recorded", [(rm + ["gpu_memory_utilization"], 0.5)], [],
                     records={"worker.json": gw,
                              "scheduler.json": _edited(gs, [(["raw_cache_config"], {"gpu_memory_utilization": 0.5})])}),
        profile_case("PA017", "half_the_token_budget", [(["resources", "max_num_tokens"], 8192)],
                     [("PA017", f"{R}.max_num_tokens", f"max_num_tokens 8192 differs from 16384, {at} $.resolved_config.max_num_batched_tokens")]),
        profile_case("PA018", "half_the_batch", [(["resources", "max_batch_size"], 128)],
                     [("PA018", f"{R}.max_batch_size", f"max_batch_size 128 differs from 256, {at} $.resolved_config.max_num_seqs")]),
        profile_case("PA019", "no_runtime_memory", [(rm, DELETE)],
                     [("PA019", f"{R}.runtime_memory", f"profile lacks runtime_memory, which {sched} (scheduler.json) and its workers give")]),
        profile_case("PA019", "good_imported_profile", [], []),
    ]


def cases():
    """(rule, case, document, expected[(rule, path, message)])."""
    mp, gw = _load(MM / "profile.json"), _load(GLM / "worker-dp0-tp0-pp0.json")
    RM, R = "$.resources.runtime_memory", "$.resources"

    def alignment(group, value):
        def edit(groups):
            groups = copy.deepcopy(groups)
            groups[group]["state"]["prefill_checkpoint_alignment"] = value
            for spec in groups[group]["layer_specs"].values():
                spec["prefill_checkpoint_alignment"] = value
            return groups
        return edit

    return [
        ("RS011", "unknown_layout", _edited(_load(MM / "worker-dp0-tp0-pp0.json"), [(["cache", "kv_cache_layout"], "LBHCN")]),
         [("RS011", "$.cache.kv_cache_layout", "kv_cache_layout 'LBHCN' is not a KVCacheLayout of vLLM 0.33.0")]),
        ("RS012", "scheduler_mamba_block_in_a_worker", _edited(gw, [(["resolved_config", "mamba_block_size"], 16)]),
         [("RS012", "$.resolved_config.mamba_block_size",
           "prefill worker dp0 tp0 pp0 resolved mamba_block_size 16 in align mode, but block_size 2176")]),
        ("RS013", "raw_block_size_differs", _edited(_load(MM / "worker-dp0-tp0-pp0.json"), [(["raw_cache_config"], {"block_size": 32})]),
         [("RS013", "$.raw_cache_config.block_size", "prefill worker dp0 tp0 pp0 raw_cache_config block_size 32 contradicts the resolved 16")]),
        ("RS013", "good_raw_agrees", _edited(_load(MM / "worker-dp0-tp0-pp0.json"),
                                             [(["raw_cache_config"], {"block_size": 16, "gpu_memory_utilization": 0.9})]), []),
        ("CK004", "alignment_8", _edited(gw, [(["cache", "groups"], alignment(0, 8))]),
         [("CK004", "$.cache.groups[0].state.prefill_checkpoint_alignment",
           f"mamba prefill checkpoint alignment 8 is not one a vLLM 0.33.0 GDN_ATTN backend gives: {_glm_layers(gw, 0)}")]),
        # the user finding: one KV page where one request at max_model_len needs 512
        ("CA001", "one_page_pool", _edited(mp, [(["resources", "runtime_memory", "kv_cache_bytes"], 1015808)]),
         [("CA001", f"{RM}.kv_cache_bytes",
           "one request at max_model_len 8192 needs 512 blocks = 520093696 bytes, more than kv_cache_bytes 1015808")]),
        ("CA001", "good_512_page_pool", _edited(mp, [(["resources", "runtime_memory", "kv_cache_bytes"], 512 * 1015808)]), []),
        # the user finding: a zero token budget
        ("CA002", "zero_token_budget", _edited(mp, [(["resources", "max_num_tokens"], 0)]),
         [("CA002", f"{R}.max_num_tokens", "max_num_tokens must be positive (the scheduler's token budget)")]),
        ("CA003", "zero_batch", _edited(mp, [(["resources", "max_batch_size"], 0)]),
         [("CA003", f"{R}.max_batch_size", "max_batch_size must be positive (the scheduler's max_num_seqs)")]),
    ]


def main() -> None:
    for rule_dir in HERE.glob("[A-Z][A-Z][0-9][0-9][0-9]"):
        if rule_dir.name[:2] in OWN or rule_dir.name in OWN_IDS:
            shutil.rmtree(rule_dir)
    for rule, case, document, expected in cases():
        out = HERE / rule
        out.mkdir(exist_ok=True)
        _write_doc(out / f"{case}.json", document)
        (out / f"{case}.expected.jsonl").write_text(
            "".join(json.dumps({"rule": r, "path": p, "message": m}) + "\n" for r, p, m in expected))
    for rule, case, files, expected in set_cases():
        out = HERE / rule / case
        out.mkdir(parents=True)
        for name, document in files.items():
            _write_doc(out / name, document)
        (HERE / rule / f"{case}.expected.jsonl").write_text(
            "".join(json.dumps({"file": f, "rule": r, "path": p, "message": m}) + "\n" for f, r, p, m in expected))
    print("import-gate fixtures written")


if __name__ == "__main__":
    main()
