"""kvproof/sim/requests/mamba_manager.py against vLLM 0.33.0's own MambaManager.

How the expected numbers were obtained (no number below was computed by kvproof or by hand):

* ``vllm_mamba_probe_traces.json`` was written by ``.venv-vllm/bin/python tests/sim/vllm_mamba_probe.py``:
  vLLM 0.33.0's real ``vllm.v1.core.block_pool.BlockPool`` + ``single_type_kv_cache_manager.MambaManager``
  driven through every scenario of ``vllm_mamba_probe_driver.py`` (the calls ``KVCacheManager`` /
  the coordinators / the scheduler make for one group, with vLLM line citations there). Each trace
  records, after every call, the request's block-table row (block ids, 0 = null), the prefix-cache
  token count of every block, the free blocks, ``last_state_block_idx``, ``_num_retired_blocks``,
  ``_checkpoints``, ``_partial_hit_reqs``, pending CoW copies, ``num_cached_block``, the return of
  ``get_num_blocks_to_allocate`` / ``allocate_new_blocks`` / ``find_longest_cache_hit``.
  ``test_matches_vllm_trace`` runs kvproof's port through the same driver and compares key by key.
* ``vllm_mamba_probe.py --check-kvm`` drove vLLM's complete ``KVCacheManager`` for
  ``examples/geometries/bamba-like-align.json`` (planned by the conformance oracle: 10 Mamba groups + 1
  attention group) and checked that every Mamba group's per-step numbers equal the driver's
  ``ex05_bamba_align`` trace; it printed held ``[1, 3, 1 x 49]``, row length ``[3, 6 x 50]``, probe hit
  2640. Those numbers are hard-coded in ``test_ex05_*`` (they also match
  vllm033-invariants.md C.5 "[oracle ex.05: 3 at a checkpoint chunk (2 + 0 + 1), 1 in decode; row
  length 6]" and "[oracle ex.05: probe 2640 of 3000; ex.06: 2560]", "[oracle ex.04: 1 per group]").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import vllm_mamba_probe_driver as driver
from sim_helpers import load_example

from kvproof.models.geometry import load_geometry
from kvproof.sim.requests.block_pool import BlockPool
from kvproof.sim.requests.mamba_manager import (
    MambaManager,
    get_mamba_prefill_checkpoint_position,
    is_mamba_prefill_checkpoint_valid,
)
from kvproof.sim.requests.manager_registry import get_manager_class, get_manager_for_kv_cache_spec
from kvproof.sim.startup.plan import plan
from kvproof.sim.startup.specs import MambaSpec

TRACES = json.loads((Path(__file__).resolve().parent / "vllm_mamba_probe_traces.json").read_text())["traces"]
SCENARIOS = {sc.name: sc for sc in driver.scenarios()}


def _spec(**fields) -> MambaSpec:
    return MambaSpec(shapes=((4,),), dtypes=("float32",), **fields)


KVPROOF = driver.Impl(make_pool=lambda n, caching, hbs: BlockPool(n, caching, hbs), make_spec=_spec,
                      manager_cls=MambaManager)


def _run(name: str, impl: driver.Impl = KVPROOF) -> list[dict]:
    return json.loads(json.dumps(driver.run(SCENARIOS[name], impl)))  # tuples -> lists, as stored


def _steps(trace: list[dict]) -> list[dict]:
    return [e for e in trace if "num_new" in e and not e.get("refused")]


def _probe(trace: list[dict], rid: str) -> dict:
    return next(e for e in trace if e.get("probe") == rid)


def test_every_scenario_has_a_vllm_trace() -> None:
    assert set(SCENARIOS) == set(TRACES)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_matches_vllm_trace(name: str) -> None:
    got, expected = _run(name), TRACES[name]
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"{name}: event {i} differs"


def test_trace_comparison_detects_a_wrong_port() -> None:
    """The comparison can fail: an off-by-one ``get_num_skipped_tokens`` is caught."""

    class Wrong(MambaManager):
        def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
            return num_computed_tokens

    wrong = driver.Impl(make_pool=KVPROOF.make_pool, make_spec=_spec, manager_cls=Wrong)
    assert _run("align_c1_ret0", wrong) != TRACES["align_c1_ret0"]


# -- hard-coded numbers vLLM produced -----------------------------------------------------------


def _plan_impl(example: str) -> tuple[driver.Impl, object]:
    """An implementation whose spec is the one kvproof's planner gives the example's first Mamba group
    (the scenario fields must agree with the plan)."""
    result = plan(load_geometry(load_example(example)))
    group = next(g for g in result.groups if isinstance(g.scheduler_spec, MambaSpec))
    planned = group.scheduler_spec

    def make_spec(**fields):
        for key, value in fields.items():
            assert getattr(planned, key) == value, (key, getattr(planned, key), value)
        return planned

    assert get_manager_class(planned) is MambaManager
    return driver.Impl(make_pool=KVPROOF.make_pool, make_spec=make_spec, manager_cls=MambaManager), result


def test_ex05_checkpoint_chunk_holds_three_then_one_in_decode() -> None:
    impl, result = _plan_impl("bamba-like-align.json")
    assert (result.scheduler_block_size, result.hash_block_size, result.cache_hit_alignment_tokens) == (528, 528, 528)
    trace = _run("ex05_bamba_align", impl)
    steps = _steps(trace)
    # vLLM (KVCacheManager, --check-kvm): chunks 1584 (block-aligned split of 2048) and 1416, 49 decodes.
    assert [s["num_new"] for s in steps[:2]] == [1584, 1416]
    assert [s["held"] for s in steps] == [1, 3] + [1] * 49
    assert [s["row_length"] for s in steps] == [3] + [6] * 50
    # The checkpoint chunk: state of 1584 (column 2) + checkpoint at 2640 (column 4) + running state.
    assert steps[1]["state"]["rows"]["a"] == [0, 0, 1, 0, 2, 3]
    assert steps[1]["state"]["checkpoints"] == {"a": [2640, 4]}
    assert steps[1]["to_allocate"] == 2
    # resident <= 2 + k + c = 2 + 0 + 1 (the start-up bound, invariants A.11)
    assert max(s["held"] for s in steps) == 3


def test_ex05_probe_hits_2640_of_3000() -> None:
    impl, _ = _plan_impl("bamba-like-align.json")
    probe = _probe(_run("ex05_bamba_align", impl), "a")
    assert probe["hit_tokens"] == 2640
    assert probe["hit_row"] == [0, 0, 0, 0, 2]  # nulls + the one cached state block (column 4)


def test_ex06_glm_like_probe_hits_2560() -> None:
    impl, result = _plan_impl("glm-like-packed.json")
    assert result.hash_block_size == 640
    trace = _run("ex06_glm_like", impl)
    assert [s["held"] for s in _steps(trace)][:3] == [1, 3, 1]
    assert _probe(trace, "a")["hit_tokens"] == 2560


def test_ex04_none_mode_one_block_for_the_whole_request() -> None:
    impl, result = _plan_impl("bamba-like-none.json")
    assert result.scheduler_block_size == 1081344
    steps = _steps(_run("ex04_bamba_none", impl))
    assert len(steps) == 51
    assert {s["held"] for s in steps} == {1}
    assert {s["row_length"] for s in steps} == {1}
    assert steps[0]["to_allocate"] == 1 and all(s["to_allocate"] == 0 for s in steps[1:])


@pytest.mark.parametrize(("name", "k"), [("none_k0", 0), ("none_k2", 2), ("none_c1", 0)])
def test_none_mode_holds_one_plus_k(name: str, k: int) -> None:
    # vLLM: 1 + k blocks from the first step to the end; c is not counted in none mode.
    steps = _steps(_run(name))
    assert {s["held"] for s in steps} == {1 + k}
    assert steps[0]["admission"] == 1 + k


@pytest.mark.parametrize("name", sorted(n for n, sc in SCENARIOS.items() if sc.mamba_cache_mode == "align"))
def test_align_resident_at_most_two_plus_k_plus_c(name: str) -> None:
    sc = SCENARIOS[name]
    bound = 2 + sc.num_speculative_blocks + sc.num_prefill_checkpoint_blocks
    for trace in (TRACES[name], _run(name)):
        assert max(s["held"] for s in _steps(trace)) <= bound


def test_speculative_blocks_first_allocation_and_decode() -> None:
    # vLLM, align k = 2, c = 1: the first allocation takes 1 + k blocks; decode keeps 1 + k resident.
    steps = _steps(TRACES["align_k2_c1"])
    assert steps[0]["to_allocate"] == 3 and steps[0]["held"] == 3
    assert steps[2]["held"] == 5  # a checkpoint chunk: previous state + checkpoint + 1 + k
    assert steps[3]["held"] == 3
    assert _steps(_run("align_k2_c1")) == steps


def test_same_step_hit_returns_num_gpu_blocks_plus_one() -> None:
    # vLLM: "b" hits the state "a" cached in this very step -> num_gpu_blocks + 1 = 65 (1704-1712).
    trace = _run("same_step_retry_ret0")
    refused = [e for e in trace if e.get("refused")]
    assert [(e["step"], e["rid"], e["to_allocate"]) for e in refused] == [(1, "b", 65)]
    assert refused == [e for e in TRACES["same_step_retry_ret0"] if e.get("refused")]


def test_fine_grained_partial_hit_and_cow() -> None:
    # vLLM, block 16, hash 4: "a" (45-token prompt) registers its prompt tail at 44 inside a block;
    # "b" sharing those 45 tokens is deferred one step (the CoW copy is filled in that step), then hits
    # 44 tokens and gets a private copy of the tail block.
    trace = _run("fine_grained_small_chunks")
    b_events = [e for e in trace if e.get("rid") == "b"]
    assert b_events[0]["refused"] and b_events[0]["to_allocate"] == 65
    assert b_events[1]["hit"][0] == 44
    assert _probe(trace, "a")["hit_tokens"] == 44
    assert trace == TRACES["fine_grained_small_chunks"]


def test_get_num_skipped_tokens() -> None:
    pool = BlockPool(8, True, 16)
    mgr = MambaManager(_spec(block_size=16, mamba_cache_mode="align"), block_pool=pool, enable_caching=True,
                       kv_cache_group_id=0, scheduler_block_size=16)
    assert [mgr.get_num_skipped_tokens(c) for c in (0, 1, 17, 100)] == [-1, 0, 16, 99]


def test_prefix_caching_requires_align_mode() -> None:
    # single_type_kv_cache_manager.py:1442-1444; there is no "all" mode in 0.33.0.
    with pytest.raises(AssertionError, match="requires mamba_cache_mode='align'"):
        MambaManager(_spec(block_size=16, mamba_cache_mode="none"), block_pool=BlockPool(8, True, 16),
                     enable_caching=True, kv_cache_group_id=0, scheduler_block_size=16)


def test_built_by_get_manager_for_kv_cache_spec() -> None:
    spec = _spec(block_size=16, mamba_cache_mode="align", num_speculative_blocks=1)
    mgr = get_manager_for_kv_cache_spec(spec, max_in_flight_tokens=8192, max_model_len=4096,
                                        block_pool=BlockPool(8, True, 16), enable_caching=True,
                                        kv_cache_group_id=0, scheduler_block_size=16)
    assert isinstance(mgr, MambaManager)
    assert mgr.max_admission_blocks_per_request is None
    assert not mgr.has_positionally_stable_blocks


def test_checkpoint_helpers() -> None:
    # kv_cache_interface.py:1169-1210 on ex.05 / ex.06 numbers.
    assert get_mamba_prefill_checkpoint_position(3000, 528, False) == 2640
    assert get_mamba_prefill_checkpoint_position(3000, 528, True) == 2112
    assert get_mamba_prefill_checkpoint_position(3000, 16, False) == 2992
    assert is_mamba_prefill_checkpoint_valid(1584, 3000, 2640, 528, 528, 1)
    assert not is_mamba_prefill_checkpoint_valid(2048, 3000, 2640, 528, 528, 1)  # query start off-block
    assert is_mamba_prefill_checkpoint_valid(1920, 3000, 2560, 640, 640, 16)
    assert not is_mamba_prefill_checkpoint_valid(1920, 3000, 2560, 640, 640, None)
