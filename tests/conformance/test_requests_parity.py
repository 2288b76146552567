"""Requests over time (docs/requests.md): kvproof's managers and scheduler against vLLM 0.33.0 itself.

(a) Every golden of ``tests/conformance/requests/`` (``NAME.json`` with a ``simulate`` block and
    ``NAME.expected.json``, the answer of ``oracle_requests.py``, i.e. of vLLM's own ``KVCacheManager``
    and ``Scheduler``):
    * the oracle still computes exactly the stored answer (live, needs ``.venv-vllm``);
    * ``kvproof.sim.simulate_document`` gives the same ``status``, ``simulation``, ``prefix_hit_probe``
      and ``workload``;
    * so does the CLI, ``kvproof simulate NAME.json --format json``.
(b) Seeded random geometries with random single requests and workloads, oracle (live) against
    ``simulate_document``; ``KVPROOF_REQUESTS_RANDOM=N`` cases (default 40), seed
    ``KVPROOF_REQUESTS_SEED`` (default 20261129).
(c) The bundled examples with a ``simulate`` block, live.
(d) Hypothesis (``geometries_with_requests``: tight pools and crowded workloads included, so that
    vLLM preempts); ``KVPROOF_REQUESTS_HYPOTHESIS=N`` examples (default 150), seeded by
    ``KVPROOF_REQUESTS_SEED`` when it is given (else by ``--hypothesis-seed``, or at random).

Every comparison is counted in the session report (conftest.py): cases, agreements, and per test the
workloads vLLM served and how many of them preempted. Every case also compares kvproof's decode runs
with its step-by-step path (``step_by_step_differences``): a difference there is a disagreement too.

Opt-in like the rest of the directory: ``python -m pytest -m conformance tests/conformance/test_requests_parity.py``.
A kvproof side that does not produce these keys (yet) fails here, loudly: it is never a skip.
Regenerate the goldens with ``bash tests/conformance/requests/regenerate.sh``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from oracle_process import HERE, MISSING, REQUESTS_SEED, REQUESTS_SEED_GIVEN, ROOT, VENV_PYTHON, OracleProcess, json_diff
from oracle_process import short as _short

REQUESTS = HERE / "requests"
ORACLE_REQUESTS = HERE / "oracle_requests.py"
RANDOM_CASES = int(os.environ.get("KVPROOF_REQUESTS_RANDOM", "40"))
RANDOM_SEED = REQUESTS_SEED

pytestmark = pytest.mark.conformance

#: The keys of docs/requests.md compared here (the start-up plan is test_conformance.py's business).
KEYS = ("simulation", "prefix_hit_probe", "workload", "simulation_stalled", "simulation_rejected",
        "simulation_truncated")

GOLDEN = sorted(p for p in REQUESTS.glob("*.json") if not p.name.endswith(".expected.json"))


def _expected(path: Path) -> Path:
    return path.with_name(path.name[: -len(".json")] + ".expected.json")


# --- comparison ------------------------------------------------------------------------------------

def _diff(vllm: Any, kvproof: Any, path: str, out: list[dict]) -> None:
    # maps keyed by request id (scheduled, admitted, requests): an extra key is a difference too
    json_diff(vllm, kvproof, path, out, closed_maps=(".scheduled", ".admitted", ".requests"))


def compare(vllm: dict, kvproof: dict) -> list[dict]:
    """Differences of the requests-over-time keys between the oracle (vLLM) and kvproof."""
    error = vllm.get("error") or {}
    if vllm.get("status") == "oracle_error" and error.get("raised_in_vllm") and str(error.get("stage", "")).startswith(
        ("simulation", "workload")
    ):
        # vLLM's own manager or scheduler raised while serving: kvproof reports the same raise
        # (kvproof.sim.document: ``simulation_raised`` / ``workload.raised``).
        if error["stage"].startswith("simulation"):
            mine = kvproof.get("simulation_raised") or {}
        else:
            mine = (kvproof.get("workload") or {}).get("raised") or {}
        return [{"path": f"$.{error['stage']}.raised.{key}", "vllm": _short(error.get(key)),
                 "kvproof": _short(mine.get(key, MISSING))}
                for key in ("type", "message") if mine.get(key) != error.get(key)]
    if vllm.get("status") == "oracle_error":
        raise AssertionError(f"the oracle itself failed (not vLLM's answer): {json.dumps(vllm['error'])[:2000]}")
    out: list[dict] = []
    if vllm.get("status") != kvproof.get("status"):
        out.append({"path": "$.status", "vllm": _short(vllm.get("status")),
                    "kvproof": _short(kvproof.get("status", MISSING))})
        out.append({"path": "$.error.message", "vllm": _short((vllm.get("error") or {}).get("message", MISSING)),
                    "kvproof": _short((kvproof.get("error") or {}).get("message", MISSING))})
        return out
    if vllm["status"] == "refused":
        for key in ("message", "type"):
            mine = (kvproof.get("error") or {}).get(key, MISSING)
            if mine != vllm["error"].get(key):
                out.append({"path": f"$.error.{key}", "vllm": _short(vllm["error"].get(key)), "kvproof": _short(mine)})
        return out
    if vllm["status"] != "ok":
        return out
    for key in KEYS:
        value = vllm.get(key)
        if value is None:
            # Nothing asked (no prompt_tokens / no probe / no requests): kvproof may omit the key.
            if kvproof.get(key) is not None:
                out.append({"path": f"$.{key}", "vllm": "null", "kvproof": _short(kvproof[key])})
            continue
        if key not in kvproof:
            out.append({"path": f"$.{key}", "vllm": _short(value), "kvproof": MISSING})
        else:
            _diff(value, kvproof[key], f"$.{key}", out)
    return out


def step_by_step_differences(geometry: dict, kvproof: dict) -> list[dict]:
    """kvproof's decode runs (``kvproof/sim/requests/decode_runs.py``) against its step-by-step path
    (``kvproof.sim.requests.scheduler.step_by_step``) on the same geometry: the keys of docs/requests.md must
    be identical, step for step (paths ``$.step_by_step...``)."""
    if kvproof.get("status") == "crashed":
        return []
    from kvproof.sim import simulate_document
    from kvproof.sim.requests.scheduler import step_by_step

    with step_by_step():
        reference = simulate_document(json.loads(json.dumps(geometry)))
    out: list[dict] = []
    for key in (*KEYS, "simulation_raised"):
        mine, theirs = kvproof.get(key, MISSING), reference.get(key, MISSING)
        if mine != theirs:  # (the "vllm" side of these differences is the step-by-step answer)
            found = len(out)
            _diff(theirs, mine, f"$.step_by_step.{key}", out)
            if len(out) == found:
                out.append({"path": f"$.step_by_step.{key}", "vllm": _short(theirs), "kvproof": _short(mine)})
    return out


def check(test: str, geometry: dict, vllm: dict, kvproof: dict, report) -> list[dict]:
    """Compare, and count the case in the session report (its workload as vLLM served it too). Also
    kvproof's decode runs against its own step-by-step path (``step_by_step_differences``)."""
    differences = compare(vllm, kvproof) + step_by_step_differences(geometry, kvproof)
    report.record(test, geometry, differences)
    report.record_workload(test, vllm)
    return differences


def _format(what: str, geometry: dict, differences: list[dict]) -> str:
    lines = [f"kvproof disagrees with vLLM 0.33.0 ({what})", "geometry: " + json.dumps(geometry)]
    lines += [f"  {d['path']}: vLLM {d['vllm']} | kvproof {d['kvproof']}" for d in differences]
    return "\n".join(lines)


# --- fixtures --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def requests_oracle():
    if not VENV_PYTHON.exists():
        pytest.skip(f"{VENV_PYTHON} is absent: run `bash scripts/conformance-setup.sh`")
    proc = OracleProcess(VENV_PYTHON, ORACLE_REQUESTS, "conformance-oracle-requests.stderr.log")
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def simulate_requests(simulate):
    """conftest's ``simulate`` (``kvproof.sim.simulate_document``) on a private copy; a crash is
    reported as a disagreement."""

    def run(geometry: dict) -> dict:
        try:
            return simulate(json.loads(json.dumps(geometry)))
        except Exception as exc:  # noqa: BLE001 - a crash is reported as a disagreement
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            return {"status": "crashed", "error": {
                "message": f"{type(exc).__name__}: {exc} at {Path(frame.filename).name}:{frame.lineno}"}}

    return run


# --- (a) the goldens ------------------------------------------------------------------------------

def test_request_goldens_exist():
    assert len(GOLDEN) >= 10, f"too few request goldens under {REQUESTS}"
    for path in GOLDEN:
        assert _expected(path).exists(), f"{path.name} has no {_expected(path).name}"
        expected = json.loads(_expected(path).read_text())
        assert expected["status"] == "ok", f"{path.name}: the golden is {expected['status']}: {expected.get('error')}"
        assert any(expected.get(k) is not None for k in KEYS), f"{path.name}: nothing simulated"


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_request_golden_is_what_vllm_computes(path: Path, requests_oracle):
    """The stored answer is still exactly what vLLM 0.33.0's manager and scheduler compute."""
    geometry = json.loads(path.read_text())
    assert requests_oracle(geometry) == json.loads(_expected(path).read_text())


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_request_golden_simulated(path: Path, simulate_requests, report):
    geometry = json.loads(path.read_text())
    differences = check("requests:golden", geometry, json.loads(_expected(path).read_text()),
                        simulate_requests(geometry), report)
    if differences:
        report.disagreement(f"requests:golden:{path.stem}", geometry, differences)
    assert not differences, _format(f"golden {path.stem}, simulate_document", geometry, differences)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_request_golden_cli(path: Path):
    """``kvproof simulate NAME.json --format json`` prints the same keys."""
    proc = subprocess.run([sys.executable, "-m", "kvproof", "simulate", str(path), "--format", "json"],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    try:
        answer = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON ({exc}): {proc.stdout[:2000]}\n{proc.stderr[-2000:]}") from None
    geometry = json.loads(path.read_text())
    differences = compare(json.loads(_expected(path).read_text()), answer)
    assert not differences, _format(f"golden {path.stem}, kvproof simulate --format json", geometry, differences)


# --- (b) seeded random workloads, live -------------------------------------------------------------

FULL = {"name": "model.layers.{i}.self_attn.attn", "spec": "FullAttentionSpec",
        "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16"}


def _template(rng: random.Random) -> dict:
    """A start-up geometry of one of the families the goldens cover."""
    block = rng.choice([16, 32, 64])
    kind = rng.choice(["full", "swa", "hybrid_swa", "chunked", "mla", "mamba_align", "mamba_none", "eagle"])
    g: dict[str, Any] = {"block_size": block, "available_memory_bytes": 8 * 2**30, "enable_prefix_caching": True}
    if kind == "full":
        g["layers"] = [{**FULL, "range": [0, rng.choice([4, 32])]}]
    elif kind == "swa":
        g["layers"] = [{**FULL, "spec": "SlidingWindowSpec", "range": [0, 8],
                        "sliding_window": rng.choice([64, 128, 500, 1024])}]
    elif kind == "hybrid_swa":
        g["layers"] = [{**FULL, "indices": [0, 2, 4, 6]},
                       {**FULL, "spec": "SlidingWindowSpec", "indices": [1, 3, 5, 7],
                        "sliding_window": rng.choice([128, 512])}]
    elif kind == "chunked":
        g["layers"] = [{**FULL, "spec": "ChunkedLocalAttentionSpec", "indices": [0, 1, 2],
                        "attention_chunk_size": rng.choice([256, 1024])},
                       {**FULL, "index": 3}]
    elif kind == "mla":
        g["layers"] = [{"name": "model.layers.{i}.self_attn.attn", "range": [0, 8], "spec": "MLAAttentionSpec",
                        "num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16", "max_tp_shards": 1}]
    elif kind in ("mamba_align", "mamba_none"):
        g["layers"] = [{"name": "model.layers.{i}.mamba", "indices": [0, 1, 2, 4, 5, 6], "spec": "MambaSpec",
                        "shapes": [[3, 1024], [16, 32, 64]], "dtypes": ["bfloat16", "bfloat16"],
                        "mamba_type": "MAMBA2", "num_prefill_checkpoint_blocks": 1,
                        "prefill_checkpoint_alignment": 1},
                       {**FULL, "indices": [3, 7]}]
        g["enable_prefix_caching"] = kind == "mamba_align"
        g["platform_alignment"] = {"use_mla": False, "num_kv_heads": 8, "head_size": 128,
                                   "model_dtype": "bfloat16", "backend_kernel_block_sizes": [{"MultipleOf": 16}],
                                   "mamba_prefill_checkpoint_alignment": 1}
        g["block_size"] = 16
    else:  # eagle
        g["layers"] = [{**FULL, "range": [0, 8]},
                       {**FULL, "name": "draft.layers.{i}.attn", "index": 8, "is_draft": True}]
        g["speculative"] = {"method": "eagle", "num_speculative_tokens": rng.choice([1, 3])}
    g["name"] = f"random_{kind}"
    return g


def random_geometry(seed: int) -> dict:
    rng = random.Random(seed)
    g = _template(rng)
    max_len = rng.choice([2048, 4096, 8192])
    g["max_model_len"] = max_len
    g["max_num_batched_tokens"] = rng.choice([128, 256, 512, 2048, 8192])
    if rng.random() < 0.5:
        g["max_num_seqs"] = rng.choice([1, 2, 4, 8, 16])
        g["max_num_batched_tokens"] = max(g["max_num_batched_tokens"], g["max_num_seqs"])
    if rng.random() < 0.5:
        # A small pool (preemption, eviction) that still holds one max_model_len request in each group
        # (a smaller one is a start-up refusal, which test_conformance.py covers).
        groups = {"hybrid_swa": 2, "chunked": 2, "eagle": 2, "mamba_align": 8, "mamba_none": 8}.get(
            g["name"][len("random_"):], 1)
        g["num_gpu_blocks_override"] = groups * (max_len // g["block_size"] + 2) * rng.choice([1, 1, 2, 3, 8]) + 1
    sim: dict[str, Any] = {"max_steps": 3000}
    if rng.random() < 0.6:
        # Usually at most max_model_len: as the workload's long_prefill_token_threshold a larger value
        # makes vLLM's SchedulerConfig refuse to start (config/scheduler.py:355-360; the oracle runs
        # that check, oracle_requests.threshold_refusal).
        sim["chunk_tokens"] = rng.choice([c for c in (16, 100, 256, 512, 1024, 4096) if c <= max_len]
                                         + [max_len + 1])
    if rng.random() < 0.6:
        sim["prompt_tokens"] = rng.randrange(1, max_len // 2)
        sim["decode_tokens"] = rng.randrange(0, 40)
        sim["prefix_hit_probe"] = rng.random() < 0.8
    if rng.random() < 0.8 or "prompt_tokens" not in sim:
        names = ["sys", "doc", "tools"][: rng.randrange(0, 4)]
        reqs = []
        for i in range(rng.randrange(1, 25)):
            decode = rng.randrange(1, 60)
            prompt = rng.randrange(1, max(2, min(3000, max_len - decode - 1)))
            r: dict[str, Any] = {"id": f"r{i}", "arrival_step": rng.randrange(0, 30), "prompt_tokens": prompt,
                                 "decode_tokens": decode}
            if names and rng.random() < 0.7:
                r["shared_prefix"] = rng.choice(names)
                r["shared_prefix_tokens"] = rng.randrange(0, prompt + 1)
            reqs.append(r)
        sim["requests"] = reqs
    g["simulate"] = sim
    return g


@pytest.mark.parametrize("case", range(RANDOM_CASES), ids=lambda i: f"seed{RANDOM_SEED + i}")
def test_random_workload_live(case: int, requests_oracle, simulate_requests, report):
    geometry = random_geometry(RANDOM_SEED + case)
    differences = check("requests:random", geometry, requests_oracle(geometry), simulate_requests(geometry), report)
    if differences:
        report.disagreement(f"requests:random:seed{RANDOM_SEED + case}", geometry, differences)
    assert not differences, _format(f"random seed {RANDOM_SEED + case}", geometry, differences)


# --- (c) the bundled examples that carry a simulate block, live --------------------------------------

EXAMPLES = sorted(p for p in (ROOT / "examples" / "geometries").glob("*.json") if "simulate" in json.loads(p.read_text()))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_requests_live(path: Path, requests_oracle, simulate_requests, report):
    geometry = json.loads(path.read_text())
    differences = check("requests:example", geometry, requests_oracle(geometry), simulate_requests(geometry), report)
    if differences:
        report.disagreement(f"requests:example:{path.stem}", geometry, differences)
    assert not differences, _format(f"example {path.name}", geometry, differences)


# --- (d) Hypothesis: generated geometries of every family with generated simulate blocks, live -------

HYPOTHESIS_CASES = int(os.environ.get("KVPROOF_REQUESTS_HYPOTHESIS", "150"))


def test_generated_geometries_and_workloads_live(requests_oracle, simulate_requests, report):
    """``kvproof.fuzz.strategies.geometries_with_requests`` (all eight model families, tight and small
    pools, crowded workloads, max_num_seqs limits, single requests and workloads): kvproof == vLLM on
    every drawn case, refusals and vLLM's own raises included. The final (shrunk) disagreement goes
    to the session report with its geometry and differing keys."""
    from hypothesis import HealthCheck, given, note, seed, settings

    from kvproof.fuzz.strategies import geometries_with_requests

    test = "requests:generated"
    last: list[tuple[dict, list[dict]]] = []

    @settings(max_examples=HYPOTHESIS_CASES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(geometries_with_requests())
    def agree(geometry):
        differences = check(test, geometry, requests_oracle(geometry), simulate_requests(geometry), report)
        if differences:
            last[:] = [(geometry, differences)]  # the final replay is the shrunk example
            note(_format("generated", geometry, differences))
        assert not differences, _format("generated", geometry, differences)

    if REQUESTS_SEED_GIVEN:
        agree = seed(REQUESTS_SEED)(agree)
    try:
        agree()
    finally:
        for geometry, differences in last:
            report.disagreement(test, geometry, differences)


# --- (e) the long-prefill threshold against the length before auto-fit, live ----------------------

def test_threshold_above_the_length_before_auto_fit_is_refused_live(requests_oracle, simulate_requests, report):
    """vLLM checks the workload's threshold once, against max_model_len before auto-fit
    (config/scheduler.py:315, 355-360; oracle_requests.threshold_refusal): 2,048 over the fitted 1,008
    is served (golden autofit_threshold_above_fitted_len), 4,097 over the 4,096 before fitting is not."""
    geometry = json.loads((REQUESTS / "autofit_threshold_above_fitted_len.json").read_text())
    geometry["simulate"]["chunk_tokens"] = 4097
    vllm = requests_oracle(geometry)
    assert vllm["workload"] == {"refused": {
        "type": "ValueError",
        "message": "long_prefill_token_threshold (4097) cannot be greater than the max_model_len (4096)."}}
    differences = check("requests:threshold", geometry, vllm, simulate_requests(geometry), report)
    assert not differences, _format("threshold before auto-fit", geometry, differences)
