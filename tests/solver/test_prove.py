"""prove: reachable rules come with a witness the concrete checker refuses with that rule first,
dead rules with an unsat core of rule IDs and axiom names, unknown is never proof."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs
import pytest

from kvproof.cli import main
from kvproof.rules.core import Rule
from kvproof.rules.profile_fields import cache_groups
from kvproof.rules.registry import all_rules, get_rule
from kvproof.solver.calls import Config
from kvproof.solver.prove import Prover
from kvproof.solver.witnesses import replay_refusal
from kvproof.solver.shapes import Bound

FAST = Bound(groups=1, layers=1, mutations=0)


def profile_rules(*ids: str) -> list[Rule]:
    return [get_rule(rule_id) for rule_id in ids]


@pytest.fixture(scope="module")
def prover() -> Prover:
    return Prover(bound=FAST)


def test_a_reachable_rule_has_a_witness_refused_with_it_first(prover) -> None:
    result = prover.prove(get_rule("PF001"))
    assert result.verdict == "reachable" and not result.contrary
    assert replay_refusal("PF001", result.documents)[0] == "reachable"
    (file, text), = result.documents
    assert json.loads(text)["schema_version"] == "kvproof/profile/v1"
    assert result.changed  # the template fields the witness edits


def test_pf011_is_dead_by_the_loader_bound(prover) -> None:
    result = prover.prove(get_rule("PF011"))
    assert result.verdict == "dead" and result.expect == "dead" and not result.contrary
    assert result.core and all(name.startswith("LD:signed-range ") for name in result.core)
    assert any(name.endswith(".page_size_bytes") for name in result.core)


def test_every_profile_rule_meets_its_expectation(prover) -> None:
    for rule in all_rules():
        if rule.family != "PF":
            continue
        result = prover.prove(rule)
        if result.reason.startswith("no instance"):
            continue  # a rule over two groups has none in the one-group bound
        assert not result.contrary, (rule.id, result.verdict, result.reason)
        assert result.verdict == rule.expect


def test_a_resource_limit_gives_unknown_never_proof() -> None:
    starved = Prover(profile_rules("PF009", "PF010"), FAST, Config(timeout=5, rlimit=1))
    result = starved.prove(get_rule("PF010"))
    assert result.verdict == "unknown" and not result.contrary
    assert "canceled" in result.reason or "unknown" in result.reason or "limit" in result.reason


def _rule(rule_id: str, body, expect: str = "reachable") -> Rule:
    return Rule(id=rule_id, message="test", over=cache_groups, body=body, source="test", expect=expect,
                reason="test" if expect == "dead" else None)


def test_a_result_contrary_to_expect_is_reported() -> None:
    never_fails = _rule("PF901", lambda group: group.page_size_bytes != 0)
    rules = [get_rule("PF009"), never_fails]
    result = Prover(rules, FAST).prove(never_fails)
    assert result.verdict == "dead" and result.contrary
    assert "PF009" in result.core


def test_redundancy_names_the_rules_that_imply_a_rule() -> None:
    weaker = _rule("PF902", lambda group: group.page_size_bytes >= 0)
    rules = [get_rule("PF009"), weaker]
    prover = Prover(rules, FAST)
    assert prover.redundancy(weaker).verdict == "redundant"
    assert "PF009" in prover.redundancy(weaker).implied_by
    assert prover.redundancy(get_rule("PF009")).verdict == "needed"


def test_a_body_in_python_control_flow_is_pinned_not_misread() -> None:
    # ``if`` on a symbolic kind: the leaf is pinned to the template's value and the rule still runs
    def body(group):
        if group.kind == "state":
            return group.page_size_bytes > 0
        return True

    branching = _rule("PF903", body)
    prover = Prover([branching], FAST)
    result = prover.prove(branching)
    assert "resources.cache_groups.kind" in prover.pins
    assert result.verdict in ("reachable", "dead")


def test_cli_json_report(capsys, tmp_path) -> None:
    code = main(["prove", "PF001", "PF011", "--max-shape", "groups=1,layers=1,mutations=0", "--format", "json",
                 "--output", str(tmp_path)])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert code == 0
    by_id = {r["rule"]: r for r in report["rules"]}
    assert set(by_id["PF001"]) >= {"rule", "verdict", "expect", "witness", "core"}
    assert "seconds" not in by_id["PF001"]  # the clock only with --timings: the same bytes every run
    assert by_id["PF001"]["verdict"] == "reachable" and by_id["PF001"]["witness"] == str(tmp_path / "PF001.json")
    assert (tmp_path / "PF001.json").is_file()
    assert by_id["PF011"]["verdict"] == "dead" and by_id["PF011"]["witness"] is None
    assert by_id["PF011"]["core"]


def test_reports_carry_no_clock_unless_timings_is_given(capsys) -> None:
    args = ["prove", "PF001", "--max-shape", "groups=1,layers=1,mutations=0"]
    assert main(args) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("PF001  reachable (expect reachable)  shape: ") and not re.search(r"\d+\.\d\ds", line)
    assert main([*args, "--timings"]) == 0
    assert re.match(r"PF001  reachable \(expect reachable\) +\d+\.\d\ds  shape: ", capsys.readouterr().out)
    assert main([*args, "--format", "json", "--timings"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out)["rules"][0]["seconds"], float)
    assert main(["claim", "--kind", "profile", "--max-shape", "groups=1,layers=1,mutations=0",
                 "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups)", "--format", "json"]) == 0
    assert "seconds" not in json.loads(capsys.readouterr().out)["claims"][0]


def test_cli_usage_errors(capsys) -> None:
    assert main(["prove"]) == 2
    assert main(["prove", "XX999"]) == 2
    assert main(["prove", "PF001", "--max-shape", "bogus=1"]) == 2
    capsys.readouterr()


def test_cli_unknown_exits_3(capsys) -> None:
    code = main(["prove", "PF010", "--max-shape", "groups=1,layers=1,mutations=0", "--rlimit", "1"])
    assert code == 3
    assert "unknown" in capsys.readouterr().out


def test_record_rules_are_reachable_on_small_shapes() -> None:
    prover = Prover(bound=Bound(groups=1, layers=1, mutations=0))
    for rule_id in ("VG001", "CK002", "VC003", "BO004"):
        result = prover.prove(get_rule(rule_id))
        assert result.verdict == "reachable", (rule_id, result.reason)


@pytest.mark.slow
def test_prove_all_meets_every_expectation() -> None:
    prover = Prover()
    bad = []
    for rule in all_rules():
        result = prover.prove(rule)
        if result.contrary or result.verdict == "unknown":
            bad.append((rule.id, result.verdict, result.reason))
    assert bad == []


def test_nonlinear_consts_names_the_factors_of_symbolic_products() -> None:
    import z3

    from kvproof.solver.pins import nonlinear_consts

    x, y, z = z3.Ints("x y z")
    assert nonlinear_consts([3 * x + y <= z]) == set()
    assert nonlinear_consts([x * y <= z]) == {"x", "y"}
    assert nonlinear_consts([z3.If(x > 0, z / y, 0) == 1]) == {"y", "z"}
    assert nonlinear_consts([z / 4 == x]) == set()


def test_dead_core_text_is_readable() -> None:
    from kvproof.solver.prove import core_text

    assert core_text(["LD:signed-range $.a", "LD:signed-range $.b", "LD:signed-range $.c"]) == \
        "loader axioms only (LD:signed-range ×3)"
    text = core_text(["BO007", "BO008", 'SHAPE:pin $.cache.layer_tensors["x"][0].shape[1] = 3',
                      "SHAPE:pin $.cache.groups[0].block_size_tokens = 16", "LD:int-range $.x"])
    assert text == "BO007, BO008 + SHAPE:pin ×2 (block_size_tokens, shape held) + LD:int-range ×1"


def test_pf011_text_line_names_the_loader_axioms(capsys) -> None:
    code = main(["prove", "PF011", "--max-shape", "groups=1,layers=1,mutations=0"])
    out = capsys.readouterr().out
    assert code == 0 and "core: loader axioms only (LD:signed-range ×" in out


@pytest.mark.slow
def test_vc007_is_dead_by_the_view_extent_rules() -> None:
    result = Prover().prove(get_rule("VC007"))
    assert result.verdict == "dead" and not result.contrary, result.reason
    rules = [c for c in result.core if ":" not in c.split(" ")[0]]
    assert {"BO007", "BO008"} <= set(rules) <= {"BO007", "BO008", "BO009"}


def test_no_example_documents_is_unknown_never_dead(capsys, tmp_path) -> None:
    # a search over no shape proves nothing: unknown with the reason, exit 3 (was: dead, exit 1)
    code = main(["prove", "PF011", "PF001", "--examples", str(tmp_path), "--format", "json"])
    report = {r["rule"]: r for r in json.loads(capsys.readouterr().out)["rules"]}
    assert code == 3
    assert {r["verdict"] for r in report.values()} == {"unknown"}
    assert report["PF011"]["shapes_tried"] == 0 and report["PF011"]["core"] == []
    assert report["PF011"]["reason"] == f"no shapes: no example documents of kind profile under {tmp_path}"


def test_no_instance_in_any_shape_is_unknown_never_dead() -> None:
    from kvproof.rules.core import binding

    @binding("profile")
    def nothing(profile):
        return iter(())

    never = Rule(id="PF904", message="test", over=nothing, body=lambda _: True, source="test", expect="dead",
                 reason="test")
    result = Prover([never], FAST).prove(never)
    assert result.verdict == "unknown" and result.reason.startswith("no instance of the rule")


def test_prover_says_when_no_shape_exists(tmp_path) -> None:
    assert Prover(bound=FAST).shapeless(["profile"]) is None
    assert Prover(bound=FAST, examples=tmp_path).shapeless(["profile", "worker"]).startswith("no shapes")


@pytest.mark.parametrize("item, message", [
    ("groups=x", "bad --max-shape value for groups: 'x' is not an integer"),
    ("layers=", "bad --max-shape value for layers: '' is not an integer"),
    ("groups=0", "bad --max-shape value for groups: 0 (expected an integer >= 1)"),
    ("mutations=-1", "bad --max-shape value for mutations: -1 (expected an integer >= 0)"),
])
def test_a_bad_max_shape_value_is_a_usage_error(capsys, item, message) -> None:
    assert main(["prove", "PF001", "--max-shape", item]) == 2
    err = capsys.readouterr().err
    assert err == f"kvproof prove: {message}\n"


def test_the_examples_are_package_data() -> None:
    from importlib import resources

    from kvproof.commands.fuzz import default_paths
    from kvproof.solver.shapes import examples_dir

    packaged = Path(str(resources.files("kvproof").joinpath("examples")))
    assert examples_dir() == packaged and sorted(packaged.glob("*/*.json"))
    assert default_paths() == [str(packaged)]
    # the checkout's examples/ is the same folder (README: kvproof check examples/)
    assert (Path(__file__).resolve().parents[2] / "examples").resolve() == packaged.resolve()


def test_a_profile_in_the_replay_folder_has_the_replay_role() -> None:
    # kvproof plan checks its profile with role "replay" (ST028 binds it); the shapes and the
    # stored witnesses say so by the folder
    from kvproof.rules.state_storage import REPLAY_ROLE
    from kvproof.solver.encode import role_of

    assert role_of("replay/profile.json") == REPLAY_ROLE
    assert role_of("probe/worker.json") == "probe"
    assert role_of("profile.json") == role_of("other/profile.json") == "checked"
    result = Prover().prove(get_rule("ST028"))
    assert result.verdict == "reachable" and result.shape.startswith("replay profile ")
    assert [file for file, _ in result.documents] == ["replay/profile.json"]
    assert replay_refusal("ST028", result.documents)[0] == "reachable"


def test_a_replay_witness_is_written_in_its_folder_and_loaded_with_its_role(tmp_path) -> None:
    from kvproof.rules.check import check
    from kvproof.solver.witnesses import load_witness, write_documents

    text = (Path(__file__).resolve().parents[2] / "examples" / "unmodeled-kda-recoverssm" / "profile.json").read_text()
    written = write_documents(tmp_path, "ST028", [("replay/profile.json", text)])
    assert written == str(tmp_path / "ST028") and (tmp_path / "ST028" / "replay" / "profile.json").is_file()
    [document] = load_witness(tmp_path / "ST028")
    assert document.role == "replay"
    assert [d.rule for d in check([document])] == ["ST028"]  # as kvproof plan refuses it
    assert check([attrs.evolve(document, role="checked")]) == []  # check itself accepts it


def test_jobs_pack_kinds_into_units_and_spread_the_cheap_ones() -> None:
    # each process closes the pins of its own kinds (the parent closes none before it forks)
    from kvproof.solver.prove import job_groups

    prover = Prover()
    rules = prover.rules
    units = job_groups(prover, rules, 2)
    assert sorted(r.id for u in units for r in u) == sorted(r.id for r in rules)  # every rule once
    big, spread = [u for u in units if len(u) > 1], [u for u in units if len(u) == 1]
    assert len(big) == 2 and units[:2] == big  # one packed unit per process, submitted first
    assert any(r.expect == "dead" for r in big[0])  # the long pole first
    kinds = [{kind for rule in unit for kind in rule.over.kinds} for unit in big]
    assert "bundle" in kinds[0] ^ kinds[1] and "worker" in kinds[0] ^ kinds[1]  # the costly pins once
    assert {"worker", "scheduler"} <= kinds[0] or {"worker", "scheduler"} <= kinds[1]  # joined by their rules
    # the profile kind's pins are cheap: its rules are spread one by one, the dead one first
    assert spread and all(r.over.kinds == ("profile",) for [r] in spread) and spread[0][0].expect == "dead"
    order = {rule.id: index for index, rule in enumerate(rules)}
    assert all([order[r.id] for r in unit] == sorted(order[r.id] for r in unit) for unit in units)
    assert len(job_groups(prover, [get_rule("PF001"), get_rule("PF002")], 2)) == 1  # one item: one unit
    assert len(job_groups(prover, rules, 1)) == 1  # one process: one unit, nothing spread
    assert len([u for u in job_groups(prover, rules, 8) if len(u) > 1]) <= 4  # never more units than items


def test_strict_bool_is_reentrant_and_restores_z3() -> None:
    import z3

    from kvproof.solver.encode import strict_bool
    from kvproof.solver.symbolic import SymbolicFlowError

    original = z3.AstRef.__bool__
    x = z3.Int("x")
    with strict_bool():
        with strict_bool():
            with pytest.raises(SymbolicFlowError):
                bool(x == 1)
        with pytest.raises(SymbolicFlowError):  # still strict after the inner exit
            bool(x == 1)
    assert z3.AstRef.__bool__ is original
