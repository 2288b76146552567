"""Fixtures of the conformance suite: vLLM 0.33.0 itself (through ``oracle.py`` in ``.venv-vllm``)
against ``kvproof.sim.simulate_document``, key by key.

Opt-in: ``bash scripts/conformance-setup.sh && python -m pytest -m conformance tests/conformance``.
Without ``.venv-vllm/bin/python`` every test here is skipped with the reason; with it, a missing
``kvproof.sim.simulate_document`` fails the tests (it does not skip them).

At the end of the session the terminal summary (and ``out/conformance-report.json``) lists the
cases run, the agreements, and every disagreement with its geometry (the shrunk one, for
Hypothesis) and the differing keys.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from oracle_process import HERE, REQUESTS_SEED, REQUESTS_SEED_GIVEN, ROOT, VENV_PYTHON, OracleProcess

GEOMETRIES = HERE / "geometries"
REPORT = ROOT / "out" / "conformance-report.json"

NO_VENV_REASON = (
    f"{VENV_PYTHON} is absent: run `bash scripts/conformance-setup.sh` to create the vLLM 0.33.0 "
    "environment the conformance oracle needs"
)


def pytest_collection_modifyitems(config, items):
    """Every test of this directory is a conformance test; skip them all without the venv, unless
    ``KVPROOF_CONFORMANCE_REQUIRED`` is set (CI, scripts/ci-conformance.sh): then that is an error."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.conformance)
            if not VENV_PYTHON.exists():
                if os.environ.get("KVPROOF_CONFORMANCE_REQUIRED"):
                    raise pytest.UsageError(NO_VENV_REASON)
                item.add_marker(pytest.mark.skip(reason=NO_VENV_REASON))


# --- the oracle process (oracle_process.py) -----------------------------------------------------

@pytest.fixture(scope="session")
def oracle():
    if not VENV_PYTHON.exists():
        pytest.skip(NO_VENV_REASON)
    (ROOT / "out").mkdir(exist_ok=True)
    proc = OracleProcess(VENV_PYTHON)
    yield proc
    proc.close()


@pytest.fixture(scope="session")
def simulate():
    """``kvproof.sim.simulate_document``; its absence is a failure, not a skip."""
    try:
        from kvproof.sim import simulate_document
    except ImportError as exc:  # noqa: F841 - reported below
        pytest.fail(
            "kvproof.sim.simulate_document(doc: dict) -> dict is missing: the conformance suite "
            f"compares it with vLLM 0.33.0 ({type(exc).__name__}: {exc})", pytrace=False)
    return simulate_document


# --- the report -----------------------------------------------------------------------------------

def coverage_keys(geometry: dict, vllm: dict) -> set[str]:
    """What a compared case exercised: its spec classes, vLLM's answer (status, refusing stage),
    the layout class and packing of the plan, the Mamba mode and the engine features it sets."""
    keys: set[str] = set()
    layers = geometry.get("layers") or []
    specs = {layer.get("spec") for layer in layers}
    keys |= {f"spec:{s}" for s in specs}
    status = vllm.get("status")
    keys.add(f"status:{status}")
    if status == "refused":
        error = vllm.get("error") or {}
        keys.add(f"refused_at:{error.get('stage')}")
        keys.add(f"refusal_type:{error.get('type')}")
    if "MambaSpec" in specs:
        pc = geometry.get("enable_prefix_caching", True) and not any(l.get("non_causal") for l in layers)
        keys.add(f"mamba_mode_requested:{'align' if pc else 'none'}")
        if any(l.get("num_prefill_checkpoint_blocks") for l in layers):
            keys.add("feature:mamba_checkpoint_blocks")
        spec_blocks = bool(geometry.get("num_speculative_tokens") or geometry.get("speculative"))
        if spec_blocks:
            keys.add("feature:mamba_speculative_blocks")
        checkpoints = any(l.get("num_prefill_checkpoint_blocks") for l in layers)
        keys.add(f"mamba_combo:{'align' if pc else 'none'}"
                 f"{'+speculative' if spec_blocks else ''}{'+checkpoint' if checkpoints else ''}")
    if status == "ok":
        layout = vllm.get("kv_cache_layout") or ""
        keys.add(f"layout:{layout}")
        keys.add("layout_class:" + ("block_outer" if layout.startswith("B") else "layer_outer"))
        groups = vllm.get("groups") or []
        keys |= {f"group_spec:{g['spec']}" for g in groups}
        if any(g["spec"] == "UniformTypeKVCacheSpecs" for g in groups):
            keys.add("plan:packed_uniform_type_group")
        if any(g.get("is_eagle_group") for g in groups):
            keys.add("plan:eagle_group")
        if vllm.get("mamba_cache_mode"):
            keys.add(f"mamba_mode:{vllm['mamba_cache_mode']}")
        if "worker_views" in vllm:
            keys.add("plan:worker_views")
        if vllm.get("platform_alignment"):
            keys.add("plan:platform_alignment")
        if len(vllm.get("workers") or []) > 1:
            keys.add("plan:pipeline_workers")
        if not groups:
            keys.add("plan:attention_free")
    for name in ("prefix_match_unit", "views", "workers", "num_gpu_blocks_override", "platform_alignment",
                 "kv_cache_layout", "supported_kv_cache_layouts", "max_num_batched_tokens", "async_scheduling"):
        if geometry.get(name) is not None:
            keys.add(f"feature:{name}")
    if geometry.get("prefix_cache_retention_interval"):
        keys.add("feature:prefix_cache_retention_interval")
    if geometry.get("disable_hybrid_kv_cache_manager"):
        keys.add("feature:hma_off")
    if geometry.get("enable_prefix_caching") is False:
        keys.add("feature:prefix_caching_off")
    if (geometry.get("tp") or 1) > 1:
        keys.add("feature:tp")
    if (geometry.get("dcp") or 1) > 1:
        keys.add("feature:dcp")
    if geometry.get("layer_order") == "as_listed":
        keys.add("feature:layer_order_as_listed")
    if "block_size" not in geometry:
        keys.add("feature:default_block_size")
    if geometry.get("speculative"):
        keys.add(f"speculative:{geometry['speculative']['method']}")
    if any(l.get("is_draft") for l in layers):
        keys.add("feature:draft_layer")
    if any(l.get("non_causal") for l in layers):
        keys.add("feature:non_causal")
    if any(l.get("cache_role") == "indexer" for l in layers):
        keys.add("feature:mla_indexer")
    return keys


@dataclass
class Report:
    """Every comparison of the session."""

    cases: int = 0
    agreements: int = 0
    by_test: dict[str, list[int]] = field(default_factory=dict)  # test -> [cases, agreements]
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    coverage: dict[str, int] = field(default_factory=dict)  # generated cases only: key -> cases
    distinct: dict[str, set] = field(default_factory=dict)  # test -> canonical JSON of its geometries
    #: requests over time (test_requests_parity.py): test -> [cases, workloads vLLM served, of them
    #: with at least one preemption]
    workloads: dict[str, list[int]] = field(default_factory=dict)

    def record(self, test: str, geometry: dict, differences: list[dict], vllm: dict | None = None) -> None:
        """One comparison (Hypothesis calls it for every example it tries)."""
        self.cases += 1
        counts = self.by_test.setdefault(test, [0, 0])
        counts[0] += 1
        if not differences:
            self.agreements += 1
            counts[1] += 1
        if test.startswith("generated:") and vllm is not None:
            self.distinct.setdefault(test, set()).add(json.dumps(geometry, sort_keys=True))
            for key in coverage_keys(geometry, vllm):
                self.coverage[key] = self.coverage.get(key, 0) + 1

    def record_workload(self, test: str, vllm: dict) -> None:
        """The workload of one requests case as vLLM served it (its totals), counted per test."""
        counts = self.workloads.setdefault(test, [0, 0, 0])
        counts[0] += 1
        totals = (vllm.get("workload") or {}).get("totals")
        if totals is not None:
            counts[1] += 1
            counts[2] += totals["preemptions"] > 0

    def disagreement(self, test: str, geometry: dict, differences: list[dict]) -> None:
        """The final (shrunk, for Hypothesis) disagreement of a test."""
        self.disagreements.append({"test": test, "geometry": geometry, "differences": differences})


    def to_json(self) -> dict:
        """What an xdist worker sends back to the controller (``workeroutput`` holds JSON only)."""
        return {"cases": self.cases, "agreements": self.agreements, "by_test": self.by_test,
                "disagreements": self.disagreements, "coverage": self.coverage,
                "distinct": {test: sorted(seen) for test, seen in self.distinct.items()},
                "workloads": self.workloads}

    def merge(self, other: dict) -> None:
        """Add a worker's comparisons to this (the controller's) report."""
        self.cases += other["cases"]
        self.agreements += other["agreements"]
        for test, counts in other["by_test"].items():
            mine = self.by_test.setdefault(test, [0, 0])
            self.by_test[test] = [a + b for a, b in zip(mine, counts)]
        self.disagreements.extend(other["disagreements"])
        self.disagreements.sort(key=lambda item: (item["test"], json.dumps(item, sort_keys=True)))
        for key, cases in other["coverage"].items():
            self.coverage[key] = self.coverage.get(key, 0) + cases
        for test, seen in other["distinct"].items():
            self.distinct.setdefault(test, set()).update(seen)
        for test, counts in other["workloads"].items():
            mine = self.workloads.setdefault(test, [0, 0, 0])
            self.workloads[test] = [a + b for a, b in zip(mine, counts)]


REPORT_STATE = Report()


@pytest.fixture(scope="session")
def report() -> Report:
    return REPORT_STATE


def seeds(config) -> dict:
    """The seeds of the session: Hypothesis' (``--hypothesis-seed``; null = a random one per test) and
    the requests suite's (``KVPROOF_REQUESTS_SEED``, which also seeds its Hypothesis test)."""
    return {"hypothesis": config.getoption("hypothesis_seed", None), "requests": REQUESTS_SEED,
            "requests_seed_given": REQUESTS_SEED_GIVEN}


# Under pytest-xdist (scripts/ci-conformance.sh runs -n 2) each worker compares its share of the
# cases: it hands its report to the controller, which merges them and prints the one summary.
def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["kvproof_conformance"] = REPORT_STATE.to_json()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", None) or {}
    if "kvproof_conformance" in output:
        REPORT_STATE.merge(output["kvproof_conformance"])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = REPORT_STATE
    if not state.cases and not state.disagreements:
        return
    tr = terminalreporter
    tr.section("kvproof vs vLLM 0.33.0 conformance")
    tr.write_line("seeds: " + ", ".join(f"{k} {v}" for k, v in seeds(config).items()))
    tr.write_line(f"cases run: {state.cases}, agreements: {state.agreements}, "
                  f"disagreeing cases: {state.cases - state.agreements} "
                  f"(Hypothesis counts every example it tried, shrinking included)")
    generated = sum(c for t, (c, _) in state.by_test.items() if t.startswith("generated:"))
    distinct = {test: len(seen) for test, seen in state.distinct.items()}
    tr.write_line(f"generated cases: {generated} ({sum(distinct.values())} distinct geometries)")
    for test, (cases, agree) in sorted(state.by_test.items()):
        if not test.startswith("golden:"):
            extra = f" ({distinct[test]} distinct)" if test in distinct else ""
            tr.write_line(f"  {test}: {cases} cases{extra}, {agree} agreements")
    goldens = [v for t, v in state.by_test.items() if t.startswith("golden:")]
    if goldens:
        tr.write_line(f"  golden:*: {sum(c for c, _ in goldens)} cases, {sum(a for _, a in goldens)} agreements")
    for test, (cases, served, preempting) in sorted(state.workloads.items()):
        tr.write_line(f"workloads of {test}: {cases} cases, {served} workloads served by vLLM, "
                      f"{preempting} of them preempting")
    if state.coverage:
        tr.write_line("coverage of the generated cases (cases per key):")
        for prefix in sorted({k.split(":")[0] for k in state.coverage}):
            items = sorted((k, v) for k, v in state.coverage.items() if k.split(":")[0] == prefix)
            tr.write_line(f"  {prefix}: " + ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in items))
    for item in state.disagreements:
        tr.write_line("")
        tr.write_line(f"DISAGREEMENT in {item['test']}")
        tr.write_line("  geometry: " + json.dumps(item["geometry"]))
        for diff in item["differences"]:
            tr.write_line(f"  {diff['path']}: vLLM {diff['vllm']} | kvproof {diff['kvproof']}")
    try:
        REPORT.parent.mkdir(exist_ok=True)
        REPORT.write_text(json.dumps({"cases": state.cases, "agreements": state.agreements,
                                      "generated_cases": generated,
                                      "distinct_generated_geometries": sum(distinct.values()),
                                      "distinct_by_test": distinct,
                                      "by_test": state.by_test,
                                      "coverage": dict(sorted(state.coverage.items())),
                                      "workloads": {test: dict(zip(("cases", "served", "preempting"), counts))
                                                    for test, counts in sorted(state.workloads.items())},
                                      "seeds": seeds(config),
                                      "disagreements": state.disagreements},
                                     indent=1) + "\n")
        tr.write_line(f"report: {REPORT.relative_to(ROOT)}")
    except OSError as exc:
        tr.write_line(f"(report not written: {exc})")
