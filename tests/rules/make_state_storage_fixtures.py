"""Write the fixtures of the storage-policy rules (ST) under tests/rules/ST*/ (run:
python tests/rules/make_state_storage_fixtures.py; it rewrites only those folders).

Each case is an edit of a bundled example profile: ``examples/hybrid-mamba-align`` (mamba_align,
full_state) or one of the ``examples/unmodeled-*`` ReplaySSM / RecoverSSM profiles. The expected
reports (``EXPECTED``) are written by hand from each rule's text and the case's edit, never from the
checker's output; ``--check`` runs the checker and compares it with them (and with the files).
ST028 judges a profile being sized or replayed: its cases are named ``replay_*`` and are checked
with the replay role, as ``kvproof plan`` checks its profile.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from make_fixtures import DELETE, EXAMPLES, HERE, _edited, _write_doc

ALIGN = json.loads((EXAMPLES / "hybrid-mamba-align" / "profile.json").read_text())
FLASHINFER = json.loads((EXAMPLES / "unmodeled-flashinfer-replayssm" / "profile.json").read_text())
TRITON = json.loads((EXAMPLES / "unmodeled-triton-replayssm" / "profile.json").read_text())
KDA = json.loads((EXAMPLES / "unmodeled-kda-recoverssm" / "profile.json").read_text())
R = ["resources"]
MC = R + ["mamba_cache"]
RING = MC + ["replay_ring"]
MEM = R + ["runtime_memory"]


def cases():
    """(rule, case, base, edits)."""
    return [
        ("ST001", "unknown_policy", ALIGN, [(R + ["state_storage"], "paged_state")]),
        ("ST001", "good_full_state", ALIGN, []),
        # an unknown policy on the timing-only layout: nothing but ST001 judges it
        ("ST001", "unknown_policy_unmodeled", KDA, [(R + ["state_storage"], "paged_state")]),
        ("ST002", "missing_policy", ALIGN, [(R + ["state_storage"], DELETE)]),
        ("ST002", "unmodeled_missing_policy", KDA, [(R + ["state_storage"], DELETE)]),
        ("ST002", "good_recoverssm_unmodeled", KDA, []),
        ("ST003", "replayssm_on_mamba_align", ALIGN, [(R + ["state_storage"], "triton_replayssm"),
                                                      (MC + ["num_speculative_tokens"], 0),
                                                      (MC + ["num_speculative_blocks"], 0),
                                                      (R + ["cache_groups", 0, "blocks_per_request"], 1)]),
        # a well-formed Triton ReplaySSM geometry (no drafts, its ring) is still not this layout's
        ("ST003", "triton_replayssm_with_ring_on_mamba_align", ALIGN, [
            (R + ["state_storage"], "triton_replayssm"), (MC + ["num_speculative_tokens"], 0),
            (MC + ["num_speculative_blocks"], 0), (R + ["cache_groups", 0, "blocks_per_request"], 1),
            (MC + ["replay_ring"], {"buffer_len": 16, "length_tokens": 16, "bytes_per_token": 64, "bytes": 1024})]),
        ("ST003", "good_full_state_unmodeled", KDA, [(R + ["state_storage"], "full_state"),
                                                     (MC + ["num_speculative_blocks"], 2),
                                                     (R + ["state_cache", "num_speculative_states"], 2)]),
        ("ST004", "policy_on_grouped", ALIGN, [(R + ["cache_layout"], "grouped")]),
        ("ST004", "good_grouped_without_policy", ALIGN, [(R + ["cache_layout"], "grouped"),
                                                         (R + ["state_storage"], DELETE), (MC, DELETE)]),
        ("ST005", "mamba_align_without_mamba_cache", ALIGN, [(MC, DELETE)]),
        ("ST006", "mamba_align_without_prefix_caching", ALIGN, [(MEM + ["mamba_cache_mode"], "none"),
                                                                 (MEM + ["enable_prefix_caching"], False)]),
        ("ST007", "unmodeled_with_groups", ALIGN, [(R + ["cache_layout"], "unmodeled")]),
        ("ST008", "zero_page", FLASHINFER, [(MC + ["page_size_bytes"], 0)]),
        ("ST008", "negative_depth", KDA, [(MC + ["num_speculative_tokens"], -1)]),
        ("ST009", "fractional_hash_unit", ALIGN, [(MC + ["hash_block_size_tokens"], 3),
                                                   (MEM + ["hash_block_size_tokens"], 3)]),
        ("ST010", "fractional_pool_pages", FLASHINFER, [(MEM + ["kv_cache_bytes"], 4456448 * 4000 + 4096)]),
        ("ST011", "group_block_differs", ALIGN, [(MC + ["block_size_tokens"], 16)]),
        ("ST012", "state_blocks_differ", ALIGN, [(R + ["cache_groups", 0, "blocks_per_request"], 2)]),
        ("ST013", "hash_unit_differs", ALIGN, [(MC + ["hash_block_size_tokens"], 4)]),
        ("ST014", "full_state_without_speculative_states", ALIGN, [(MC + ["num_speculative_blocks"], 0),
                                                                    (R + ["cache_groups", 0, "blocks_per_request"], 1)]),
        ("ST015", "replayssm_speculative_blocks", FLASHINFER, [(MC + ["num_speculative_blocks"], 3)]),
        ("ST015", "triton_speculative_block", TRITON, [(MC + ["num_speculative_blocks"], 1),
                                                       (R + ["state_cache", "num_speculative_states"], 1)]),
        ("ST015", "good_replayssm_no_speculative_blocks", FLASHINFER, []),
        ("ST016", "replayssm_without_ring", TRITON, [(RING, DELETE)]),
        ("ST016", "good_triton_ring", TRITON, []),
        ("ST017", "recoverssm_with_ring", KDA, [(MC + ["replay_ring"], FLASHINFER["resources"]["mamba_cache"]["replay_ring"])]),
        # a ring of the window's length (what ST018 asks of a non-FlashInfer ring) is still no RecoverSSM state
        ("ST017", "recoverssm_with_a_window_ring", KDA, [(MC + ["replay_ring"], TRITON["resources"]["mamba_cache"]["replay_ring"])]),
        ("ST018", "flashinfer_ring_without_drafts", FLASHINFER, [(RING + ["length_tokens"], 16),
                                                                  (RING + ["bytes"], 16 * 454656)]),
        ("ST018", "triton_ring_with_flashinfer_length", TRITON, [(RING + ["length_tokens"], 17),
                                                                  (RING + ["bytes"], 17 * 454656)]),
        ("ST018", "good_flashinfer_ring_depth_3", FLASHINFER, []),
        ("ST019", "ring_bytes_differ", FLASHINFER, [(RING + ["bytes"], 454656)]),
        ("ST020", "flashinfer_buffer_over_16", FLASHINFER, [(RING + ["buffer_len"], 17), (RING + ["length_tokens"], 21),
                                                             (RING + ["bytes"], 21 * 454656)]),
        ("ST021", "flashinfer_buffer_below_query", FLASHINFER, [(RING + ["buffer_len"], 3), (RING + ["length_tokens"], 7),
                                                                 (RING + ["bytes"], 7 * 454656)]),
        ("ST021", "good_buffer_equals_query", FLASHINFER, [(RING + ["buffer_len"], 4), (RING + ["length_tokens"], 8),
                                                            (RING + ["bytes"], 8 * 454656)]),
        ("ST022", "triton_speculative", TRITON, [(MC + ["num_speculative_tokens"], 1)]),
        ("ST023", "flashinfer_prefix_caching", FLASHINFER, [(MC + ["num_speculative_tokens"], 0),
                                                             (RING + ["length_tokens"], 17), (RING + ["bytes"], 17 * 454656),
                                                             (MEM + ["mamba_cache_mode"], "align"),
                                                             (MEM + ["enable_prefix_caching"], True)]),
        ("ST023", "good_triton_prefix_caching", TRITON, [(MEM + ["mamba_cache_mode"], "align"),
                                                         (MEM + ["enable_prefix_caching"], True)]),
        ("ST024", "flashinfer_speculative_prefix_caching", FLASHINFER, [(MEM + ["mamba_cache_mode"], "align"),
                                                                         (MEM + ["enable_prefix_caching"], True)]),
        ("ST025", "recoverssm_without_drafts", KDA, [(MC + ["num_speculative_tokens"], 0)]),
        ("ST026", "manual_depth_differs", ALIGN, [(R + ["state_cache"], {"num_speculative_states": 3})]),
        ("ST026", "good_manual_depth", ALIGN, [(R + ["state_cache"], {"num_speculative_states": 2, "prefix_match_unit": 2,
                                                                      "block_size_tokens": 8})]),
        ("ST027", "manual_hash_unit_differs", ALIGN, [(R + ["state_cache"], {"prefix_match_unit": 4})]),
        ("ST027", "manual_block_differs", ALIGN, [(R + ["state_cache"], {"block_size_tokens": 16})]),
        ("ST028", "replay_unmodeled", FLASHINFER, []),
        ("ST028", "good_replay_mamba_align", ALIGN, []),
    ]


#: Each case's complete expected report, (rule, path, message) per line, derived by hand from the
#: rules' texts and the case's edit (never written from the checker's output; ``--check`` compares
#: the checker with them). A case missing here expects no diagnostic.
EXPECTED: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    ('ST001', 'unknown_policy'): [
        ('ST001', '$.resources.state_storage',
         "state_storage 'paged_state' is not a storage policy: 'full_state', 'triton_replayssm', 'flashinfer_replayssm' or 'kda_recoverssm'"),
    ],
    ('ST001', 'unknown_policy_unmodeled'): [
        ('ST001', '$.resources.state_storage',
         "state_storage 'paged_state' is not a storage policy: 'full_state', 'triton_replayssm', 'flashinfer_replayssm' or 'kda_recoverssm'"),
    ],
    ('ST002', 'missing_policy'): [
        ('ST002', '$.resources.state_storage',
         'cache_layout mamba_align requires a state_storage policy'),
    ],
    ('ST002', 'unmodeled_missing_policy'): [
        ('ST002', '$.resources.state_storage',
         'cache_layout unmodeled requires a state_storage policy'),
    ],
    ('ST003', 'replayssm_on_mamba_align'): [
        ('ST003', '$.resources.state_storage',
         'cache_layout mamba_align requires state_storage: full_state; ReplaySSM and RecoverSSM profiles use the unmodeled layout (timing queries only)'),
        ('ST016', '$.resources.mamba_cache.replay_ring',
         'state_storage triton_replayssm requires mamba_cache.replay_ring (the x, dt and B replay rings)'),
    ],
    ('ST003', 'triton_replayssm_with_ring_on_mamba_align'): [
        ('ST003', '$.resources.state_storage',
         'cache_layout mamba_align requires state_storage: full_state; ReplaySSM and RecoverSSM profiles use the unmodeled layout (timing queries only)'),
    ],
    ('ST004', 'policy_on_grouped'): [
        ('ST004', '$.resources.state_storage',
         'state_storage belongs to the mamba_align and unmodeled layouts'),
        ('ST004', '$.resources.mamba_cache',
         'mamba_cache belongs to the mamba_align and unmodeled layouts'),
    ],
    ('ST005', 'mamba_align_without_mamba_cache'): [
        ('ST005', '$.resources.cache_layout',
         'cache_layout mamba_align requires mamba_cache (the observed geometry) and runtime_memory'),
    ],
    ('ST006', 'mamba_align_without_prefix_caching'): [
        ('ST006', '$.resources.runtime_memory.mamba_cache_mode',
         "cache_layout mamba_align requires enable_prefix_caching true and mamba_cache_mode 'align'"),
    ],
    ('ST007', 'unmodeled_with_groups'): [
        ('ST007', '$.resources.cache_layout',
         'cache_layout unmodeled carries no cache geometry: cache_groups and kv_bytes_per_token must be absent'),
    ],
    ('ST008', 'negative_depth'): [
        ('ST008', '$.resources.mamba_cache.num_speculative_tokens',
         'mamba_cache.num_speculative_tokens must be 0 or more'),
    ],
    ('ST008', 'zero_page'): [
        ('ST008', '$.resources.mamba_cache.page_size_bytes',
         'mamba_cache.page_size_bytes must be positive'),
    ],
    ('ST009', 'fractional_hash_unit'): [
        ('ST009', '$.resources.mamba_cache.hash_block_size_tokens',
         'Invalid prefix_match_unit=3; a state page of 8 tokens is not a whole number of hash units (fractional pages: prefix-cacheable KV cache group block sizes must be divisible by prefix_match_unit)'),
    ],
    ('ST010', 'fractional_pool_pages'): [
        ('ST010', '$.resources.runtime_memory.kv_cache_bytes',
         'kv_cache_bytes must be a whole number of mamba_cache pages of 4456448 bytes (fractional pages)'),
    ],
    ('ST011', 'group_block_differs'): [
        ('ST011', '$.resources.cache_groups[0].block_size_tokens',
         'cache group runtime_group_0 block_size_tokens 8 differs from the observed mamba_cache.block_size_tokens 16'),
        ('ST011', '$.resources.cache_groups[1].block_size_tokens',
         'cache group runtime_group_1 block_size_tokens 8 differs from the observed mamba_cache.block_size_tokens 16'),
    ],
    ('ST012', 'state_blocks_differ'): [
        ('ST012', '$.resources.cache_groups[0].blocks_per_request',
         'state cache group runtime_group_0 holds blocks_per_request 2, not 1 + mamba_cache.num_speculative_blocks (3)'),
    ],
    ('ST013', 'hash_unit_differs'): [
        ('ST013', '$.resources.mamba_cache.hash_block_size_tokens',
         'mamba_cache.hash_block_size_tokens 4 differs from runtime_memory.hash_block_size_tokens 2'),
    ],
    ('ST014', 'full_state_without_speculative_states'): [
        ('ST014', '$.resources.mamba_cache.num_speculative_blocks',
         'state_storage full_state keeps one state per draft token: mamba_cache.num_speculative_blocks 0 must equal num_speculative_tokens 2'),
    ],
    ('ST015', 'replayssm_speculative_blocks'): [
        ('ST015', '$.resources.mamba_cache.num_speculative_blocks',
         'ReplaySSM sets separate speculative blocks to zero: mamba_cache.num_speculative_blocks must be 0 with state_storage flashinfer_replayssm'),
        ('ST026', '$.resources.state_cache.num_speculative_states',
         "state_cache.num_speculative_states 0 does not match the profile's speculative states (mamba_cache.num_speculative_blocks 3)"),
    ],
    ('ST015', 'triton_speculative_block'): [
        ('ST015', '$.resources.mamba_cache.num_speculative_blocks',
         'ReplaySSM sets separate speculative blocks to zero: mamba_cache.num_speculative_blocks must be 0 with state_storage triton_replayssm'),
    ],
    ('ST016', 'replayssm_without_ring'): [
        ('ST016', '$.resources.mamba_cache.replay_ring',
         'state_storage triton_replayssm requires mamba_cache.replay_ring (the x, dt and B replay rings)'),
    ],
    ('ST017', 'recoverssm_with_a_window_ring'): [
        ('ST017', '$.resources.mamba_cache.replay_ring',
         'mamba_cache.replay_ring belongs to ReplaySSM state storage, not to state_storage kda_recoverssm'),
    ],
    ('ST017', 'recoverssm_with_ring'): [
        ('ST017', '$.resources.mamba_cache.replay_ring',
         'mamba_cache.replay_ring belongs to ReplaySSM state storage, not to state_storage kda_recoverssm'),
    ],
    ('ST018', 'flashinfer_ring_without_drafts'): [
        ('ST018', '$.resources.mamba_cache.replay_ring.length_tokens',
         'replay_ring.length_tokens 16 is not the flashinfer_replayssm ring length 20 (FlashInfer: replayssm_buffer_len + 1 + num_speculative_tokens; Triton: replayssm_buffer_len)'),
    ],
    ('ST018', 'triton_ring_with_flashinfer_length'): [
        ('ST018', '$.resources.mamba_cache.replay_ring.length_tokens',
         'replay_ring.length_tokens 17 is not the triton_replayssm ring length 16 (FlashInfer: replayssm_buffer_len + 1 + num_speculative_tokens; Triton: replayssm_buffer_len)'),
    ],
    ('ST019', 'ring_bytes_differ'): [
        ('ST019', '$.resources.mamba_cache.replay_ring.bytes',
         'replay_ring.bytes 454656 is not length_tokens x bytes_per_token (9093120)'),
    ],
    ('ST020', 'flashinfer_buffer_over_16'): [
        ('ST020', '$.resources.mamba_cache.replay_ring.buffer_len',
         'FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16'),
    ],
    ('ST021', 'flashinfer_buffer_below_query'): [
        ('ST021', '$.resources.mamba_cache.replay_ring.buffer_len',
         'FlashInfer ReplaySSM speculative decoding requires --replayssm-buffer-len >= 1 + num_speculative_tokens (4); got 3'),
    ],
    ('ST022', 'triton_speculative'): [
        ('ST022', '$.resources.mamba_cache.num_speculative_tokens',
         'Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer'),
    ],
    ('ST023', 'flashinfer_prefix_caching'): [
        ('ST023', '$.resources.runtime_memory.mamba_cache_mode',
         'FlashInfer ReplaySSM does not support prefix caching yet; use --disable-prefix-caching'),
    ],
    ('ST024', 'flashinfer_speculative_prefix_caching'): [
        ('ST024', '$.resources.runtime_memory.mamba_cache_mode',
         'FlashInfer ReplaySSM speculative decoding does not support prefix caching; use --disable-prefix-caching'),
    ],
    ('ST025', 'recoverssm_without_drafts'): [
        ('ST025', '$.resources.mamba_cache.num_speculative_tokens',
         'state_storage kda_recoverssm requires speculative decoding: mamba_cache.num_speculative_tokens must be at least 1'),
    ],
    ('ST026', 'manual_depth_differs'): [
        ('ST026', '$.resources.state_cache.num_speculative_states',
         "state_cache.num_speculative_states 3 does not match the profile's speculative states (mamba_cache.num_speculative_blocks 2)"),
    ],
    ('ST027', 'manual_block_differs'): [
        ('ST027', '$.resources.state_cache.block_size_tokens',
         'manual state_cache.block_size_tokens 16 conflicts with the observed mamba_cache.block_size_tokens 8'),
    ],
    ('ST027', 'manual_hash_unit_differs'): [
        ('ST027', '$.resources.state_cache.prefix_match_unit',
         'manual state_cache.prefix_match_unit 4 conflicts with the observed mamba_cache.hash_block_size_tokens 2'),
    ],
    ('ST028', 'replay_unmodeled'): [
        ('ST028', '$.resources.cache_layout',
         'cache_layout unmodeled is for timing queries only: capacity sizing and replay refuse it'),
    ],
}


def report(path: Path) -> list[dict]:
    import attrs

    from kvproof.models.documents import load_path
    from kvproof.rules.check import check
    from kvproof.rules.state_storage import replay_document

    document = load_path(path)
    if path.stem.removeprefix("good_").startswith("replay_"):
        document = replay_document(document)
    return [{"rule": d.rule, "path": d.path, "message": d.message} for d in check([document])]


def main(compare: bool = False) -> int:
    differences = 0
    if not compare:
        for rule_dir in HERE.glob("ST[0-9][0-9][0-9]"):
            shutil.rmtree(rule_dir)
    for rule, case, base, edits in cases():
        out = HERE / rule
        out.mkdir(exist_ok=True)
        path = out / f"{case}.json"
        if not compare:
            _write_doc(path, _edited(base, edits))
        text = "".join(json.dumps({"rule": r, "path": p, "message": m}) + "\n" for r, p, m in EXPECTED.get((rule, case), []))
        expected = out / f"{case}.expected.jsonl"
        if compare:  # the checker against the hand-written expectation
            got = "".join(json.dumps(line) + "\n" for line in report(path))
            if got != text or expected.read_text() != text:
                differences += 1
                print(f"{rule}/{case}: differs")
        else:
            expected.write_text(text)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv))
