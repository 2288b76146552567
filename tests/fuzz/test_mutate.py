"""Single-field edits: the sites a typed walk finds, the edits per site type, and their application."""

from __future__ import annotations

import copy
import json

from hypothesis import given

from kvproof.diagnostics import InputError
from kvproof.fuzz.mutate import UNKNOWN, VOCABULARY, Edit, apply, document_class, edits, random_edit, site_edits, sites
from kvproof.models.codec import MAX_SAFE_INT
from kvproof.models.documents import load_tree
from kvproof.rules.check import check

from fuzz_helpers import GLM, MINIMAX, tree

WORKER = tree(MINIMAX / "worker-dp0-tp0-pp0.json")
PROFILE = tree(MINIMAX / "profile.json")


def _site(cls_tree, path: tuple, kind: str = "worker"):
    return next(s for s in sites(document_class(kind), cls_tree, exhaustive=True) if s.path == path)


def test_sites_know_their_class_field_and_type() -> None:
    found = {s.path: s for s in sites(document_class("worker"), WORKER, exhaustive=True)}
    assert found[("cache", "num_blocks")].pair == ("WorkerCache", "num_blocks")
    assert found[("cache", "num_blocks")].type == "int"
    view = ("cache", "layer_tensors", "model.layers.0.self_attn.attn", 0)
    assert found[view + ("kernel_block_stride",)].type == "signed"
    element = found[view + ("shape", 1)]
    assert (element.pair, element.type, element.element) == (("LayerView", "shape"), "int", True)
    assert found[("cache", "groups")].type == "list"
    assert found[("cache", "layer_tensors")].type == "dict"
    assert found[("runtime",)].type == "object"


def test_number_edits_cover_the_issue_list() -> None:
    site = _site(WORKER, ("cache", "num_blocks"))
    value = WORKER["cache"]["num_blocks"]
    got = {e.op: e.value for e in site_edits("w.json", site, WORKER)}
    assert got["+1"] == value + 1 and got["-1"] == value - 1 and got["zero"] == 0
    assert got["negative"] == -value and got["2**53+1"] == MAX_SAFE_INT + 1
    assert got["bool"] is True and got["float"] == float(value) and type(got["float"]) is float
    assert got["null"] is None


def test_string_edits_take_every_known_value_and_an_unknown_one() -> None:
    specs = tree(GLM / "worker-dp0-tp0-pp0.json")
    first = specs["cache"]["groups"][0]["layer_names"][0]
    site = _site(specs, ("cache", "groups", 0, "layer_specs", first, "spec_type"))
    values = {e.value for e in site_edits("w.json", site, specs) if e.op == "value"}
    assert values == set(VOCABULARY["spec_type"]) - {"MambaSpec"}
    assert any(e.op == "unknown" and e.value == UNKNOWN for e in site_edits("w.json", site, specs))


def test_optional_keys_are_removed_and_lists_dropped_and_duplicated() -> None:
    ops = {(e.site.path, e.op) for e in edits("w.json", document_class("worker"), WORKER)}
    assert (("cache", "kv_cache_layout"), "remove") in ops
    assert (("cache", "groups"), "drop") in ops and (("cache", "groups"), "duplicate") in ops
    assert (("cache", "layer_tensors"), "rename-key") in ops
    assert not any(op == "remove" and path == ("cache", "num_blocks") for path, op in ops)  # required


def test_no_edit_leaves_the_tree_unchanged() -> None:
    for edit in edits("p.json", document_class("profile"), PROFILE):
        assert json.dumps(apply(PROFILE, edit)) != json.dumps(PROFILE), edit.describe()


def test_apply_copies_and_does_every_op() -> None:
    original = copy.deepcopy(WORKER)
    groups = _site(WORKER, ("cache", "groups"))
    dropped = apply(WORKER, Edit("w", groups, "drop", 0))
    duplicated = apply(WORKER, Edit("w", groups, "duplicate", 0))
    assert len(dropped["cache"]["groups"]) == len(WORKER["cache"]["groups"]) - 1
    assert duplicated["cache"]["groups"][0] == duplicated["cache"]["groups"][1]
    views = _site(WORKER, ("cache", "layer_tensors"))
    renamed = apply(WORKER, Edit("w", views, "rename-key", "model.layers.0.self_attn.attn"))
    assert list(renamed["cache"]["layer_tensors"])[0] == "model.layers.0.self_attn.attn#renamed"
    layout = _site(WORKER, ("cache", "kv_cache_layout"))
    assert "kv_cache_layout" not in apply(WORKER, Edit("w", layout, "remove"))["cache"]
    assert WORKER == original


def test_representatives_keep_first_and_last_of_each_kind_of_element() -> None:
    glm = tree(GLM / "worker-dp0-tp0-pp0.json")
    chosen = {s.path[2] for s in sites(document_class("worker"), glm) if s.path[:2] == ("cache", "layer_tensors")
              and len(s.path) > 2}
    every = {s.path[2] for s in sites(document_class("worker"), glm, exhaustive=True)
             if s.path[:2] == ("cache", "layer_tensors") and len(s.path) > 2}
    names = list(glm["cache"]["layer_tensors"])
    assert names[0] in chosen and names[-1] in chosen and len(chosen) < len(every) == len(names)


@given(random_edit("worker-dp0-tp0-pp0.json", sites(document_class("worker"), WORKER, exhaustive=True), WORKER))
def test_a_random_edit_is_refused_by_the_loader_or_checked_without_a_crash(edit) -> None:
    mutated = apply(WORKER, edit)
    json.dumps(mutated)  # still a JSON tree
    try:
        document = load_tree(mutated, "minimax/worker-dp0-tp0-pp0.json")
    except InputError as exc:
        assert all(d.rule.startswith("LD") for d in exc.diagnostics)
        return
    check([document])
