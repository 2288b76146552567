"""Write the malformed-input corpus of tests/robustness/corpus (run: python tests/robustness/make_corpus.py).

Every case is small (the big inputs - 100 MB, 100,000 levels, ten million elements - are made
at test time in tmp_path). ``expected.jsonl`` maps each file to the exit code of
``kvproof check FILE`` and a fragment of the line it must print; test_robust_cli.py replays it.
The bases are the MiniMax-M2.7 example profile and scheduler record (examples/minimax-m27-tp4).
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
EXAMPLE = ROOT / "examples" / "minimax-m27-tp4"


def main() -> None:
    profile_text = (EXAMPLE / "profile.json").read_text(encoding="utf-8")
    scheduler_text = (EXAMPLE / "scheduler-dp0.json").read_text(encoding="utf-8")
    profile = json.loads(profile_text)
    scheduler = json.loads(scheduler_text)
    cases: dict[str, tuple[bytes, int, str]] = {}

    def text(name: str, data: str | bytes, code: int, fragment: str) -> None:
        cases[name] = (data.encode("utf-8") if isinstance(data, str) else data, code, fragment)

    def edited(name: str, base: dict, edit, code: int, fragment: str) -> None:
        tree = json.loads(json.dumps(base))
        edit(tree)
        text(name, json.dumps(tree, indent=2) + "\n", code, fragment)

    def put(*path, value):
        def edit(tree):
            for key in path[:-1]:
                tree = tree[key]
            tree[path[-1]] = value
        return edit

    # unreadable or not JSON
    text("empty.json", b"", 2, "LD001 $: document is empty")
    text("whitespace.json", b" \n\t\r\n", 2, "LD001 $: document is empty")
    text("truncated.json", profile_text[: len(profile_text) // 2], 2, "LD001 $: invalid JSON")
    text("truncated_in_string.json", scheduler_text[: scheduler_text.index("self_attn") + 4], 2,
         "LD001 $: invalid JSON: Unterminated string")
    text("trailing_garbage.json", profile_text + "}", 2, "LD001 $: invalid JSON: Extra data")
    text("binary.json", bytes(range(256)) * 4, 2, "LD001 $: document is not UTF-8 text")
    text("nul_bytes.json", b"\x00" * 64, 2, "LD001 $: invalid JSON")
    text("invalid_utf8.json", profile_text.encode("utf-8").replace(b"M2.7", b"\xc3\x28", 1), 2,
         "LD001 $: document is not UTF-8 text")
    text("utf16_bom.json", profile_text.encode("utf-16"), 2, "LD001 $: document is not UTF-8 text")
    text("bom_truncated.json", "\ufeff" + profile_text[:100], 2, "LD001 $: invalid JSON")
    text("deep_nesting.json", "[" * 5000 + "]" * 5000, 2, "LD001 $: JSON nesting is too deep")
    text("single_quotes.json", profile_text.replace('"', "'"), 2, "LD001 $: invalid JSON")
    text("comments.json", "// a comment\n" + profile_text, 2, "LD001 $: invalid JSON")
    # JSON, but not a document kvproof knows
    text("array.json", "[1, 2, 3]\n", 2, "LD003 $: unrecognised document")
    text("string.json", '"kvproof/profile/v1"\n', 2, "LD003 $: unrecognised document")
    text("null.json", "null\n", 2, "LD003 $: unrecognised document")
    edited("unknown_kind.json", scheduler, put("kind", value="planner"), 2, "LD003 $: unrecognised document")
    edited("schema_version_int.json", profile, put("schema_version", value=1), 2, "LD003 $: unrecognised document")
    # wrong types and values
    edited("bool_for_int.json", scheduler, put("cache", "num_blocks", value=True), 2,
           "LD002 $.cache.num_blocks: expected a non-negative integer, got a bool")
    edited("float_for_int.json", scheduler, put("cache", "num_blocks", value=203368.0), 2,
           "LD002 $.cache.num_blocks: expected a non-negative integer, got a float")
    edited("string_for_int.json", profile, put("resources", "max_batch_size", value="256"), 2,
           "LD002 $.resources.max_batch_size: expected a non-negative integer, got a string")
    edited("object_for_int.json", scheduler, put("cache", "block_size", value={"value": 16}), 2,
           "LD002 $.cache.block_size: expected a non-negative integer, got an object")
    edited("array_for_object.json", profile, put("resources", "runtime_memory", value=[]), 2,
           "LD002 $.resources.runtime_memory: expected an object, got an array")
    edited("object_for_array.json", scheduler, put("cache", "groups", value={}), 2,
           "LD002 $.cache.groups: expected an array, got an object")
    edited("null_for_required.json", scheduler, put("cache", "num_blocks", value=None), 2,
           "LD002 $.cache.num_blocks: expected a non-negative integer, got null")
    edited("negative.json", scheduler, put("cache", "num_blocks", value=-1), 2,
           "LD002 $.cache.num_blocks: expected a non-negative integer, got -1")
    edited("past_2_53.json", scheduler, put("cache", "num_blocks", value=2**53 + 1), 2,
           f"LD002 $.cache.num_blocks: integer {2**53 + 1} exceeds 2**53")
    edited("past_2_64.json", scheduler, put("cache", "num_blocks", value=2**64), 2,
           f"LD002 $.cache.num_blocks: integer {2**64} exceeds 2**53")
    edited("unknown_key.json", profile, put("resources", "per_layer_spec_size", value=1), 2,
           "LD002 $.resources.per_layer_spec_size: unknown key 'per_layer_spec_size'")
    edited("missing_key.json", scheduler, lambda t: t["cache"].pop("num_blocks"), 2,
           "LD002 $.cache.num_blocks: required key is missing")
    edited("enum_value.json", profile, put("resources", "cache_groups", 0, "kind", value="mamba"), 2,
           'LD002 $.resources.cache_groups[0].kind: expected one of "attention", "state", "convolution", got "mamba"')
    edited("lone_surrogate_key.json", profile, put("resources", "\ud800", value=1), 2,
           'LD002 $.resources["\\ud800"]: unknown key')
    huge = scheduler_text.replace('"num_blocks": 203368', '"num_blocks": ' + "9" * 5000, 1)
    text("huge_int_literal.json", huge, 2, "LD002 $.cache.num_blocks: integer of 5000 digits exceeds 2**53")
    # literals JSON does not have
    for literal in ("NaN", "Infinity", "-Infinity"):
        text(f"{literal.strip('-').lower()}{'_negative' if literal.startswith('-') else ''}.json",
             profile_text.replace('"gpu_memory_utilization": 0.9', f'"gpu_memory_utilization": {literal}'), 2,
             f"LD002 $.resources.runtime_memory.gpu_memory_utilization: non-finite number {literal} is not allowed")
    text("overflow_float.json", profile_text.replace('"gpu_memory_utilization": 0.9', '"gpu_memory_utilization": 1e400'), 2,
         "LD002 $.resources.runtime_memory.gpu_memory_utilization: number overflows to infinity")
    text("duplicate_keys.json", profile_text.replace('"model": "MiniMaxAI/MiniMax-M2.7",',
                                                     '"model": "a", "model": "b", "model": "c",'), 2,
         "LD002 $.model: duplicate key 'model'")
    # well-formed, refused by a rule
    edited("refused_zero_page.json", profile, put("resources", "cache_groups", 0, "page_size_bytes", value=0), 1,
           "PF009 $.resources.cache_groups[0].page_size_bytes")

    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    lines = []
    for name, (data, code, fragment) in sorted(cases.items()):
        (CORPUS / name).write_bytes(data)
        lines.append(json.dumps({"file": name, "exit": code, "prints": fragment}, ensure_ascii=True))
    (CORPUS / "expected.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
