"""Write the fixtures of the storage-policy rules (ST) under tests/rules/ST*/ (run:
python tests/rules/make_state_storage_fixtures.py; it rewrites only those folders).

Each case is an edit of a bundled example profile: ``examples/hybrid-mamba-align`` (mamba_align,
full_state) or one of the ``examples/unmodeled-*`` ReplaySSM / RecoverSSM profiles. The expected
reports are the checker's, written once and reviewed line by line against each rule's text
(``--check`` compares instead of writing, so an edit of a rule shows as a difference).
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
        ("ST002", "missing_policy", ALIGN, [(R + ["state_storage"], DELETE)]),
        ("ST002", "unmodeled_missing_policy", KDA, [(R + ["state_storage"], DELETE)]),
        ("ST002", "good_recoverssm_unmodeled", KDA, []),
        ("ST003", "replayssm_on_mamba_align", ALIGN, [(R + ["state_storage"], "triton_replayssm"),
                                                      (MC + ["num_speculative_tokens"], 0),
                                                      (MC + ["num_speculative_blocks"], 0),
                                                      (R + ["cache_groups", 0, "blocks_per_request"], 1)]),
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
        ("ST015", "good_replayssm_no_speculative_blocks", FLASHINFER, []),
        ("ST016", "replayssm_without_ring", TRITON, [(RING, DELETE)]),
        ("ST016", "good_triton_ring", TRITON, []),
        ("ST017", "recoverssm_with_ring", KDA, [(MC + ["replay_ring"], FLASHINFER["resources"]["mamba_cache"]["replay_ring"])]),
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
        text = "".join(json.dumps(line) + "\n" for line in report(path))
        expected = out / f"{case}.expected.jsonl"
        if compare:
            if expected.read_text() != text:
                differences += 1
                print(f"{rule}/{case}: differs")
        else:
            expected.write_text(text)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv))
