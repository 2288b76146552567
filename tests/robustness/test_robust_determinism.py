"""Same input, same output bytes: every report format, two runs in separate processes with
different hash seeds (set and dict ordering must not leak into a report)."""

from __future__ import annotations

import pytest

from robust_harness import CORPUS, EXAMPLES, ROOT, has_command, kvproof_many

#: Accepted records (GLM, with cross-record rules), refusals of several families, and bad input.
RULE_CASES = ("CK002", "PF001", "PF006", "VC003", "BO006", "SU002", "SC002", "PC001")
INPUTS = (EXAMPLES / "glm53flash-tp4", CORPUS,
          *(ROOT / "tests" / "rules" / case for case in RULE_CASES if (ROOT / "tests" / "rules" / case).is_dir()))
FORMATS = ("text", "json", "sarif", "junit")
SEEDS = ("0", "4242")


@pytest.fixture(scope="module")
def runs() -> dict:
    calls = {}
    for seed in SEEDS:
        for fmt in FORMATS:
            calls[("check", fmt, seed)] = ("check", "--format", fmt, *INPUTS)
        calls[("rules", "json", seed)] = ("rules", "--format", "json")
        calls[("schema", "record", seed)] = ("schema", "record")
        if has_command("simulate"):
            geometry = sorted((EXAMPLES / "geometries").glob("*.json"))[0]
            calls[("simulate", "json", seed)] = ("simulate", "--format", "json", geometry)
    by_seed = {seed: {key: args for key, args in calls.items() if key[2] == seed} for seed in SEEDS}
    results = {}
    for seed, seed_calls in by_seed.items():  # one batch per seed: the env differs between batches
        results.update(kvproof_many(seed_calls, env={"PYTHONHASHSEED": seed}))
    return results


@pytest.mark.parametrize("fmt", FORMATS)
def test_check_reports_are_byte_for_byte_reproducible(runs, fmt) -> None:
    first, second = (runs[("check", fmt, seed)] for seed in SEEDS)
    first.assert_handled(codes=(2,))  # the corpus holds bad input
    assert first.code == second.code
    assert first.stdout == second.stdout
    assert first.stderr == second.stderr
    assert len(first.stdout) > 5_000


@pytest.mark.parametrize("command", [("rules", "json"), ("schema", "record"), ("simulate", "json")], ids=" ".join)
def test_other_commands_are_reproducible(runs, command) -> None:
    if (*command, SEEDS[0]) not in runs:
        pytest.skip("kvproof/commands/simulate.py does not exist yet")
    first, second = (runs[(*command, seed)] for seed in SEEDS)
    assert first.code == second.code == 0, first.err
    assert first.stdout == second.stdout
