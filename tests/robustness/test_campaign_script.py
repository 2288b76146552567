"""scripts/robustness-campaign.py: the same seed plans the same cases, every entry point gets
inputs, and a small run passes (the full 2,000-case run is docs/robustness.md's, not the suite's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("campaign", ROOT / "scripts" / "robustness-campaign.py")
campaign = importlib.util.module_from_spec(spec)
spec.loader.exec_module(campaign)

REQUIRED = {"check", "check --probe", "simulate", "synth", "claim", "explore", "prove --examples", "import"}


def test_every_entry_point_of_the_issue_is_covered() -> None:
    assert REQUIRED <= set(campaign.ENTRY_POINTS)
    cases = campaign.plan_cases(400, seed=1)
    assert {c["entry"] for c in cases} == set(campaign.ENTRY_POINTS)
    assert cases == campaign.plan_cases(400, seed=1)  # deterministic
    assert len({c["data"] for c in cases if "data" in c}) > 200  # mutated, not copies


def test_a_small_run_passes_and_a_failure_would_be_seen() -> None:
    cases = [c for c in campaign.plan_cases(60, seed=2) if c["entry"] in ("check", "simulate", "synth")
             and c.get("special") not in ("fifo_silent", "big_sparse")][:24]
    results = campaign.run(cases, jobs=2, fresh=2, seed=2, progress=False)
    assert len(results) == len(cases)
    assert sum(r["fresh"] for r in results) == 2
    assert [campaign.failures(r) for r in results if campaign.failures(r)] == []
    assert all(0 <= r["code"] <= 4 for r in results)
    summary = campaign.summarize(results)
    assert summary["cases"] == len(cases) and summary["tracebacks"] == 0
    # the classifier itself: a traceback, exit 5, 11 s and 3 GiB are each a failure
    bad = {"traceback": True, "code": 5, "hang": False, "seconds": 11.0, "max_rss_bytes": 3 << 30}
    assert campaign.failures(bad) == ["traceback", "exit 5", "hang", "memory"]
