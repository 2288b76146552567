"""Claims: an invariant holds over every accepted document of the bound, or a counterexample
that the checker accepts violates it."""

from __future__ import annotations

import json

from kvproof.cli import main
from kvproof.solver.claims import expression_claim, prove_claim, shipped_claims, validate
from kvproof.solver.prove import Prover
from kvproof.solver.shapes import Bound

FAST = Bound(groups=1, layers=1, mutations=0)


def _claim(claim_id: str):
    return next(c for c in shipped_claims() if c.id == claim_id)


def test_state_peak_bytes_claim_holds_on_profiles() -> None:
    result = prove_claim(_claim("CL001"), Prover(bound=FAST))
    assert result.verdict == "holds", result.reason
    assert any(name in result.core for name in ("PF001", "PF009"))  # the rules that make it positive


def test_a_false_expression_is_refuted_with_an_accepted_counterexample() -> None:
    claim = expression_claim("All(g.num_layers < 100 for g in doc.resources.cache_groups)", "profile")
    result = prove_claim(claim, Prover(bound=FAST))
    assert result.verdict == "refuted"
    assert validate(claim, result.documents)[0] == "refuted"
    groups = json.loads(result.documents[0][1])["resources"]["cache_groups"]
    assert any(g["num_layers"] >= 100 for g in groups)


def test_cli_claim_expression(capsys, tmp_path) -> None:
    code = main(["claim", "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups)", "--kind", "profile",
                 "--max-shape", "groups=1,layers=1,mutations=0", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["claims"][0]["verdict"] == "holds"
    code = main(["claim", "All(g.num_layers < 100 for g in doc.resources.cache_groups)", "--kind", "profile",
                 "--max-shape", "groups=1,layers=1,mutations=0", "--output", str(tmp_path)])
    assert code == 1
    assert (tmp_path / "EXPR.json").is_file()
    assert main(["claim"]) == 2
    capsys.readouterr()


def test_shipped_claims_declare_their_kind() -> None:
    claims = shipped_claims()
    assert {c.id for c in claims} >= {"CL001", "CL002", "CL003", "CL004"}
    assert all(c.kind in ("profile", "worker", "scheduler", "bundle") for c in claims)


def test_admission_claim_holds_by_the_one_request_rule() -> None:
    # CL003 was refuted (docs/solver-requests.md #9) until SU005 refused a pool smaller than one
    # request at max_model_len; now it holds within the bound, SU005 in the core
    result = prove_claim(_claim("CL003"), Prover(bound=FAST))
    assert result.verdict == "holds" and result.expect == "holds" and not result.contrary
    assert "SU005" in result.core

def test_admission_claim_is_decided_over_every_shape_of_the_default_bound() -> None:
    # CL003 was a `mismatch`: the claim term was built before encoding the rules pinned and rebuilt
    # the documents, so the solver's "counterexample" set variables no rule constrained any more
    result = prove_claim(_claim("CL003"), Prover())
    assert result.verdict == "holds", result.reason
    assert "SU005" in result.core and result.shapes > 12


def test_shipped_claims_are_decided_the_same_under_two_hash_seeds(tmp_path) -> None:
    import os
    import subprocess
    import sys

    reports = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "kvproof", "claim", "--all", "--kind", "scheduler", "--format",
                               "json"], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        reports.append(proc.stdout)
    assert reports[0] == reports[1]  # byte for byte: no clock in the report
    assert [c["verdict"] for c in json.loads(reports[0])["claims"]] == ["holds"]


def test_zero_shapes_prove_nothing(tmp_path, monkeypatch, capsys) -> None:
    # after `pip install .` the examples were missing and every claim "held" over 0 shapes
    monkeypatch.setenv("KVPROOF_EXAMPLES", str(tmp_path))
    assert main(["claim", "--all", "--format", "json"]) == 3
    report = json.loads(capsys.readouterr().out)["claims"]
    assert {c["claim"] for c in report} >= {"CL001", "CL002", "CL003", "CL004"}
    assert all(c["verdict"] == "unknown" and c["shapes"] == 0 and "zero shapes" in c["reason"] for c in report)
    result = prove_claim(_claim("CL001"), Prover(examples=tmp_path))
    assert result.verdict == "unknown" and not result.contrary


def test_zero_claims_prove_nothing(tmp_path, capsys) -> None:
    empty = tmp_path / "none.py"
    empty.write_text("from kvproof.solver.claims import claim  # declares nothing\n")
    assert main(["claim", "--claims", str(empty)]) == 3
    assert "declare no claim" in capsys.readouterr().out
    assert main(["claim", "--all", "--kind", "bundle"]) == 3
    assert "of kind bundle" in capsys.readouterr().out


def test_a_claim_that_is_no_truth_value_is_bad_input(capsys) -> None:
    assert main(["claim", "doc.resources.cache_groups[0].num_layers", "--max-shape", "groups=1,layers=1,mutations=0"]) == 2
    assert "a claim is true or false" in capsys.readouterr().err


def test_a_claim_is_decided_by_its_premises_alone() -> None:
    # CL004 took 30 s with every rule asserted (products of the worker kind); against BO001, BO004
    # and BO008 alone every shape is unsat at once, and the core names only those rules
    from kvproof.rules.registry import all_rules

    result = prove_claim(_claim("CL004"), Prover(bound=FAST))
    assert result.verdict == "holds", result.reason
    named = {c for c in result.core if c in {r.id for r in all_rules()}}
    assert named == {"BO001", "BO004", "BO008"}


def test_premises_that_do_not_decide_leave_the_verdict_to_the_full_search() -> None:
    import attrs

    # BO001 alone does not keep a view inside the storage: the search with every rule decides
    weak = attrs.evolve(_claim("CL004"), by=("BO001",))
    result = prove_claim(weak, Prover(bound=FAST))
    assert result.verdict == "holds", result.reason
    assert "BO008" in result.core
    # a false claim is refuted whatever its premises say: sat against them proves nothing
    false = attrs.evolve(expression_claim("All(g.num_layers < 100 for g in doc.resources.cache_groups)", "profile"),
                         by=("PF001",))
    result = prove_claim(false, Prover(bound=FAST))
    assert result.verdict == "refuted" and validate(false, result.documents)[0] == "refuted"


def test_premises_naming_no_rule_are_an_error() -> None:
    import attrs

    result = prove_claim(attrs.evolve(_claim("CL001"), by=("PF001", "XX999")), Prover(bound=FAST))
    assert result.verdict == "error" and "XX999" in result.reason and result.contrary


def test_the_premises_build_pins_no_field_the_full_search_leaves_free() -> None:
    # why a premise answer stands for the full search (kvproof/solver/claims/premises.py): a pin
    # holds a field at its template value, so fewer pins are more documents; the premises'
    # session must pin nothing that the full search's (the kind's closed pins and the claim's) does not
    from kvproof.solver.claims.premises import premise_rules
    from kvproof.solver.expression import symbolic_value
    from kvproof.solver.pins import DEFAULT_PINS
    from kvproof.solver.session import Session

    prover = Prover(bound=FAST)
    checked = 0
    for target in shipped_claims():
        premises = premise_rules(target.by, prover.rules)
        for shape in prover.bases(target.kind):
            light = Session(shape, premises, prover.config, set(DEFAULT_PINS))
            symbolic_value(light, target.apply)
            full = prover.session(shape).fork()
            symbolic_value(full, target.apply)
            assert light.pins <= full.pins, (target.id, shape.name, light.pins - full.pins)
            checked += 1
    assert checked > 10

