"""``kvproof plan PROFILE [--tokens N]``: what a profile's consumer sees.

For one request at N tokens (default the profile's max_model_len): the blocks and bytes it holds
in each group as the replay holds them (an attention group ``cdiv(N, block)``, a windowed one
vLLM's admission blocks, a state group its ``blocks_per_request``); the pool (usable blocks, the
null block excluded); vLLM's start-up demand at max_model_len (CA001's terms) and the start-up
concurrency ``num_blocks / demand`` (``get_max_concurrency_for_kv_cache_config``). Seed 001's GLM
profile: 487 blocks = 6,582,681,600 bytes at 1,048,576 tokens, a pool of 13,696 blocks =
185,126,092,800 bytes, demand 495 blocks, concurrency 27.67070707070707.

A ``mamba_align`` profile (seed 000) replays as vLLM's align mode: a Mamba state group holds
``2 + k + c`` pages (``MambaSpec.max_memory_usage_bytes``, v1/kv_cache_interface.py:1135-1141): the
working state, the retained checkpoint of the last full page (held through turnover until the
next allocation, single_type_kv_cache_manager.py MambaManager.remove_skipped_blocks), ``k``
speculative scratch states and ``c`` prefill checkpoints; its block-table row is
``cdiv(N, block) + k`` columns (``max_num_blocks_per_req``, 1143-1153), and the pool reserves the
null page. An ``unmodeled`` profile is refused (ST028): it serves timing queries only.
"""

from __future__ import annotations

import json
import sys

from ..diagnostics import LOAD_KIND, Diagnostic, InputError
from ..formulas import blocks_per_request as demand
from ..logic import cdiv
from ..models.codec import ABSENT, present
from ..models.documents import load_path
from ..rules.check import check
from ..rules.profile_capacity import startup_blocks
from ..rules.state_storage import replay_document
from .check import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED


def consumer_blocks(group, tokens: int, max_num_tokens: int) -> int:
    """Blocks one request at ``tokens`` holds in a group as the profile's replay holds them."""
    if group.kind == "state":
        return group.blocks_per_request
    if group.sliding_window not in (ABSENT, None):
        return demand.sliding_window_blocks(tokens, group.block_size_tokens, group.sliding_window, 0, max_num_tokens)
    return cdiv(tokens, group.block_size_tokens)


def mamba_align_parts(group, tokens: int) -> dict:
    """The pages of one align-mode Mamba group of one request, by role (the module docstring)."""
    k = group.blocks_per_request - 1
    c = group.prefill_checkpoint_blocks
    return {"working_states": 1, "retained_checkpoints": 1, "speculative_scratch_states": k,
            "prefill_checkpoints": c, "row_length": cdiv(tokens, group.block_size_tokens) + k}


def plan(profile, tokens: int | None) -> dict:
    resources = profile.resources
    memory = resources.runtime_memory
    groups = resources.cache_groups
    align = resources.cache_layout == "mamba_align"
    n = memory.max_model_len if tokens is None else tokens
    rows = []
    for group in groups:
        row = {"name": group.name, "kind": group.kind}
        if align and group.kind == "state" and present(group.prefill_checkpoint_blocks):
            parts = mamba_align_parts(group, n)
            blocks = sum(v for key, v in parts.items() if key != "row_length")
            row["state_pages"] = parts
        else:
            blocks = consumer_blocks(group, n, resources.max_num_tokens)
        row.update(blocks=blocks, bytes=blocks * group.page_size_bytes)
        rows.append(row)
    page = groups[0].page_size_bytes
    usable = memory.kv_cache_bytes // page
    demand = sum(startup_blocks(g, memory, resources.max_num_tokens) for g in groups)
    out = {
        "tokens": n,
        "layout": resources.cache_layout,
        "groups": rows,
        "request_blocks": sum(r["blocks"] for r in rows),
        "request_peak_cache_bytes": sum(r["bytes"] for r in rows),
        "pool_blocks": usable,
        "pool_bytes": usable * page,
        "startup_demand_blocks": demand,
        "startup_concurrency": (usable + 1) / demand if demand else None,
    }
    if align:
        out["state_storage"] = resources.state_storage
        out["null_pages"] = 1
    return out


def render_text(result: dict) -> str:
    """The plan for a person: every count with thousands separators (the JSON keeps raw numbers)."""
    lines = [f"one request at {result['tokens']:,} tokens:"]
    for row in result["groups"]:
        lines.append(f"  {row['name']} ({row['kind']}): {row['blocks']:,} blocks, {row['bytes']:,} bytes")
        if "state_pages" in row:
            parts = row["state_pages"]
            lines.append(f"    {parts['working_states']:,} working state, {parts['retained_checkpoints']:,} retained "
                         f"checkpoint, {parts['speculative_scratch_states']:,} speculative scratch, "
                         f"{parts['prefill_checkpoints']:,} prefill checkpoint; block-table row {parts['row_length']:,}")
    lines.append(f"  total: {result['request_blocks']:,} blocks, {result['request_peak_cache_bytes']:,} bytes")
    lines.append(f"pool: {result['pool_blocks']:,} blocks, {result['pool_bytes']:,} bytes (null block excluded)")
    if "state_storage" in result:
        lines.append(f"state storage {result['state_storage']}: {result['null_pages']:,} null page reserved")
    lines.append(f"vLLM start-up: {result['startup_demand_blocks']:,} blocks per request at max_model_len, "
                 f"concurrency {result['startup_concurrency']}")
    return "\n".join(lines) + "\n"


def run(path: str, tokens: int | None, fmt: str = "text") -> int:
    try:
        document = load_path(path)
    except InputError as exc:
        sys.stdout.write("".join(d.render() + "\n" for d in exc.diagnostics))
        return EXIT_BAD_INPUT
    if document.kind != "profile":
        sys.stdout.write(Diagnostic(LOAD_KIND, "$", f"plan takes a profile, not a {document.kind}", path).render() + "\n")
        return EXIT_BAD_INPUT

    diagnostics = check([replay_document(document)])
    if diagnostics:  # a plan of a profile the rules refuse would be a number of nothing
        sys.stdout.write("".join(d.render() + "\n" for d in diagnostics))
        return EXIT_REFUSED
    result = plan(document.obj, tokens)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if fmt == "json" else render_text(result))
    return EXIT_OK
