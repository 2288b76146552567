"""``kvproof plan PROFILE [--tokens N]``: what a profile's consumer sees.

For one request at N tokens (default the profile's max_model_len): the blocks and bytes it holds
in each group as the replay holds them (an attention group ``cdiv(N, block)``, a windowed one
vLLM's admission blocks, a state group its ``blocks_per_request``); the pool (usable blocks, the
null block excluded); vLLM's start-up demand at max_model_len (CA001's terms) and the start-up
concurrency ``num_blocks / demand`` (``get_max_concurrency_for_kv_cache_config``). Seed 001's GLM
profile: 487 blocks = 6,582,681,600 bytes at 1,048,576 tokens, a pool of 13,696 blocks =
185,126,092,800 bytes, demand 495 blocks, concurrency 27.67070707070707.
"""

from __future__ import annotations

import json
import sys

from ..diagnostics import InputError
from ..models.codec import ABSENT
from ..models.documents import load_path
from .check import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED


def consumer_blocks(group, tokens: int, max_num_tokens: int) -> int:
    """Blocks one request at ``tokens`` holds in a group as the profile's replay holds them."""
    from ..logic import cdiv
    from ..sim import demand

    if group.kind == "state":
        return group.blocks_per_request
    if group.sliding_window not in (ABSENT, None):
        return demand.sliding_window_blocks(tokens, group.block_size_tokens, group.sliding_window, 0, max_num_tokens)
    return cdiv(tokens, group.block_size_tokens)


def plan(profile, tokens: int | None) -> dict:
    from ..rules.profile_capacity import startup_blocks

    resources = profile.resources
    memory = resources.runtime_memory
    groups = resources.cache_groups
    n = memory.max_model_len if tokens is None else tokens
    rows = []
    for group in groups:
        blocks = consumer_blocks(group, n, resources.max_num_tokens)
        rows.append({"name": group.name, "kind": group.kind, "blocks": blocks, "bytes": blocks * group.page_size_bytes})
    page = groups[0].page_size_bytes
    usable = memory.kv_cache_bytes // page
    demand = sum(startup_blocks(g, memory, resources.max_num_tokens) for g in groups)
    return {
        "tokens": n,
        "groups": rows,
        "request_blocks": sum(r["blocks"] for r in rows),
        "request_peak_cache_bytes": sum(r["bytes"] for r in rows),
        "pool_blocks": usable,
        "pool_bytes": usable * page,
        "startup_demand_blocks": demand,
        "startup_concurrency": (usable + 1) / demand if demand else None,
    }


def render_text(result: dict) -> str:
    lines = [f"one request at {result['tokens']} tokens:"]
    for row in result["groups"]:
        lines.append(f"  {row['name']} ({row['kind']}): {row['blocks']} blocks, {row['bytes']} bytes")
    lines.append(f"  total: {result['request_blocks']} blocks, {result['request_peak_cache_bytes']} bytes")
    lines.append(f"pool: {result['pool_blocks']} blocks, {result['pool_bytes']} bytes (null block excluded)")
    lines.append(f"vLLM start-up: {result['startup_demand_blocks']} blocks per request at max_model_len, "
                 f"concurrency {result['startup_concurrency']}")
    return "\n".join(lines) + "\n"


def run(path: str, tokens: int | None, fmt: str = "text") -> int:
    from ..rules.check import check

    try:
        document = load_path(path)
    except InputError as exc:
        sys.stdout.write("".join(d.render() + "\n" for d in exc.diagnostics))
        return EXIT_BAD_INPUT
    if document.kind != "profile":
        sys.stdout.write(f"{path}: LD003 $: plan takes a profile, not a {document.kind}\n")
        return EXIT_BAD_INPUT
    diagnostics = check([document])
    if diagnostics:  # a plan of a profile the rules refuse would be a number of nothing
        sys.stdout.write("".join(d.render() + "\n" for d in diagnostics))
        return EXIT_REFUSED
    result = plan(document.obj, tokens)
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if fmt == "json" else render_text(result))
    return EXIT_OK
