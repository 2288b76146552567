"""Hypothesis strategies for geometry documents (``geometry-format.md``, the input of
``kvproof simulate``).

Every strategy draws plain JSON-ready ``dict``/``list`` values in the geometry format, so a drawn
document can be written to a file, fed to ``kvproof.sim.simulate_document`` or to the vLLM-driven
conformance oracle (``tests/conformance/oracle.py``) alike.  The documents are *valid geometries*:
well-formed, with field names and values the format allows.  Whether vLLM 0.33.0 would start with
them is another matter; the strategies deliberately reach vLLM's start-up refusals too (not enough
memory, a ``prefix_match_unit`` that does not divide the groups, pages that cannot be unified, ...).

Sizes are kept small (a few to a few dozen layers, ``max_model_len`` up to 16 Ki tokens, memory a
small multiple of one request) so one plan takes milliseconds and a pool has at most a few hundred
thousand blocks.

Use them in your own tests::

    from hypothesis import given
    from kvproof.fuzz.strategies import geometries
    from kvproof.sim import simulate_document

    @given(geometries(families=["mamba_hybrid", "glm_like"]))
    def test_a_valid_geometry_is_planned_or_refused(geometry):
        assert simulate_document(geometry)["status"] in ("ok", "refused")

Only the standard library, Hypothesis and the one dtype table (``kvproof.formulas.dtypes``, which
imports nothing heavy) are imported (and, lazily, ``kvproof.sim`` to size the tight pools of
:func:`geometries_with_requests`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from ..formulas.dtypes import ELEMENT_BYTES

__all__ = [
    "DTYPES",
    "FAMILIES",
    "LAYOUTS",
    "SPEC_CLASSES",
    "attention_fields",
    "block_sizes",
    "chunked_local_model",
    "dense_model",
    "dtype_names",
    "engine_settings",
    "geometries",
    "geometries_with_requests",
    "glm_like_model",
    "kernel_block_sizes",
    "mamba_hybrid_model",
    "mamba_state",
    "mixed_model",
    "mla_model",
    "simulate_blocks",
    "sliding_window_model",
    "special_model",
]

#: The canonical dtype names of the geometry format (what ``dtype_names`` draws, aliases resolved)
#: and their sizes in bytes, from the one dtype table.
DTYPES: dict[str, int] = {name: ELEMENT_BYTES[name] for name in ("bfloat16", "float16", "float32", "uint8", "float8_e4m3fn")}
#: The KV cache layouts of ``vllm/v1/kv_cache_layout.py``.
LAYOUTS: tuple[str, ...] = ("LBNHC", "LBHNC", "LHBNC", "BLHNC", "BLNHC", "BHLNC")
#: The model families :func:`geometries` draws from (names of the ``*_model`` strategies).
FAMILIES: tuple[str, ...] = (
    "dense", "sliding_window", "chunked_local", "mla", "mamba_hybrid", "glm_like", "mixed", "special",
)
#: The layer spec classes vLLM 0.33.0's planner is handed (``v1/kv_cache_interface.py``); every one is
#: drawn by some family (``EncoderOnlyAttentionSpec`` and ``SinkFullAttentionSpec`` to reach vLLM's
#: refusals of them).
SPEC_CLASSES: tuple[str, ...] = (
    "FullAttentionSpec", "SlidingWindowSpec", "ChunkedLocalAttentionSpec", "MLAAttentionSpec",
    "SlidingWindowMLASpec", "HiddenStateCacheSpec", "RSWASpec", "SinkFullAttentionSpec", "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec", "CircularBufferSpec", "MambaSpec",
)

ATTN = "model.layers.{i}.self_attn.attn"


def dtype_names(*, include_bytes: bool = False) -> st.SearchStrategy[str]:
    """A KV cache dtype name of the geometry format: ``bfloat16``, ``float16``, ``float32`` or the
    alias ``bf16``; with ``include_bytes`` also the one-byte ``uint8``, ``float8_e4m3fn`` and
    ``fp8`` (attention layers rarely use them)."""
    choices = ["bfloat16", "bfloat16", "float16", "bf16", "float32"]
    if include_bytes:
        choices += ["uint8", "float8_e4m3fn", "fp8"]
    return st.sampled_from(choices)


def block_sizes() -> st.SearchStrategy[int]:
    """``cache_config.block_size`` values: mostly 16 to 128, sometimes 8, 48, 96 or 256."""
    return st.one_of(st.sampled_from([16, 16, 32, 64, 128]), st.sampled_from([8, 48, 96, 256]))


def kernel_block_sizes() -> st.SearchStrategy[list]:
    """An attention backend's kernel block sizes: ``[16]``, ``[{"MultipleOf": 16}]``, ``[32, 64]``..."""
    fixed = st.lists(st.sampled_from([16, 32, 64, 128]), min_size=1, max_size=2, unique=True).map(sorted)
    multiple = st.sampled_from([1, 8, 16, 32, 64]).map(lambda n: [{"MultipleOf": n}])
    return st.one_of(multiple, fixed)


def attention_fields(*, dtypes: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[dict]:
    """The shape fields of an attention layer: ``num_kv_heads``, ``head_size``, ``dtype``
    (sometimes ``head_size_v`` and ``max_tp_shards``)."""
    return st.fixed_dictionaries(
        {
            "num_kv_heads": st.sampled_from([1, 2, 4, 8]),
            # the common sizes first (Hypothesis shrinks towards them), then the other sizes real
            # models use (80: Phi-2, StableLM; 96: Phi-3-mini; 112; 192; 72 and 160 too)
            "head_size": st.one_of(st.sampled_from([64, 128, 256]), st.sampled_from([72, 80, 96, 112, 160, 192])),
            "dtype": dtypes if dtypes is not None else dtype_names(),
        },
        optional={
            "head_size_v": st.sampled_from([64, 128]),
            "max_tp_shards": st.sampled_from([1, 2, 8]),
        },
    )


def _entry(name: str, indices: list[int], spec: str, fields: dict) -> dict:
    """One ``layers[]`` entry; consecutive indices are written as a ``range``."""
    entry: dict[str, Any] = {"name": name}
    if len(indices) == 1:
        entry["index"] = indices[0]
    elif indices == list(range(indices[0], indices[-1] + 1)):
        entry["range"] = [indices[0], indices[-1] + 1]
    else:
        entry["indices"] = list(indices)
    entry["spec"] = spec
    entry.update(fields)
    return entry


@st.composite
def _pattern(draw, kinds: list[str], *, min_layers: int = 2, max_layers: int = 12) -> dict[str, list[int]]:
    """Assign each layer index a kind, every kind at least once: ``{kind: [indices]}``."""
    n = draw(st.integers(max(min_layers, len(kinds)), max(max_layers, len(kinds))))
    style = draw(st.sampled_from(["periodic", "random"]))
    if style == "periodic":  # e.g. 5 local : 1 global, as real hybrids do
        period = draw(st.integers(len(kinds), max(len(kinds), 6)))
        order = kinds + draw(st.lists(st.sampled_from(kinds), min_size=period - len(kinds),
                                      max_size=period - len(kinds)))
        order = draw(st.permutations(order))
        assignment = [order[i % period] for i in range(n)]
    else:
        assignment = draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n))
    for j, kind in enumerate(kinds):  # every kind present
        if kind not in assignment:
            assignment[j] = kind
    out: dict[str, list[int]] = {k: [] for k in kinds}
    for i, kind in enumerate(assignment):
        out[kind].append(i)
    return {k: v for k, v in out.items() if v}


# --- model families ----------------------------------------------------------------------------------

@st.composite
def dense_model(draw, *, max_layers: int = 12) -> dict:
    """Full-attention layers (``FullAttentionSpec``); sometimes two kinds of heads (one
    ``UniformTypeKVCacheSpecs`` group), a non-causal layer or a hidden-state layer."""
    n = draw(st.integers(1, max_layers))
    fields = draw(attention_fields())
    layers = [_entry(ATTN, list(range(n)), "FullAttentionSpec", fields)]
    extra = draw(st.sampled_from(["none", "none", "other_heads", "hidden_state", "non_causal"]))
    if extra == "other_heads":
        layers.append(_entry("model.layers.{i}.cross_heads.attn", [n], "FullAttentionSpec",
                             draw(attention_fields())))
    elif extra == "hidden_state":
        layers.append({"name": "model.hidden_states_cache", "spec": "HiddenStateCacheSpec",
                       "num_kv_heads": 1, "head_size": draw(st.sampled_from([512, 1024])),
                       "dtype": "bfloat16"})
    elif extra == "non_causal":
        layers[0]["non_causal"] = True
    return {"layers": layers}


@st.composite
def sliding_window_model(draw, *, max_layers: int = 12) -> dict:
    """Sliding-window layers (``SlidingWindowSpec``), alone or beside full attention (the HMA
    keeps them apart; with the hybrid manager off they are promoted to full attention)."""
    with_full = draw(st.booleans())
    kinds = ["swa", "full"] if with_full else ["swa"]
    pattern = draw(_pattern(kinds, min_layers=1, max_layers=max_layers))
    fields = draw(attention_fields())
    window = draw(st.sampled_from([64, 128, 512, 1024, 4096]))
    layers = [_entry(ATTN, pattern["swa"], "SlidingWindowSpec", {**fields, "sliding_window": window})]
    if "full" in pattern:
        full_fields = fields if draw(st.booleans()) else draw(attention_fields())
        layers.append(_entry(ATTN, pattern["full"], "FullAttentionSpec", full_fields))
    if draw(st.integers(0, 5)) == 0:  # a second window: two SWA groups
        last = max(i for v in pattern.values() for i in v) + 1
        layers.append(_entry(ATTN, [last], "SlidingWindowSpec",
                             {**fields, "sliding_window": draw(st.sampled_from([32, 256, 2048]))}))
    return {"layers": layers}


@st.composite
def chunked_local_model(draw, *, max_layers: int = 12) -> dict:
    """Chunked local attention (``ChunkedLocalAttentionSpec``, Llama-4 style) beside full attention."""
    pattern = draw(_pattern(["local", "full"], max_layers=max_layers))
    fields = draw(attention_fields())
    chunk = draw(st.sampled_from([256, 1024, 8192]))
    return {"layers": [
        _entry(ATTN, pattern["local"], "ChunkedLocalAttentionSpec", {**fields, "attention_chunk_size": chunk}),
        _entry(ATTN, pattern["full"], "FullAttentionSpec", fields),
    ]}


@st.composite
def mla_model(draw, *, max_layers: int = 12) -> dict:
    """MLA layers (``MLAAttentionSpec``, one latent head), optionally with a sparse indexer cache
    (``cache_role: indexer``, ``tokens_per_state`` > 1 for a kpool-compressed indexer) and a
    ``CircularBufferSpec`` tail ring per indexer."""
    n = draw(st.integers(1, max_layers))
    latent = draw(st.sampled_from([512, 576]))
    layers = []
    indexer = draw(st.sampled_from(["none", "none", "indexer", "indexer_ring"]))
    if indexer != "none":
        tps = draw(st.sampled_from([1, 2, 4]))
        fields: dict[str, Any] = {"num_kv_heads": 1, "head_size": draw(st.sampled_from([132, 128])),
                                  "dtype": "uint8", "max_tp_shards": 1, "cache_role": "indexer"}
        if tps > 1:
            fields["tokens_per_state"] = tps
        if draw(st.booleans()):
            fields["block_stride_alignment"] = {"MultipleOf": draw(st.sampled_from([16, 64, 256]))}
        layers.append(_entry("model.layers.{i}.self_attn.indexer.k_cache", list(range(n)), "MLAAttentionSpec",
                             fields))
        if indexer == "indexer_ring":
            layers.append(_entry("model.layers.{i}.self_attn.indexer.tail_cache", list(range(n)),
                                 "CircularBufferSpec",
                                 {"block_size": draw(st.sampled_from([4, 8])), "num_kv_heads": 2,
                                  "head_size": 128, "head_size_v": 0, "dtype": "bfloat16",
                                  "dcp_sharded": False}))
    mla: dict[str, Any] = {"num_kv_heads": 1, "head_size": latent, "dtype": draw(st.sampled_from(["bfloat16", "fp8"])),
                           "max_tp_shards": 1}
    if indexer != "none":
        mla["is_index_group_leader"] = True
    layers.append(_entry(ATTN, list(range(n)), "MLAAttentionSpec", mla))
    out: dict[str, Any] = {"layers": layers}
    if indexer != "none" and draw(st.booleans()):
        out["supported_kv_cache_layouts"] = ["BLHNC"]
    return out


@st.composite
def mamba_state(draw) -> dict:
    """A ``MambaSpec`` layer's own fields: state ``shapes``/``dtypes``, ``mamba_type``, and the
    prefill checkpoint fields (Mamba2-like c = 1, KDA-like c = 1 with alignment 16, or none)."""
    conv = [draw(st.sampled_from([2, 3])), draw(st.sampled_from([64, 256, 1024]))]
    ssm = [draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([16, 64])), draw(st.sampled_from([16, 64, 128]))]
    ssm_dtype = draw(st.sampled_from(["bfloat16", "float32"]))
    fields: dict[str, Any] = {"shapes": [conv, ssm], "dtypes": ["bfloat16", ssm_dtype],
                              "mamba_type": draw(st.sampled_from(["MAMBA2", "GDN_ATTN", "MAMBA1"]))}
    # the checkpoint a layer of that type gets in vLLM 0.33.0 (CK004): Mamba2 alignment 1,
    # KDA (a GDN type) FlashKDA's 16, Mamba1 none
    checkpoint = draw(st.sampled_from({"MAMBA2": ["mamba2", "none"], "GDN_ATTN": ["kda_flash", "none"],
                                       "MAMBA1": ["none"]}[fields["mamba_type"]]))
    if checkpoint == "mamba2":
        fields.update(num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=1)
    elif checkpoint == "kda_flash":
        fields.update(num_prefill_checkpoint_blocks=1, prefill_checkpoint_alignment=16)
    return fields


@st.composite
def mamba_hybrid_model(draw, *, max_layers: int = 12) -> dict:
    """Mamba layers (``MambaSpec``) with or without full-attention layers: align or none cache
    mode (through prefix caching), speculative blocks, checkpoint blocks, the platform's hybrid
    block-size alignment or a hand-given ``mamba_page_size_padded``."""
    with_attention = draw(st.sampled_from([True, True, True, False]))
    kinds = ["mamba", "full"] if with_attention else ["mamba"]
    pattern = draw(_pattern(kinds, min_layers=1, max_layers=max_layers))
    state = draw(mamba_state())
    layers = [_entry("model.layers.{i}.mixer", pattern["mamba"], "MambaSpec", state)]
    out: dict[str, Any] = {"layers": layers}
    if with_attention:
        fields = draw(attention_fields())
        layers.append(_entry(ATTN, pattern["full"], "FullAttentionSpec", fields))
        if draw(st.sampled_from([True, True, False])):
            out["platform_alignment"] = {
                "use_mla": False,
                "num_kv_heads": fields["num_kv_heads"],
                "head_size": fields["head_size"],
                "model_dtype": {"bf16": "bfloat16"}.get(fields["dtype"], fields["dtype"]),
                "backend_kernel_block_sizes": draw(kernel_block_sizes()),
                "mamba_prefill_checkpoint_alignment": state.get("prefill_checkpoint_alignment"),
            }
            if draw(st.integers(0, 3)) == 0:
                out["platform_alignment"]["other_backend_kernel_block_sizes"] = [draw(kernel_block_sizes())]
    if draw(st.integers(0, 3)) == 0:
        out["num_speculative_tokens"] = draw(st.integers(1, 3))
        if draw(st.integers(0, 3)) == 0:
            out["use_replayssm"] = True  # num_speculative_blocks 0 (mamba/abstract.py:87-90)
    if draw(st.integers(0, 4)) == 0:
        out["mamba_cache_mode"] = draw(st.sampled_from(["none", "align"]))
    if "platform_alignment" not in out and draw(st.integers(0, 5)) == 0:
        # --mamba-block-size (refused without prefix caching unless it is max_model_len,
        # config/vllm.py:3441-3452) and a hand-given padded Mamba page (refused below the state size).
        out["mamba_block_size"] = draw(st.sampled_from([16, 64, 256, 1024]))
    if draw(st.integers(0, 7)) == 0:
        out["mamba_page_size_padded"] = draw(st.sampled_from([1 << 18, 1 << 20, 1 << 22, 3 << 20]))
    return out


@st.composite
def glm_like_model(draw, *, max_layers: int = 12) -> dict:
    """A GLM-5.3-Flash-like hybrid, scaled down: KDA state layers (``MambaSpec``, GDN), and MLA
    layers each with a kpool indexer (``tokens_per_state`` 4) and a 4-token tail ring; the kpool
    tail backend declares BLHNC, so the packed (block-outermost) grouping runs."""
    pattern = draw(_pattern(["kda", "mla"], min_layers=2, max_layers=max_layers))
    kpool = draw(st.sampled_from([2, 4]))
    heads = draw(st.sampled_from([1, 2, 4]))
    layers = [
        _entry("model.layers.{i}.linear_attn", pattern["kda"], "MambaSpec",
               {"shapes": [[3, 384 * heads], [heads, 128, 128]], "dtypes": ["bfloat16", "float32"],
                "mamba_type": "GDN_ATTN", "num_prefill_checkpoint_blocks": 1, "prefill_checkpoint_alignment": 16}),
        _entry("model.layers.{i}.self_attn.indexer.k_cache", pattern["mla"], "MLAAttentionSpec",
               {"num_kv_heads": 1, "head_size": 132, "dtype": "uint8", "max_tp_shards": 1,
                "cache_role": "indexer", "tokens_per_state": kpool,
                "block_stride_alignment": {"MultipleOf": 64 * kpool}}),
        _entry("model.layers.{i}.self_attn.indexer.tail_cache", pattern["mla"], "CircularBufferSpec",
               {"block_size": kpool, "num_kv_heads": 2, "head_size": 128, "head_size_v": 0,
                "dtype": "bfloat16", "dcp_sharded": False}),
        _entry(ATTN, pattern["mla"], "MLAAttentionSpec",
               {"num_kv_heads": 1, "head_size": 512, "dtype": "bfloat16", "max_tp_shards": 1,
                "is_index_group_leader": True, "block_stride_alignment": {"MultipleOf": 1}}),
    ]
    out: dict[str, Any] = {"layers": layers,
                           "supported_kv_cache_layouts": draw(st.sampled_from([["BLHNC"], ["BLHNC", "BLNHC"]]))}
    if draw(st.sampled_from([True, True, False])):
        out["platform_alignment"] = {
            "use_mla": True, "num_kv_heads": 1, "head_size": 512, "model_dtype": "bfloat16",
            "backend_kernel_block_sizes": [32 * kpool, 64 * kpool],
            "other_backend_kernel_block_sizes": [[{"MultipleOf": 1}], [{"MultipleOf": 64}]],
            "mamba_prefill_checkpoint_alignment": None,
        }
    if draw(st.booleans()):
        out["views"] = {"num_blocks": 3, "backends": [
            {"match": "indexer.k_cache", "kernel_block_sizes": [32 * kpool, 64 * kpool]},
            {"match": "indexer.tail_cache", "kernel_block_sizes": [{"MultipleOf": 1}]},
            {"match": "self_attn.attn", "kernel_block_sizes": [{"MultipleOf": 64}]}]}
    return out


_MIXED_KINDS = ("full", "swa", "local", "mla", "mamba", "ring")


@st.composite
def mixed_model(draw, *, max_layers: int = 12) -> dict:
    """Any mix of layer kinds (full, sliding window, chunked local, MLA, Mamba, ring). Many mixes
    are refused by vLLM (pages that cannot be unified, a window and a chunk in one group, ...)."""
    kinds = draw(st.lists(st.sampled_from(_MIXED_KINDS), min_size=2, max_size=4, unique=True))
    pattern = draw(_pattern(kinds, max_layers=max_layers))
    fields = draw(attention_fields())
    layers = []
    for kind, indices in pattern.items():
        if kind == "full":
            layers.append(_entry(ATTN, indices, "FullAttentionSpec", fields))
        elif kind == "swa":
            layers.append(_entry(ATTN, indices, "SlidingWindowSpec",
                                 {**fields, "sliding_window": draw(st.sampled_from([128, 1024]))}))
        elif kind == "local":
            layers.append(_entry(ATTN, indices, "ChunkedLocalAttentionSpec",
                                 {**fields, "attention_chunk_size": draw(st.sampled_from([512, 2048]))}))
        elif kind == "mla":
            layers.append(_entry("model.layers.{i}.mla.attn", indices, "MLAAttentionSpec",
                                 {"num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16"}))
        elif kind == "mamba":
            layers.append(_entry("model.layers.{i}.mixer", indices, "MambaSpec", draw(mamba_state())))
        else:
            layers.append(_entry("model.layers.{i}.ring", indices, "CircularBufferSpec",
                                 {"block_size": draw(st.sampled_from([4, 16])), "num_kv_heads": 2,
                                  "head_size": 128, "dtype": "bfloat16", "dcp_sharded": False}))
    return {"layers": layers}


_SPECIAL_KINDS = ("rswa", "rswa", "swa_mla", "swa_mla", "cross", "cross", "hidden_state", "sink", "encoder_only")


@st.composite
def special_model(draw, *, max_layers: int = 12) -> dict:
    """The rarer spec classes, each beside full attention (or MLA): ``RSWASpec`` (reference sliding
    window), ``SlidingWindowMLASpec`` beside ``MLAAttentionSpec``, ``CrossAttentionSpec`` (an
    encoder-decoder's cross attention, sized by the encoder budget), ``HiddenStateCacheSpec``,
    ``SinkFullAttentionSpec`` (vLLM 0.33.0 cannot build its manager: a refusal) and
    ``EncoderOnlyAttentionSpec`` (not in vLLM's spec registry: a refusal)."""
    kind = draw(st.sampled_from(_SPECIAL_KINDS))
    if kind == "swa_mla":
        pattern = draw(_pattern(["mla", "swa"], max_layers=max_layers))
        mla = {"num_kv_heads": 1, "head_size": draw(st.sampled_from([512, 576])),
               "dtype": draw(st.sampled_from(["bfloat16", "fp8"]))}
        return {"layers": [
            _entry(ATTN, pattern["mla"], "MLAAttentionSpec", mla),
            _entry(ATTN, pattern["swa"], "SlidingWindowMLASpec",
                   {**mla, "sliding_window": draw(st.sampled_from([128, 512, 2048]))}),
        ]}
    with_full = kind in ("cross", "hidden_state", "encoder_only") or draw(st.booleans())
    pattern = draw(_pattern(["full", kind] if with_full else [kind], min_layers=1, max_layers=max_layers))
    fields = draw(attention_fields())
    own = fields if draw(st.booleans()) else draw(attention_fields())
    layers = []
    if "full" in pattern:
        layers.append(_entry(ATTN, pattern["full"], "FullAttentionSpec", fields))
    if kind == "rswa":
        layers.append(_entry("model.layers.{i}.self_attn.rswa", pattern[kind], "RSWASpec",
                             {**own, "rswa_window": draw(st.sampled_from([64, 256, 1024]))}))
    elif kind == "sink":
        layers.append(_entry("model.layers.{i}.self_attn.sink", pattern[kind], "SinkFullAttentionSpec",
                             {**own, "sink_len": draw(st.sampled_from([4, 16, 32]))}))
    elif kind == "cross":
        layers.append(_entry("model.layers.{i}.encoder_attn.attn", pattern[kind], "CrossAttentionSpec", own))
    elif kind == "encoder_only":
        layers.append(_entry("encoder.layers.{i}.attn", pattern[kind], "EncoderOnlyAttentionSpec", own))
    else:  # hidden_state
        layers.append({"name": "model.hidden_states_cache", "spec": "HiddenStateCacheSpec", "num_kv_heads": 1,
                       "head_size": draw(st.sampled_from([512, 1024, 4096])), "dtype": "bfloat16"})
    return {"layers": layers}


_FAMILY_STRATEGIES = {
    "dense": dense_model,
    "sliding_window": sliding_window_model,
    "chunked_local": chunked_local_model,
    "mla": mla_model,
    "mamba_hybrid": mamba_hybrid_model,
    "glm_like": glm_like_model,
    "mixed": mixed_model,
    "special": special_model,
}


# --- engine settings ---------------------------------------------------------------------------------

def _dtype_bytes(name: str) -> int:
    # Imported here: kvproof.models.geometry costs about 200 ms of attrs and cattrs imports
    # (python -X importtime), which a user's strategies should not pay at import.
    from ..models.geometry import canonical_dtype

    return ELEMENT_BYTES[canonical_dtype(name)]


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _rough_request_bytes(model: dict, block_size: int, max_model_len: int) -> int:
    """A rough size of one max-length request plus a few blocks: full attention over
    ``max_model_len`` for every attention layer, four states per Mamba layer, and every page at
    least as large as the largest Mamba state (the platform alignment and page unification pad
    to it). Only used to scale the available memory around the real need, so that both
    enough-memory and not-enough-memory geometries come out."""
    mamba_pages = [sum(_prod(s) * _dtype_bytes(d) for s, d in zip(e["shapes"], e["dtypes"]))
                   for e in model["layers"] if e["spec"] == "MambaSpec"]
    max_state = max(mamba_pages, default=0)
    tokens = -(-max_model_len // block_size) * block_size
    per_request = 0
    per_block = 0
    for entry in model["layers"]:
        count = (len(entry["indices"]) if "indices" in entry
                 else entry["range"][1] - entry["range"][0] if "range" in entry else 1)
        if entry["spec"] == "MambaSpec":
            per_request += count * 4 * max_state
            per_block += count * max_state
            continue
        head_v = entry.get("head_size_v", 0 if "MLA" in entry["spec"] or "HiddenState" in entry["spec"]
                           else entry["head_size"])
        per_token = entry["num_kv_heads"] * (entry["head_size"] + head_v) * _dtype_bytes(entry["dtype"])
        per_token //= max(1, entry.get("tokens_per_state", 1))
        page = max(per_token * entry.get("block_size", block_size), max_state)
        if entry["spec"] == "CircularBufferSpec":
            per_request += count * page
        else:
            per_request += count * max(per_token * tokens, page)
        per_block += count * page
    return max(per_request + 4 * per_block, 1)


@st.composite
def engine_settings(draw, model: dict) -> dict:
    """Engine settings for ``model`` (a dict with ``layers``): block size, ``max_model_len``,
    memory (from a fraction to a few dozen max-length requests), prefix caching, layouts,
    ``prefix_match_unit``, speculation, parallelism, pipeline workers, ``num_gpu_blocks_override``,
    retention interval, scheduler budget and async scheduling."""
    out: dict[str, Any] = {}
    block_size = draw(block_sizes())
    if draw(st.integers(0, 7)) > 0:  # usually stated; absent = vLLM's default 16 (or phase 1)
        out["block_size"] = block_size
    else:
        block_size = 16
    max_model_len = draw(st.one_of(st.sampled_from([512, 2048, 4096, 8192, 16384]), st.integers(64, 16384)))
    out["max_model_len"] = max_model_len
    out["enable_prefix_caching"] = draw(st.sampled_from([True, True, False]))
    need = _rough_request_bytes(model, block_size, max_model_len)
    factor = draw(st.sampled_from([0.3, 0.97, 1.1, 1.5, 3, 8, 20, 50]))
    memory = max(1, int(need * factor))
    workers = None
    names = _layer_names(model)
    if len(names) >= 2 and draw(st.integers(0, 7)) == 0:  # two pipeline stages
        cut = draw(st.integers(1, len(names) - 1))
        workers = [names[:cut], names[cut:]]
        out["workers"] = workers
        if draw(st.booleans()):
            memory = [memory, max(1, int(memory * draw(st.sampled_from([0.5, 1, 2]))))]
    if draw(st.integers(0, 9)) == 0:
        out["num_gpu_blocks_override"] = draw(st.integers(1, 4096))
        if draw(st.booleans()):
            memory = None
    if memory is not None:
        out["available_memory_bytes"] = memory
    if draw(st.integers(0, 4)) == 0:
        out["prefix_match_unit"] = draw(st.sampled_from([block_size, max(1, block_size // 2), 8, 16, 3]))
    layout_choice = draw(st.sampled_from(["none", "none", "none", "force", "declare"]))
    if "supported_kv_cache_layouts" not in model:
        if layout_choice == "force":
            out["kv_cache_layout"] = draw(st.sampled_from(LAYOUTS))
        elif layout_choice == "declare":
            out["supported_kv_cache_layouts"] = draw(st.one_of(
                st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=3, unique=True),
                st.lists(st.one_of(st.none(), st.lists(st.sampled_from(LAYOUTS), min_size=1, max_size=3,
                                                       unique=True)), min_size=1, max_size=3)))
    if draw(st.integers(0, 5)) == 0:
        method = draw(st.sampled_from(["eagle", "eagle3", "mtp", "mtp", "ngram", "draft_model", "suffix"]))
        out["speculative"] = {"method": method, "num_speculative_tokens": draw(st.integers(1, 4)),
                              "eagle_block_drop": draw(st.booleans()),
                              "multi_module_mtp": method == "mtp" and draw(st.booleans())}
    if draw(st.integers(0, 5)) == 0:
        out["max_num_batched_tokens"] = draw(st.sampled_from([256, 2048, 8192, 16384]))
    if draw(st.integers(0, 5)) == 0:
        out["async_scheduling"] = draw(st.booleans())
    if draw(st.integers(0, 7)) == 0:
        out["tp"] = draw(st.sampled_from([2, 4]))
        if draw(st.booleans()):
            out["dcp"] = draw(st.sampled_from([2, out["tp"]]))
    if draw(st.integers(0, 7)) == 0:
        out["disable_hybrid_kv_cache_manager"] = True
    if draw(st.integers(0, 7)) == 0:
        out["prefix_cache_retention_interval"] = draw(st.sampled_from([block_size, 2 * block_size, 7, -16]))
    if draw(st.integers(0, 9)) == 0:
        out["layer_order"] = "as_listed"
    if draw(st.integers(0, 11)) == 0:  # the scheduler's budget check (config/scheduler.py:317-336)
        out["max_num_seqs"] = draw(st.sampled_from([1, 64, 256, 1024, 16384]))
    if draw(st.integers(0, 11)) == 0:  # kvproof extension: vLLM's auto-fit of max_model_len
        out["original_max_model_len"] = -1
    if "views" not in model and draw(st.integers(0, 5)) == 0:
        # The drawn backend binds every layer "attn" names but the tail rings: every ring backend of
        # vLLM 0.33.0 accepts any multiple of 1 (KpoolTailBackend, v1/attention/backends/mla/
        # indexer.py:325-327; CompressorBackend; the rest AttentionBackend's default,
        # v1/attention/backend.py:75-79), so no vLLM model splits a ring into kernel blocks (VC001).
        rings = sorted({e["name"].split("{i}")[-1].lstrip(".") for e in model["layers"]
                        if e["spec"] == "CircularBufferSpec" and "attn" in e["name"]})
        out["views"] = {"num_blocks": draw(st.integers(1, 4)), "backends": [
            *({"match": ring, "kernel_block_sizes": [{"MultipleOf": 1}]} for ring in rings),
            {"match": "attn", "kernel_block_sizes": draw(kernel_block_sizes())}]}
    if out.get("speculative", {}).get("method") == "suffix" and out.get("async_scheduling") is True:
        # Suffix drafting runs on the V1 model runner, which refuses explicit async scheduling while
        # VllmConfig is built (config/vllm.py:1651-1680); the conformance oracle does not run that
        # constructor, so the strategies leave async scheduling to its default there.
        del out["async_scheduling"]
    return out


def _entry_indices(entry: dict) -> list[int]:
    if "indices" in entry:
        return list(entry["indices"])
    if "range" in entry:
        return list(range(*entry["range"]))
    if "index" in entry:
        return [entry["index"]]
    return []


def _layer_names(model: dict) -> list[str]:
    names: list[tuple[int, int, str]] = []
    for e, entry in enumerate(model["layers"]):
        if "indices" in entry:
            indices = entry["indices"]
        elif "range" in entry:
            indices = list(range(*entry["range"]))
        elif "index" in entry:
            indices = [entry["index"]]
        else:
            names.append((1 << 30, e, entry["name"]))
            continue
        names.extend((i, e, entry["name"].replace("{i}", str(i))) for i in indices)
    return [n for _, _, n in sorted(names)]


@st.composite
def geometries(draw, *, families: tuple[str, ...] | list[str] | None = None, max_layers: int = 12,
               name: str | None = None) -> dict:
    """A geometry document (``geometry-format.md``): a model drawn from one of ``families``
    (default: all of :data:`FAMILIES`) with at most ``max_layers`` layer indices, plus engine
    settings from :func:`engine_settings`.  ``name`` sets the document's ``name``."""
    chosen = draw(st.sampled_from(list(families or FAMILIES)))
    model = draw(_FAMILY_STRATEGIES[chosen](max_layers=max_layers))
    settings = draw(engine_settings(model))
    speculative = settings.get("speculative")
    if speculative and speculative["method"] in ("eagle", "eagle3", "mtp") and draw(st.booleans()):
        # The drafter's own attention layer (is_draft): its group becomes an EAGLE group.
        template = next((e for e in model["layers"] if e["spec"] in ("FullAttentionSpec", "MLAAttentionSpec")), None)
        if template is not None:
            draft = {k: v for k, v in template.items() if k not in ("range", "indices", "index", "name")}
            last = max((i for e in model["layers"] for i in _entry_indices(e)), default=-1) + 1
            model = {**model, "layers": [*model["layers"], {"name": "model.layers.{i}.draft.attn", "index": last,
                                                          **draft, "is_draft": True}]}
            settings.pop("workers", None)
            if isinstance(settings.get("available_memory_bytes"), list):
                settings["available_memory_bytes"] = settings["available_memory_bytes"][0]
    doc: dict[str, Any] = {"name": name or f"hypothesis:{chosen}"}
    doc.update(model)
    for key, value in settings.items():
        doc.setdefault(key, value)
    if "kv_cache_layout" in doc and "supported_kv_cache_layouts" in doc:
        del doc["kv_cache_layout"]
    return doc


@st.composite
def simulate_blocks(draw, *, max_model_len: int, max_prompt: int = 6_000, max_requests: int = 12,
                    crowded: bool = False) -> dict:
    """A ``simulate`` block (``docs/requests.md``) for a model of ``max_model_len`` tokens: a single
    request (sometimes probed), a workload of up to ``max_requests`` requests with shared prefixes
    and staggered arrivals, or both.  Prompts stay below ``max_model_len`` (a longer one is refused
    by vLLM's input processor before any scheduling).  ``chunk_tokens`` is usually at most
    ``max_model_len``; now and then it is larger, which vLLM's ``SchedulerConfig`` refuses
    (config/scheduler.py:355-360) for the workload.  ``crowded``: always a workload, of at least
    three long requests arriving within a few steps, so that a pool of about one max-length request
    (:func:`geometries_with_requests`) runs out and vLLM preempts."""
    block: dict[str, Any] = {"max_steps": 3_000}
    limit = max(1, min(max_prompt, max_model_len - 2))
    if crowded:
        # Prefill in chunks, so that several long requests are admitted and then outgrow the pool
        # (a whole prompt that does not fit is simply not admitted, which never preempts).
        block["chunk_tokens"] = draw(st.sampled_from([c for c in (16, 64, 100, 256, 512) if 3 * c <= max_model_len]
                                                     or [max(1, max_model_len // 3)]))
    elif draw(st.booleans()):
        chunks = [c for c in (8, 16, 100, 512, 2048, 8192) if c <= max_model_len] or [max_model_len]
        if draw(st.integers(0, 9)) == 0:
            chunks = [max_model_len + 1]  # the start-up refusal of the workload's threshold
        block["chunk_tokens"] = draw(st.sampled_from(chunks))
    single = not crowded and draw(st.booleans())
    if single:
        block["prompt_tokens"] = draw(st.integers(1, limit))
        block["decode_tokens"] = draw(st.integers(0, 24))
        block["prefix_hit_probe"] = draw(st.booleans())
    if not single or draw(st.booleans()):
        prefixes = draw(st.lists(st.sampled_from(["system", "tools", "doc"]), max_size=3, unique=True))
        requests = []
        for i in range(draw(st.integers(3, 6) if crowded else st.integers(1, max_requests))):
            decode = draw(st.integers(1, 32))
            if crowded:  # each at least half the pool: two of them cannot both stay
                top = max(1, max_model_len - decode - 1)
                prompt = draw(st.integers(max(1, top * 3 // 5), top))
            else:
                prompt = draw(st.integers(1, max(1, min(limit, max_model_len - decode - 1))))
            request: dict[str, Any] = {"id": f"r{i}", "arrival_step": draw(st.integers(0, 3 if crowded else 20)),
                                       "prompt_tokens": prompt, "decode_tokens": decode}
            if prefixes and draw(st.integers(0, 3 if crowded else 1)) == 0:
                request["shared_prefix"] = draw(st.sampled_from(prefixes))
                request["shared_prefix_tokens"] = draw(st.integers(0, prompt))
            requests.append(request)
        block["requests"] = requests
    return block


def one_request_pool_blocks(doc: dict) -> int | None:
    """The smallest ``num_gpu_blocks_override`` with which ``doc`` still starts: the pool blocks one
    max-length request needs on its hungriest worker plus the null block (vLLM's start-up memory
    check, ``v1/core/kv_cache_planning.py:1533-1558``), from kvproof's own plan of ``doc`` with ample
    memory; None when that plan is refused.  Only sizes generated inputs: the comparison with vLLM
    judges the result (a wrong size shows up as a start-up refusal on one side)."""
    from ..sim import simulate_document  # lazily: only this helper needs the simulator

    probe = {k: v for k, v in doc.items() if k not in ("num_gpu_blocks_override", "simulate")}
    probe["available_memory_bytes"] = 1 << 40
    result = simulate_document(probe)
    if result.get("status") != "ok" or not result.get("workers"):
        return None
    need = max((-(-w["memory_needed_for_one_max_len_request_bytes"] // w["bytes_per_block"])
                for w in result["workers"] if w["bytes_per_block"]), default=None)
    return None if need is None else need + 1


@st.composite
def geometries_with_requests(draw, *, families: tuple[str, ...] | list[str] | None = None, max_layers: int = 8,
                             tight_pools: float = 0.6) -> dict:
    """:func:`geometries` with a :func:`simulate_blocks` block.  With probability ``tight_pools``
    (when the geometry starts at all) the pool is tight: a ``num_gpu_blocks_override`` of about one
    max-length request (:func:`one_request_pool_blocks`, plus at most half of it again) and a
    crowded workload, so that vLLM preempts; otherwise sometimes a small random pool (eviction) or
    the drawn memory."""
    doc = draw(geometries(families=families, max_layers=max_layers))
    tight = None
    if draw(st.floats(0, 1, exclude_max=True)) < tight_pools:
        tight = one_request_pool_blocks(doc)
    if tight is not None:
        doc["num_gpu_blocks_override"] = tight + draw(st.sampled_from([0, 0, 1, 2, max(1, tight // 8), tight // 2]))
        doc.pop("available_memory_bytes", None)
    elif draw(st.booleans()):
        doc["num_gpu_blocks_override"] = draw(st.integers(8, 4_000))
        doc.pop("available_memory_bytes", None)
    if draw(st.booleans()):
        seqs = draw(st.sampled_from([2, 4, 16] if tight is not None else [1, 2, 4, 16]))  # one at a time never preempts
        doc["max_num_seqs"] = seqs
        doc["max_num_batched_tokens"] = max(seqs, doc.get("max_num_batched_tokens", seqs))
    doc["simulate"] = draw(simulate_blocks(max_model_len=doc["max_model_len"], crowded=tight is not None))
    return doc
