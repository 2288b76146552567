"""Same input, same output bytes: every report format, two runs in separate processes with
different hash seeds (set and dict ordering must not leak into a report). The same runs also
check the malformed corpus walked as one directory next to good record sets, in every format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from robust_harness import CORPUS, EXAMPLES, ROOT, kvproof_many

#: Accepted records (GLM, with cross-record rules), refusals of several families, and bad input.
RULE_CASES = ("CK002", "PF001", "PF006", "VC003", "BO006", "SU002", "SC002", "PC001")
MINIMAX = EXAMPLES / "minimax-m27-tp4"
CASES = [json.loads(line) for line in (CORPUS / "expected.jsonl").read_text(encoding="utf-8").splitlines() if line]
INPUTS = (EXAMPLES / "glm53flash-tp4", MINIMAX, CORPUS,
          *(ROOT / "tests" / "rules" / case for case in RULE_CASES if (ROOT / "tests" / "rules" / case).is_dir()))
FORMATS = ("text", "json", "sarif", "junit")
SEEDS = ("0", "4242")


@pytest.fixture(scope="module")
def runs() -> dict:
    results = {}
    for seed in SEEDS:  # one batch per seed: the environment differs between the batches
        calls = {(fmt, seed): ("check", "--format", fmt, *INPUTS) for fmt in FORMATS}
        results.update(kvproof_many(calls, env={"PYTHONHASHSEED": seed}))
    return results


@pytest.mark.parametrize("fmt", FORMATS)
def test_check_reports_are_byte_for_byte_reproducible(runs, fmt) -> None:
    first, second = (runs[(fmt, seed)] for seed in SEEDS)
    first.assert_handled(codes=(2,))  # the corpus holds bad input
    assert first.code == second.code
    assert first.stdout == second.stdout
    assert first.stderr == second.stderr
    assert len(first.stdout) > 5_000


@pytest.mark.parametrize("fmt", FORMATS)
def test_corpus_directory_in_every_format(runs, fmt) -> None:
    """The whole corpus next to good record sets: each bad file is reported, the good ones pass."""
    run = runs[(fmt, SEEDS[0])]
    run.assert_handled(codes=(2,))
    if fmt == "json":
        report = json.loads(run.out)
        status = {Path(d["file"]).name: d for d in report["documents"] if Path(d["file"]).parent == CORPUS}
        for case in CASES:
            assert status[case["file"]]["status"] == ("refused" if case["exit"] == 1 else "bad_input"), case
        good = [d for d in report["documents"] if Path(d["file"]).parent in (MINIMAX, EXAMPLES / "glm53flash-tp4")]
        expected = sum(1 for folder in (MINIMAX, EXAMPLES / "glm53flash-tp4") for _ in folder.glob("*.json"))
        assert len(good) == expected and all(d["status"] == "accepted" for d in good), good
    elif fmt == "sarif":
        assert json.loads(run.out)["runs"][0]["results"]
    elif fmt == "junit":
        root = ET.fromstring(run.stdout)
        assert int(root.get("errors")) == sum(1 for c in CASES if c["exit"] == 2)
    else:
        for case in CASES:
            assert f"{CORPUS / case['file']}: {case['prints']}" in run.out, case


# ------------------------------------------------------------------------------ simulate and rules

GEOMETRIES = sorted((EXAMPLES / "geometries").glob("*.json"))
#: simulate (text and JSON) of every example geometry (ok and refused ones), a malformed one,
#: and rules (text and JSON, all rules and a selection): two hash seeds, the same bytes.
OTHER_CALLS = {
    **{("simulate", "json", g.name): ("simulate", "--format", "json", g) for g in GEOMETRIES},
    **{("simulate", "text", g.name): ("simulate", g) for g in GEOMETRIES
       if g.stem in ("glm-like-packed", "bamba-like-align", "refusal-not-enough-memory", "gemma-like-sliding-window")},
    **{("simulate", fmt, "bad"): ("simulate", "--format", fmt, CORPUS / "nan.json") for fmt in ("text", "json")},
    **{("rules", fmt, "all"): ("rules", "--format", fmt) for fmt in ("text", "json")},
    **{("rules", fmt, "some"): ("rules", "--format", fmt, *RULE_CASES) for fmt in ("text", "json")},
}


@pytest.fixture(scope="module")
def other_runs() -> dict:
    results = {}
    for seed in SEEDS:
        results.update({(*key, seed): run for key, run in
                        kvproof_many({key: args for key, args in OTHER_CALLS.items()},
                                     env={"PYTHONHASHSEED": seed}).items()})
    return results


@pytest.mark.parametrize("key", sorted(OTHER_CALLS), ids=lambda k: "-".join(k))
def test_simulate_and_rules_are_byte_for_byte_reproducible(other_runs, key) -> None:
    first, second = (other_runs[(*key, seed)] for seed in SEEDS)
    first.assert_handled(codes=(0, 1, 2))
    assert (first.code, first.stdout, first.stderr) == (second.code, second.stdout, second.stderr)
    assert first.stdout.strip() or first.stderr.strip()
    if key[1] == "json" and first.stdout.strip():
        json.loads(first.stdout)
