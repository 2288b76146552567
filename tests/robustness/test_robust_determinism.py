"""Same input, same output bytes: every report format, two runs in separate processes with
different hash seeds (set and dict ordering must not leak into a report)."""

from __future__ import annotations

import pytest

from robust_harness import CORPUS, EXAMPLES, ROOT, kvproof_many

#: Accepted records (GLM, with cross-record rules), refusals of several families, and bad input.
RULE_CASES = ("CK002", "PF001", "PF006", "VC003", "BO006", "SU002", "SC002", "PC001")
INPUTS = (EXAMPLES / "glm53flash-tp4", CORPUS,
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
