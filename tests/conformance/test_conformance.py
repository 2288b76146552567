"""kvproof's simulator against vLLM 0.33.0 itself, key by key.

(a) Every golden geometry of ``tests/conformance/geometries/`` is replayed: the oracle must still
    compute its ``*.expected.json`` (the goldens are vLLM's own answers), and
    ``kvproof.sim.simulate_document`` must agree with the oracle. The example geometries of
    ``examples/geometries/`` are compared too.
(b) Hypothesis draws geometries (``kvproof.fuzz.strategies.geometries``), one test per model family;
    a disagreement is shrunk, and the session summary lists it with the differing keys.

Run: ``bash scripts/conformance-setup.sh && python -m pytest -m conformance tests/conformance``.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings

from kvproof.fuzz.strategies import FAMILIES, geometries
from oracle_process import MISSING, json_diff
from oracle_process import short as _short

ROOT = Path(__file__).resolve().parents[2]
GEOMETRIES = Path(__file__).resolve().parent / "geometries"

pytestmark = pytest.mark.conformance

#: The output keys of geometry-format.md ("Output of kvproof simulate"), compared whenever vLLM
#: reports them; the simulator must report them too.
DOCUMENTED_KEYS = (
    "status", "groups", "bytes_per_block", "memory_needed_for_one_max_len_request_bytes", "num_blocks",
    "num_usable_blocks", "kv_cache_tensors", "max_concurrency", "kv_cache_size_tokens",
    "per_group_blocks_per_request", "engine_cache_config_block_size", "scheduler_block_size",
    "hash_block_size", "cache_hit_alignment_tokens", "platform_alignment", "worker_views",
)
#: Further keys both sides report; compared when both have them.
SHARED_EXTRA_KEYS = (
    "kv_cache_layout", "mamba_cache_mode", "enable_prefix_caching", "max_in_flight_tokens",
    "kv_tp_replicas", "workers", "max_model_len",
)
#: ``KVPROOF_CONFORMANCE_EXAMPLES=N``: N generated geometries per family (overrides the Hypothesis
#: profile's ``max_examples``; the ``conformance`` profile of tests/conftest.py draws 400).
EXAMPLES_PER_FAMILY = int(os.environ["KVPROOF_CONFORMANCE_EXAMPLES"]) if os.environ.get(
    "KVPROOF_CONFORMANCE_EXAMPLES") else None


def _same_scalar(a: Any, b: Any) -> bool:
    # Integers stay integers: 20 and 20.0 differ, and so do 1 and True.
    return type(a) is type(b) and a == b


def _diff(vllm: Any, kvproof: Any, path: str, out: list[dict]) -> None:
    json_diff(vllm, kvproof, path, out)


def compare(vllm: dict, kvproof: dict) -> list[dict]:
    """The differences between the oracle's answer (vLLM) and the simulator's, as JSON paths."""
    if vllm.get("status") == "oracle_error":
        raise AssertionError(f"the oracle itself failed (not a vLLM refusal): {vllm['error']['message']}")
    out: list[dict] = []
    if vllm.get("status") != kvproof.get("status"):
        out.append({"path": "$.status", "vllm": _short(vllm.get("status")), "kvproof": _short(kvproof.get("status"))})
        if "error" in vllm or "error" in kvproof:
            out.append({"path": "$.error.message", "vllm": _short((vllm.get("error") or {}).get("message", MISSING)),
                        "kvproof": _short((kvproof.get("error") or {}).get("message", MISSING))})
        return out
    status = vllm["status"]
    if status == "bad_input":
        return out  # both refuse the document; their messages are their own
    if status == "refused":
        error = kvproof.get("error") or {}
        for key in ("message", "type"):
            if not _same_scalar(vllm["error"].get(key), error.get(key, MISSING)):
                out.append({"path": f"$.error.{key}", "vllm": _short(vllm["error"].get(key)),
                            "kvproof": _short(error.get(key, MISSING))})
        return out
    for key in DOCUMENTED_KEYS:
        if key not in vllm:
            continue
        if key not in kvproof:
            out.append({"path": f"$.{key}", "vllm": _short(vllm[key]), "kvproof": MISSING})
        else:
            _diff(vllm[key], kvproof[key], f"$.{key}", out)
    for key in SHARED_EXTRA_KEYS:
        if key in vllm and key in kvproof:
            _diff(vllm[key], kvproof[key], f"$.{key}", out)
    return out


def _format(geometry: dict, differences: list[dict]) -> str:
    lines = ["kvproof disagrees with vLLM 0.33.0", "geometry: " + json.dumps(geometry)]
    lines += [f"  {d['path']}: vLLM {d['vllm']} | kvproof {d['kvproof']}" for d in differences]
    return "\n".join(lines)


_DISAGREEMENT_CLASSES: dict[str, type] = {}


def _disagreement(signature: str) -> type:
    """One exception class per kind of disagreement (the first differing key), so that Hypothesis
    shrinks and reports each kind on its own (it tells failures apart by exception type)."""
    if signature not in _DISAGREEMENT_CLASSES:
        name = "Disagreement_" + "".join(c if c.isalnum() else "_" for c in signature)
        _DISAGREEMENT_CLASSES[signature] = type(name, (AssertionError,), {})
    return _DISAGREEMENT_CLASSES[signature]


def _signature(differences: list[dict]) -> str:
    path = differences[0]["path"]
    return path.split("[")[0].split(".length")[0]


def check(test: str, geometry: dict, oracle, simulate, report) -> list[dict]:
    vllm = oracle(geometry)
    try:
        kvproof = simulate(json.loads(json.dumps(geometry)))  # a private copy
    except Exception as exc:  # noqa: BLE001 - a crash is reported as a disagreement
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        kvproof = {"status": "crashed", "error": {
            "message": f"{type(exc).__name__}: {exc} at {Path(frame.filename).name}:{frame.lineno}"}}
    differences = compare(vllm, kvproof)
    report.record(test, geometry, differences, vllm)
    return differences


# --- (a) golden geometries ------------------------------------------------------------------------

GOLDEN = sorted(p for p in GEOMETRIES.glob("*.json") if not p.name.endswith(".expected.json"))
EXAMPLES = sorted((ROOT / "examples" / "geometries").glob("*.json"))


def _expected(path: Path) -> Path:
    return path.with_name(path.name[: -len(".json")] + ".expected.json")


def test_goldens_exist():
    assert GOLDEN, f"no golden geometries under {GEOMETRIES}"
    for path in GOLDEN:
        assert _expected(path).exists(), f"{path.name} has no {_expected(path).name}"


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_is_what_vllm_computes(path: Path, oracle):
    """The stored answer is still exactly what vLLM 0.33.0 computes for the golden geometry."""
    geometry = json.loads(path.read_text())
    expected = json.loads(_expected(path).read_text())
    assert oracle(geometry) == expected


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_simulated(path: Path, oracle, simulate, report):
    geometry = json.loads(path.read_text())
    differences = check(f"golden:{path.stem}", geometry, oracle, simulate, report)
    if differences:
        report.disagreement(f"golden:{path.stem}", geometry, differences)
    assert not differences, _format(geometry, differences)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_simulated(path: Path, oracle, simulate, report):
    geometry = json.loads(path.read_text())
    differences = check(f"example:{path.stem}", geometry, oracle, simulate, report)
    if differences:
        report.disagreement(f"example:{path.stem}", geometry, differences)
    assert not differences, _format(geometry, differences)


# --- (b) generated geometries ---------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_generated(family: str, oracle, simulate, report):
    """Hypothesis geometries of one family; every kind of disagreement is shrunk and reported."""
    test = f"generated:{family}"
    last: dict[str, tuple[dict, list[dict]]] = {}

    @given(geometries(families=[family]))
    def run(geometry: dict) -> None:
        differences = check(test, geometry, oracle, simulate, report)
        if differences:
            signature = _signature(differences)
            last[signature] = (geometry, differences)  # the final replay is the shrunk example
            note(_format(geometry, differences))
            raise _disagreement(signature)(_format(geometry, differences))

    if EXAMPLES_PER_FAMILY is not None:
        run = settings(max_examples=EXAMPLES_PER_FAMILY)(run)
    try:
        run()
    finally:
        for geometry, differences in last.values():
            report.disagreement(test, geometry, differences)
