"""Run vLLM 0.33.0's own BlockPool + MambaManager through the scenarios of vllm_mamba_probe_driver.py.

Usage (needs the vLLM venv; not collected by pytest):

    .venv-vllm/bin/python tests/sim/vllm_mamba_probe.py            # writes vllm_mamba_probe_traces.json
    .venv-vllm/bin/python tests/sim/vllm_mamba_probe.py --check-kvm

``--check-kvm`` also drives vLLM's complete ``KVCacheManager`` (built by the conformance oracle from
``examples/geometries/bamba-like-align.json``, i.e. worked example 3 / invariants ex.05: 10 Mamba groups +
1 attention group) through one request (3000 prompt tokens, chunk threshold 2048 cut by the scheduler's
``_mamba_block_aligned_split`` as ported in the driver, i.e. 1584 + 1416; 50 decode tokens; probe) with
``get_computed_blocks`` / ``allocate_slots`` / ``free``, and checks that every Mamba group's per-step
numbers equal the driver's ``ex05_bamba_align`` scenario, i.e. that the driver calls the manager the way
``allocate_slots`` does. It printed held ``[1, 3, 1 x 49]``, row length ``[3, 6 x 50]``, probe 2640.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
sys.path.insert(0, str(HERE))

with contextlib.redirect_stdout(sys.stderr):
    import torch
    from vllm.v1.core.block_pool import BlockPool
    from vllm.v1.core.single_type_kv_cache_manager import MambaManager
    from vllm.v1.kv_cache_interface import MambaSpec

import vllm_mamba_probe_driver as driver

TRACES = HERE / "vllm_mamba_probe_traces.json"


def make_pool(num_gpu_blocks: int, enable_caching: bool, hash_block_size: int) -> BlockPool:
    return BlockPool(num_gpu_blocks=num_gpu_blocks, enable_caching=enable_caching, hash_block_size=hash_block_size)


def make_spec(**fields) -> MambaSpec:
    return MambaSpec(shapes=((4,),), dtypes=(torch.float32,), **fields)


VLLM = driver.Impl(make_pool=make_pool, make_spec=make_spec, manager_cls=MambaManager)


def check_kvm() -> None:
    """Drive vLLM's KVCacheManager for ex.05 and compare the Mamba groups with the driver."""
    sys.path.insert(0, str(ROOT / "tests" / "conformance"))
    import oracle
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_manager as kvm_mod
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request, RequestStatus

    captured = []

    class Capturing(kvm_mod.KVCacheManager):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            captured.append(self)

    oracle.KVCacheManager = Capturing
    doc = json.loads((ROOT / "examples" / "geometries" / "bamba-like-align.json").read_text())
    doc.pop("simulate", None)
    with contextlib.redirect_stdout(sys.stderr):
        oracle.plan(oracle.parse_geometry(doc))
    kvm = captured[-1]
    pool = kvm.block_pool
    init_none_hash(sha256)
    hasher = get_request_block_hasher(kvm.coordinator.block_pool.hash_block_size, sha256)
    prompt = [10_000_000 * 1_000 + i for i in range(3000)]
    req = Request("a", prompt, SamplingParams(max_tokens=50), None, block_hasher=hasher)
    mamba_ids = [i for i, g in enumerate(kvm.kv_cache_config.kv_cache_groups) if isinstance(g.kv_cache_spec, MambaSpec)]
    print(f"groups={len(kvm.kv_cache_config.kv_cache_groups)} mamba={mamba_ids} free0={pool.get_num_free_blocks()}",
          file=sys.stderr)
    sc = next(s for s in driver.scenarios() if s.name == "ex05_bamba_align")
    steps = []
    first = True
    while True:
        kvm.new_step_starts()
        if first:
            blocks, hit, _ = kvm.get_computed_blocks(req)
            n = driver.aligned_split(sc, req, min(2048, req.num_tokens - hit), hit, 2048)
            out = kvm.allocate_slots(req, n, num_new_computed_tokens=hit, new_computed_blocks=blocks,
                                     full_sequence_must_fit=True)
            req.status = RequestStatus.RUNNING
            first = False
        else:
            n = driver.aligned_split(sc, req, min(2048, req.num_tokens - req.num_computed_tokens), 0, 2048)
            out = kvm.allocate_slots(req, n)
        assert out is not None
        rows = kvm.coordinator.get_blocks("a")
        steps.append({"num_new": n,
                      "held": [sum(1 for b in rows[g] if not b.is_null) for g in mamba_ids],
                      "row_length": [len(rows[g]) for g in mamba_ids],
                      "attention_held": [len(rows[g]) for g in range(len(rows)) if g not in mamba_ids]})
        req.num_computed_tokens += n
        if req.num_computed_tokens >= req.num_tokens:
            req.append_output_token_ids(1_000_000_000 + len(req.output_token_ids))
            if len(req.output_token_ids) >= 50:
                break
    kvm.free(req)
    probe = Request("probe", prompt, SamplingParams(max_tokens=1), None, block_hasher=hasher)
    blocks, hit, _ = kvm.get_computed_blocks(probe)
    probe_rows = blocks.blocks
    mine = driver.run(sc, VLLM)
    mine_steps = [e for e in mine if "num_new" in e]
    assert len(mine_steps) == len(steps), (len(mine_steps), len(steps))
    for i, (a, b) in enumerate(zip(steps, mine_steps)):
        assert a["num_new"] == b["num_new"], (i, a, b)
        assert set(a["held"]) == {b["held"]}, (i, a, b)
        assert set(a["row_length"]) == {b["row_length"]}, (i, a, b)
    mine_probe = next(e for e in mine if "probe" in e)
    assert hit == mine_probe["hit_tokens"], (hit, mine_probe)
    for g in mamba_ids:
        assert [0 if b.is_null else 1 for b in probe_rows[g]] == [0 if x == 0 else 1 for x in mine_probe["hit_row"]]
    summary = {"steps": len(steps), "held_by_step": [s["held"][0] for s in steps],
               "row_length_by_step": [s["row_length"][0] for s in steps],
               "attention_held_by_step": [s["attention_held"][0] for s in steps], "probe_hit": hit}
    print(json.dumps(summary))
    print("KVCacheManager (ex.05) agrees with the driver on every Mamba group", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-kvm", action="store_true")
    ap.add_argument("-o", "--output", default=str(TRACES))
    args = ap.parse_args()
    if args.check_kvm:
        check_kvm()
        return 0
    traces = {}
    for sc in driver.scenarios():
        traces[sc.name] = driver.run(sc, VLLM)
    Path(args.output).write_text(json.dumps(
        {"_comment": "Produced by vLLM 0.33.0's BlockPool + MambaManager: "
                     ".venv-vllm/bin/python tests/sim/vllm_mamba_probe.py",
         "traces": traces}, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {args.output}: {len(traces)} scenarios", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
