"""Why an accepted mutation of a field that rules read is not a failure.

Two tables, both reviewed like the rule table:

* :data:`VALID_VARIANTS`: edits that give a record vLLM 0.33.0 can really write (or that no
  rule should refuse); each names the ``(class, field)``, the edit kinds (``ops``; None: any) and
  the reason.
* :data:`KNOWN_GAPS`: surviving mutants that show a real gap in a rule, reported in
  ``docs/fuzz-findings.md`` under their ID for the lead to fix. A known gap does not fail the
  campaign while it survives; once a fixed rule refuses every mutant it covers, the campaign
  reports the entry as stale (a failure, so the table is kept honest).

A variant or gap may narrow its match with ``path``, a substring of the edited site's JSON path,
and ``when``, a predicate over the edit and the document tree.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from ..formulas.blocks_per_request import max_in_flight_tokens
from .mutate import Edit

__all__ = ["Explanation", "VALID_VARIANTS", "KNOWN_GAPS", "KNOWN_SYNTH_REFUSALS", "explain", "known_synth_refusal"]


@attrs.frozen
class Explanation:
    owner: str
    field: str
    reason: str
    #: Edit kinds it covers (None: every edit of the field).
    ops: tuple[str, ...] | None = None
    #: A substring the site's JSON path must contain.
    path: str | None = None
    #: Finding ID in docs/fuzz-findings.md (known gaps only).
    id: str | None = None
    when: Callable[[Edit, Any], bool] | None = attrs.field(default=None, eq=False)

    def matches(self, edit: Edit, tree: Any = None) -> bool:
        if (edit.site.owner, edit.site.field) != (self.owner, self.field) and not (
                self.owner == "*" and edit.site.field == self.field):
            return False
        if self.ops is not None and edit.op not in self.ops:
            return False
        if self.path is not None and self.path not in edit.site.json_path:
            return False
        return self.when is None or bool(self.when(edit, tree))

    @property
    def label(self) -> str:
        return self.id or f"{self.owner}.{self.field}"


def _at(tree: Any, path: tuple) -> Any:
    for key in path:
        if isinstance(tree, dict) and key in tree or isinstance(tree, list) and isinstance(key, int) and key < len(tree):
            tree = tree[key]
        else:
            return None
    return tree


def _old(edit: Edit, tree: Any) -> Any:
    return _at(tree, edit.site.path)


def _kind(tree: Any) -> str | None:
    return tree.get("kind") if isinstance(tree, dict) and "schema_version" in tree and "cache" in tree else None


def _is_worker(edit: Edit, tree: Any) -> bool:
    return _kind(tree) == "worker"


def _plain(edit: Edit, tree: Any) -> bool:
    """The record holds no hybrid evidence (no worker layer specs, no scheduler group spec)."""
    groups = _at(tree, ("cache", "groups")) or []
    return not any(isinstance(g, dict) and (g.get("layer_specs") or g.get("spec")) for g in groups)


def _later_layer_spec(edit: Edit, tree: Any) -> bool:
    """The edit is inside a worker layer spec other than the first of its group (SC006 compares the
    first one with the scheduler's copy of the group)."""
    path = edit.site.path
    if len(path) < 5 or path[:2] != ("cache", "groups") or path[3] != "layer_specs":
        return False
    names = _at(tree, ("cache", "groups", path[2], "layer_names")) or []
    return bool(names) and path[4] != names[0]


def _stride_of_a_size_one_dimension(edit: Edit, tree: Any) -> bool:
    """The edit is one element of a view's ``stride_bytes`` whose dimension has size 1."""
    path = edit.site.path
    if len(path) < 2 or path[-2] != "stride_bytes" or not isinstance(path[-1], int):
        return False
    view = _at(tree, path[:-2])
    shape = view.get("shape") if isinstance(view, dict) else None
    return isinstance(shape, list) and path[-1] < len(shape) and shape[path[-1]] == 1


def _inner_stride_of_a_state_view(edit: Edit, tree: Any) -> bool:
    """The edit is one element of a state view's ``stride_bytes`` (``role`` ``conv``, ``ssm`` or
    ``state``: a Mamba state's view) other than its block axis's."""
    path = edit.site.path
    if len(path) < 2 or path[-2] != "stride_bytes" or not isinstance(path[-1], int):
        return False
    view = _at(tree, path[:-2])
    return (isinstance(view, dict) and view.get("role") in ("conv", "ssm", "state")
            and path[-1] != view.get("block_axis", 0))


def _align_without_mamba(edit: Edit, tree: Any) -> bool:
    """The edit makes a scheduler cache's Mamba mode ``align`` where the resolved mode is null or
    absent and no group is a Mamba group (neither its ``spec_type`` nor its ``spec``'s)."""
    groups = _at(tree, ("cache", "groups"))
    if edit.value != "align" or _at(tree, ("resolved_config", "mamba_cache_mode")) is not None:
        return False
    if not isinstance(groups, list):
        return False

    def mamba(group: Any) -> bool:
        spec = group.get("spec") if isinstance(group, dict) else None
        return isinstance(group, dict) and "MambaSpec" in (
            group.get("spec_type"), spec.get("spec_type") if isinstance(spec, dict) else None)

    return not any(mamba(g) for g in groups)


def _was(*values: Any) -> Callable[[Edit, Any], bool]:
    def test(edit: Edit, tree: Any) -> bool:
        old = _old(edit, tree)
        return any(type(old) is type(v) and old == v for v in values)

    return test


def _in_flight_derivable(edit: Edit, tree: Any) -> bool:
    """The record's max_in_flight_tokens is what SU derives when it is absent (config/vllm.py:600-609)."""
    config = _at(tree, ("resolved_config",)) or {}
    recorded = config.get("max_in_flight_tokens")
    batched = config.get("max_num_batched_tokens")
    if not isinstance(recorded, int) or not isinstance(batched, int):
        return False
    pp = config.get("pipeline_parallel_size")
    derived = max_in_flight_tokens(batched, bool(config.get("async_scheduling") or False), pp if isinstance(pp, int) else 1)
    return derived == recorded


def _kernel_is_spec_block(edit: Edit, tree: Any) -> bool:
    """A null kernel_block_size stands for the spec's block (VC005); the entry's value was that block."""
    group = _at(tree, edit.site.path[:-1]) or {}
    groups = _at(tree, ("cache", "groups")) or []
    index = group.get("kv_cache_group_id")
    if not isinstance(index, int) or index >= len(groups):
        return False
    return _old(edit, tree) == groups[index].get("block_size_tokens")


def _utilization_unrecorded(tree: Any) -> bool:
    """The profile's utilization is not a recorded value: the importer noted vLLM's default in the
    memory's provenance (kvproof/importer: "gpu_memory_utilization not recorded"), or the profile
    was not imported (no provenance of records), so no record fixes it."""
    if not isinstance(tree, dict):
        return False
    if not isinstance(tree.get("provenance"), dict):
        return True
    note = _at(tree, ("resources", "runtime_memory", "provenance"))
    return isinstance(note, str) and "gpu_memory_utilization not recorded" in note


_NUMBERS = ("+1", "-1", "zero", "negative", "number")
_ABSENCE = ("null", "remove")
#: Another positive integer: a systematic neighbour or a random one.
_OTHER = ("+1", "-1", "number")


def _positive(edit: Edit, tree: Any) -> bool:
    return type(edit.value) is int and edit.value > 0

def _layout(*layouts: str) -> Callable[[Edit, Any], bool]:
    """A profile of one of ``layouts`` (ST rules, docs/state-storage.md)."""
    return lambda edit, tree: isinstance(tree, dict) and (tree.get("resources") or {}).get("cache_layout") in layouts


def _policy(policy: str) -> Callable[[Edit, Any], bool]:
    return lambda edit, tree: isinstance(tree, dict) and (tree.get("resources") or {}).get("state_storage") == policy


#: The storage-policy profiles' variants (examples/hybrid-mamba-align, examples/unmodeled-*).
_STATE_STORAGE_VARIANTS: tuple[Explanation, ...] = (
    Explanation("Resources", "cache_groups", "an unmodeled profile holds no groups: an empty and an absent list are "
                "the same (ST007)", ops=("remove",), when=_layout("unmodeled")),
    Explanation("Resources", "mamba_cache", "the unmodeled layout serves timing queries: its observed geometry is "
                "optional (ST005 requires it of mamba_align only)", ops=_ABSENCE, when=_layout("unmodeled")),
    Explanation("MambaCache", "block_size_tokens", "any block of whole hash units (ST009) on the unmodeled layout: "
                "timing queries size nothing by it (ST011 ties it to the groups of mamba_align)",
                when=lambda e, t: _layout("unmodeled")(e, t) and _positive(e, t)),
    Explanation("Resources", "state_cache", "manual state geometry is optional (ST026 and ST027 judge it when stated)",
                ops=_ABSENCE),
    Explanation("StateCache", "num_speculative_states", "each manual key is optional (ST026 judges a stated one)",
                ops=_ABSENCE),
    Explanation("MambaCache", "num_speculative_tokens", "KDA RecoverSSM runs at any draft depth >= 1 and keeps no "
                "speculative state blocks (abstract.py:84-90): no other profile field fixes the depth (ST025 refuses 0)",
                ops=_OTHER, when=lambda e, t: _policy("kda_recoverssm")(e, t) and _positive(e, t)),
    Explanation("CacheGroup", "prefill_checkpoint_blocks", "0 or 1 prefill checkpoint (MambaMixer2 sets 1, "
                "mamba_mixer2.py:1108-1118; other Mamba layers keep 0): the layers decide, and a profile "
                "alone has no evidence of them (next to its records PA009 compares it)",
                ops=("+1",), when=lambda e, t: e.value in (0, 1)),
)

VALID_VARIANTS: tuple[Explanation, ...] = (
    *_STATE_STORAGE_VARIANTS,
    # ---- a view's stride along a dimension of size 1 (found by `fuzz --seed 40221`)
    Explanation("LayerView", "stride_bytes", "any stride of a dimension of size 1: its only index is 0, so the "
                "stride addresses no byte and every value is the same view (torch reports such strides freely)",
                ops=_OTHER, when=_stride_of_a_size_one_dimension),
    # ---- the scheduler process's Mamba block (seed 001: 16 next to the workers' 2,176)
    Explanation("ResolvedConfig", "mamba_block_size", "any value in a scheduler record: the multiprocess executor "
                "aligns the Mamba block in the worker processes only (multiproc_executor.py:802), so no rule "
                "reads the scheduler's (RS012 judges the workers')",
                when=lambda edit, tree: isinstance(tree, dict) and tree.get("kind") == "scheduler"),
    # ---- a profile's scheduler envelope
    *(Explanation("Resources", field, f"any positive {field}: a profile alone has no records to compare with "
                  f"(CA002/CA003 refuse 0; next to its records {rule} refuses any other value)")
      for field, rule in (("max_num_tokens", "PA017"), ("max_batch_size", "PA018"))),
    # ---- identity of a record within a record set
    *(Explanation(owner, field, "any DP/TP/PP rank: ranks only pair records of one set; a record whose "
                  "partners are not in the set is checked alone (the rules of a worker read no rank)")
      for owner, field in (("WorkerRecord", "dp_rank"), ("WorkerRecord", "tp_rank"), ("WorkerRecord", "pp_rank"),
                           ("SchedulerRecord", "dp_rank"))),
    *(Explanation(owner, "phase", "any collection phase: records of different phases are not paired, and a phase "
                  "name is free text (prefill, decode, ...)") for owner in ("WorkerRecord", "SchedulerRecord")),
    Explanation("Runtime", "version", "a plain record (no layer specs, no scheduler group spec) imports from every "
                "vLLM version (VG001 gates only hybrid evidence)", when=_plain),
    Explanation("WorkerGroup", "kind", "a plain group (no layer specs) may omit its kind (SC003 requires it only "
                "with hybrid evidence)", ops=_ABSENCE, when=lambda e, t: _plain(e, t)),
    *(Explanation("LayerSpec", field, "Mamba layers of one UniformTypeKVCacheSpecs group may differ in shapes, "
                  "dtypes and mamba_type (vLLM 0.33.0 kv_cache_interface.py:1155-1166; the views still match, VC006)",
                  ops=("value",), when=_later_layer_spec) for field in ("mamba_type", "dtypes")),
    # ---- optional settings and evidence whose absence means the recorded value
    Explanation("ResolvedConfig", "prefix_match_unit", "absent and null both mean no prefix_match_unit "
                "(PC005 and PC007 read it with OrDefault(..., None))", ops=("remove",), when=_was(None)),
    Explanation("ResolvedConfig", "mamba_cache_mode", "absent and null both mean no Mamba mode", ops=("remove",),
                when=_was(None)),
    Explanation("ResolvedConfig", "decode_context_parallel_size", "absent or null means vLLM's default 1, "
                "the recorded value", ops=_ABSENCE, when=_was(1)),
    Explanation("ResolvedConfig", "max_in_flight_tokens", "absent or null: SU derives it from "
                "max_num_batched_tokens, async_scheduling and pipeline_parallel_size, which gives the recorded "
                "value", ops=_ABSENCE, when=_in_flight_derivable),
    Explanation("SchedulerCache", "mamba_cache_mode", "absent and null both mean no Mamba mode", ops=("remove",),
                when=_was(None)),
    Explanation("SchedulerCache", "mamba_cache_mode", "'none' is CacheConfig's default mode (config/cache.py), what "
                "vLLM holds for a model without Mamba layers, whose resolved mode the record leaves null",
                ops=("value",), when=lambda e, t: e.value == "none"
                and _at(t, ("resolved_config", "mamba_cache_mode")) is None),
    Explanation("LayerSpec", "dtype", "the same torch dtype spelled with its module prefix (str(torch.bfloat16))",
                ops=("value",), when=lambda e, t: isinstance(e.value, str) and e.value.startswith("torch.")
                and e.value.removeprefix("torch.") == _old(e, t)),
    Explanation("WorkerCache", "model_runner", "optional evidence: VC009 checks it when present (older probes and "
                "synthesized records have none)", ops=_ABSENCE),
    Explanation("SchedulerCache", "cache_hit_alignment_tokens", "optional evidence: PC007 checks it when present",
                ops=_ABSENCE),
    Explanation("WorkerCache", "attention_groups", "optional evidence: VC005 checks it when present", ops=_ABSENCE),
    Explanation("AttentionGroup", "kernel_block_size", "null means the spec's own block (vLLM leaves it None then), "
                "which the entry stated", ops=("null",), when=_kernel_is_spec_block),
    Explanation("SchedulerCache", "kv_cache_max_concurrency", "the next float is within the rounding of one float "
                "division (SU002's documented relative tolerance of 2**-52)", ops=("next-float",)),
    # ---- FPM profiles stand alone: any positive sizes and counts describe some model
    Explanation("CacheGroup", "name", "group names are free text"),
    Explanation("CacheGroup", "num_layers", "another positive layer count describes another model (a profile "
                "alone; next to its records PA004 refuses it)", ops=_OTHER, when=_positive),
    Explanation("CacheGroup", "blocks_per_request", "1 + k: a Mamba group with k speculative blocks (PF004 bounds "
                "it by 2**32 - 1)", ops=_OTHER, when=lambda e, t: _positive(e, t) and e.value <= 2**32 - 1),
    Explanation("CacheGroup", "prefill_checkpoint_alignment", "any positive alignment (FlashKDA 16, Mamba2 1)",
                ops=_OTHER, when=_positive),
    Explanation("CacheGroup", "prefill_checkpoint_alignment", "a checkpoint block without an alignment loads, as in "
                "the Rust twin (docs/rules.md, PF008)", ops=_ABSENCE),
    Explanation("RuntimeMemory", "max_model_len", "another positive context length describes another deployment",
                ops=_OTHER, when=_positive),
    Explanation("RuntimeMemory", "gpu_memory_utilization", "another fraction in (0, 1] (PF019) where no record "
                "states one: the import wrote vLLM's default 0.9 (vllm/config/cache.py) because no record of its set "
                "carries raw_cache_config.gpu_memory_utilization, and says so in runtime_memory.provenance (a profile "
                "without import provenance is judged alone); where a record states one, PA016 refuses any other "
                "value (issue 13 item 7, issue 15)",
                ops=("int", "next-float", "number"),
                when=lambda e, t: type(e.value) in (int, float) and 0 < e.value <= 1 and _utilization_unrecorded(t)),
    Explanation("RuntimeMemory", "enable_prefix_caching", "prefix caching off (or unstated) is a valid setting when "
                "no Mamba group is in align mode (PF016)",
                when=lambda e, t: (_at(t, ("resources", "runtime_memory", "mamba_cache_mode")) != "align")),
    Explanation("RuntimeMemory", "mamba_cache_mode", "mode none is valid with or without prefix caching; the mode "
                "is optional", ops=("value", "null", "remove"),
                when=lambda e, t: e.op != "value" or e.value == "none"),
    Explanation("RuntimeMemory", "hash_block_size_tokens", "optional evidence", ops=_ABSENCE),
    Explanation("Resources", "runtime_memory", "optional: a profile may carry no runtime memory", ops=_ABSENCE),
    Explanation("Resources", "cache_groups", "one group fewer or more describes another model", ops=("drop", "duplicate")),
)

_UNKNOWN_OR_ABSENT = ("null", "remove", "unknown", "text")

KNOWN_GAPS: tuple[Explanation, ...] = (
    # F030: a mamba_align state group that loses its checkpoint count reads as a non-Mamba state group
    Explanation("CacheGroup", "prefill_checkpoint_blocks", "a mamba_align state group without "
                "prefill_checkpoint_blocks is taken for a ring or windowed state: ST011/ST012 skip it and kvproof "
                "plan sizes it as a consumer group", id="F030", ops=_ABSENCE, when=_layout("mamba_align")),
    # F001-F002: resolved settings (SU006 compares a worker's shared settings with its scheduler's,
    # SU007 derives max_in_flight_tokens)
    Explanation("ResolvedConfig", "block_size", "a worker's block_size is not compared with its scheduler's (a "
                "multiprocess executor aligns it in the workers only, so SU006 leaves it out)", id="F001",
                when=_is_worker),

    # F005 before F003/F004: a missing, null or unknown value of a later layer spec
    *(Explanation("LayerSpec", field, "a layer spec may lack a field its vLLM class has, hold null, or hold a value "
                  "no vLLM enumeration has", id="F005", ops=_UNKNOWN_OR_ABSENT, when=_later_layer_spec)
      for field in ("num_kv_heads", "head_size", "head_size_v", "dtype", "cache_dtype_str", "cache_role",
                    "dcp_sharded", "tokens_per_state", "mamba_type", "dtypes", "mamba_cache_mode",
                    "num_speculative_blocks", "num_prefill_checkpoint_blocks", "prefill_checkpoint_alignment",
                    "sliding_window", "extra_retained_tokens", "attention_chunk_size", "state_content_bytes",
                    "num_head_slots")),
    Explanation("LayerSpec", "cache_role", "a layer's cache role (sparse attention or indexer) is not checked against "
                "its spec", id="F005", when=_later_layer_spec),
    # F003: SC013 derives every stated spec's page from its fields.
    Explanation("LayerSpec", "spec_type", "the full-attention classes (Full, MLA, HiddenState, Sink) are one uniform "
                "type (SC009); a later layer's class is not checked against its fields (F003)", id="F004",
                when=_later_layer_spec),
    *(Explanation("LayerSpec", field, "a later layer of a uniform-type group may name another dtype of the same "
                  "element size (the page is unchanged, SC013) or another cache_dtype_str; a merged group's layers must "
                  "agree (SC010)", id="F005", ops=("value",), when=_later_layer_spec)
      for field in ("dtype", "cache_dtype_str")),
    # F006, F007 (SC008-SC010), F008 (SC007), F018 (SC007) are fixed.
    # F009-F011: views and attention groups
    Explanation("LayerView", "storage_offset_bytes", "a view's offset inside its page is bounded but not derived "
                "(state tensors packed from the page start, element-size alignment)", id="F009"),
    *(Explanation("LayerView", field, "the non-block dimensions and element size of an attention view are not "
                  "derived from the layer spec", id="F010") for field in ("shape", "element_size_bytes")),
    # F011 (VC008) and F013 (SC011) are fixed; F012: PC010 compares a stated mode only.
    *(Explanation(owner, "mamba_cache_mode", "a missing or null Mamba mode is not required (PC010 compares a stated "
                  "mode with the resolved one)", id="F012", ops=_ABSENCE)
      for owner in ("StateEvidence", "SchedulerCache")),
    # F031: a state view's inner strides
    Explanation("LayerView", "stride_bytes", "a state view's strides inside its page are bounded (BO007, VC004) but "
                "not derived from its shape: vLLM's state views are dense, each stride the bytes of the dimensions "
                "inside it", id="F031", when=_inner_stride_of_a_state_view),
    # F032: the scheduler's Mamba mode of a model without Mamba layers
    Explanation("SchedulerCache", "mamba_cache_mode", "'align' is accepted in a scheduler record without a Mamba "
                "group when the resolved mode is not stated (PC010 compares stated modes only); vLLM keeps "
                "CacheConfig's 'none' for such a model (only the hybrid models' config sets 'align', and "
                "--mamba-cache-mode has no effect)", id="F032", ops=("value",), when=_align_without_mamba),
    # F017: the layout name
    Explanation("WorkerCache", "kv_cache_layout", "the layout name is read (LHBNC pages) but not checked against the "
                "tensors' and views' strides", id="F017"),
    # F014: relations inside an FPM profile
    Explanation("CacheGroup", "block_size_tokens", "profile block sizes are not checked against the hash block",
                id="F014", ops=_OTHER, when=_positive),
    Explanation("RuntimeMemory", "hash_block_size_tokens", "the profile's hash block is not checked against its "
                "groups' block sizes", id="F014", ops=_OTHER, when=_positive),
)


#: Synthesized records that rules refuse, under review: (finding ID, refusing rule IDs, predicate over
#: the simulator's plan, reason). The synthesis or the rule is wrong; docs/fuzz-findings.md says which
#: evidence points where.
def _unsupported_specs(plan: Any) -> bool:
    return any(type(spec).__name__ in _UNSUPPORTED for spec in plan.layer_specs.values())


def _head_split_aliasing(plan: Any) -> bool:
    """A head-split layout whose tensors sharing bytes have different block strides (F019)."""
    if plan.layout not in ("LHBNC", "BHLNC"):
        return False
    regions: dict[tuple[int, int], set[int]] = {}
    for tensor in plan.tensors:
        regions.setdefault((tensor.offset, tensor.size), set()).add(tensor.block_stride)
    return any(len(strides) > 1 for strides in regions.values())


_UNSUPPORTED = frozenset({"RSWASpec", "CrossAttentionSpec", "EncoderOnlyAttentionSpec"})

KNOWN_SYNTH_REFUSALS: tuple[tuple[str, frozenset[str], Callable[[Any], bool], str], ...] = (
    # F015 (pipeline stages, SC006) and F016 (LHBNC/BHLNC pages, BO rules) were fixed in ce621b0.
    ("F020", frozenset({"SC001"}), _unsupported_specs,
     "by design: the FPM has no kind for RSWA, cross-attention or encoder-only caches (SC001)"),
    ("F019", frozenset({"BO005"}), _head_split_aliasing,
     "vLLM 0.33.0 itself aliases blocks here: under LHBNC a head-split attention layer and an unsplit "
     "state layer share bytes with different block strides (docs/fuzz-findings.md F019)"),
)


def known_synth_refusal(rules: set[str], plan: Any) -> tuple[str, str] | None:
    """``(finding ID, reason)`` when a synthesized record set's refusal is a known finding (or
    several: a geometry can hit two of them, e.g. F020 and F019, IDs joined by ``+``)."""
    found = [(finding, expected, reason) for finding, expected, predicate, reason in KNOWN_SYNTH_REFUSALS
             if predicate(plan)]
    if rules and found and rules <= frozenset().union(*(expected for _, expected, _ in found)):
        return "+".join(f for f, _, _ in found), "; ".join(r for _, _, r in found)
    return None


def explain(edit: Edit, tree: Any = None) -> tuple[str, Explanation] | None:
    """``("variant", entry)`` or ``("gap", entry)`` for an accepted edit, else None."""
    for entry in VALID_VARIANTS:
        if entry.matches(edit, tree):
            return "variant", entry
    for entry in KNOWN_GAPS:
        if entry.matches(edit, tree):
            return "gap", entry
    return None
