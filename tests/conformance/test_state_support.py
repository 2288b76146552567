"""The state support table against vLLM 0.33.0's own validator, combination by combination.

Every combination of a grid over the 0.33.0 axes (every finite value; the integers at and around
every bound the table or vLLM compares with) goes through ``VllmConfig.validate_mamba_cached_kernel``
(``oracle_state_support.py``) and through the table (``kvproof.sim.startup.state_support.decide``): the
verdict, the exact text and the resolved ``use_kda_recoverssm`` must agree, and every 0.33.0 row
must be met by the grid. The architectures that declare ``SupportsReplaySSM`` in vLLM's source must
be the table's.
"""

from __future__ import annotations

import itertools
import json

import pytest
from oracle_process import HERE, ROOT, VENV_PYTHON, OracleProcess

from kvproof.sim.startup.state_support import (KDA_ARCHITECTURES, REPLAYSSM_ARCHITECTURES, REVISION_0_33_0, ROWS,
                                       architecture_class, decide, refusal_text, speculative_class)

ORACLE = HERE / "oracle_state_support.py"
REPORT = ROOT / "out" / "conformance-state-support.json"
CHUNK = 4000

#: one architecture without SupportsReplaySSM, and every one with it
ARCHITECTURES = ("JambaForCausalLM", *REPLAYSSM_ARCHITECTURES)
#: (method, depths): no speculation, EAGLE, native MTP and another method at several depths
SPECULATION = ((None, (0,)), ("eagle", (1, 3, 15, 16)), ("mtp", (1, 3, 15, 16)), ("ngram", (1,)))
BUFFER_LENGTHS = (1, 2, 3, 4, 15, 16, 17, 32)


def grid():
    """(vLLM combination, table settings) for every point of the grid."""
    for (replay, arch, backend, v2, mode, (method, depths), buffer_len, pp, kv, sr) in itertools.product(
            (False, True), ARCHITECTURES, ("triton", "flashinfer", "cpu"), (False, True), ("none", "align"),
            SPECULATION, BUFFER_LENGTHS, (1, 2), (False, True), (False, True)):
        for k in depths:
            combination = {"use_replayssm": replay, "architecture": arch, "mamba_backend": backend,
                           "use_v2_model_runner": v2, "mamba_cache_mode": mode, "num_speculative_tokens": k,
                           "replayssm_buffer_len": buffer_len, "pipeline_parallel_size": pp, "kv_connector": kv,
                           "stochastic_rounding": sr}
            settings = {"revision": REVISION_0_33_0, "use_replayssm": replay, "architecture": architecture_class(arch),
                        "mamba_backend": backend, "model_runner": "V2" if v2 else "V1", "mamba_cache_mode": mode,
                        "speculative": speculative_class(k, method), "num_speculative_tokens": k,
                        "replayssm_buffer_len": buffer_len, "pipeline_parallel_size": pp, "kv_connector": kv,
                        "stochastic_rounding": sr}
            yield combination, settings


@pytest.fixture(scope="module")
def validator():
    if not VENV_PYTHON.exists():
        pytest.skip(f"{VENV_PYTHON} is absent")
    proc = OracleProcess(VENV_PYTHON, ORACLE, "conformance-state-support.stderr.log")
    yield proc
    proc.close()


def test_replayssm_architectures_are_vllms(validator) -> None:
    assert validator({"replayssm_architectures": True})["replayssm_architectures"] == sorted(REPLAYSSM_ARCHITECTURES)
    assert set(KDA_ARCHITECTURES) <= set(REPLAYSSM_ARCHITECTURES)


def test_every_combination_agrees_with_vllms_validator(validator) -> None:
    points = list(grid())
    answers = []
    for start in range(0, len(points), CHUNK):
        answers += validator({"combinations": [c for c, _ in points[start:start + CHUNK]]})["answers"]
    assert len(answers) == len(points)

    disagreements, met = [], set()
    for (combination, settings), got in zip(points, answers):
        row = decide(settings)
        met.add(row.name)
        text = None if row.supported else refusal_text(row.rule, combination["architecture"],
                                                       combination["num_speculative_tokens"],
                                                       combination["replayssm_buffer_len"])
        kda = settings["use_replayssm"] and settings["architecture"] == "kda" and settings["num_speculative_tokens"] > 0
        if got != {"error": text, "use_kda_recoverssm": kda}:
            disagreements.append({"combination": combination, "row": row.name, "vllm": got,
                                  "kvproof": {"error": text, "use_kda_recoverssm": kda}})
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps({"combinations": len(points), "disagreements": len(disagreements),
                                  "first": disagreements[:25]}, indent=2) + "\n")
    assert disagreements == [], json.dumps(disagreements[:5], indent=2)
    assert met == {row.name for row in ROWS if row.revision == REVISION_0_33_0}
    print(f"state support: {len(points)} combinations, 0 disagreements")
