"""Every CLI entry point, fed malformed input, exits 1 or 2 with a diagnostic: never a traceback,
never a hang, never unbounded memory (each run is a child process with a timeout and an
address-space limit, see robust_harness.py)."""

from __future__ import annotations

import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvproof.cli import main
from kvproof.diagnostics import InputError
from kvproof.models.geometry import MAX_LAYERS, expand_layers, load_geometry
from robust_harness import CORPUS, EXAMPLES, ROOT, kvproof, kvproof_many

CASES = [json.loads(line) for line in (CORPUS / "expected.jsonl").read_text(encoding="utf-8").splitlines() if line]
MINIMAX = EXAMPLES / "minimax-m27-tp4"
GLM = EXAMPLES / "glm53flash-tp4"
TEN_MILLION = 10_000_000
#: Arrays of ten million objects or NaN literals take the parser alone several seconds (a Python
#: hook per element); the default run uses one million, a campaign run (HYPOTHESIS_PROFILE=campaign)
#: ten million.
SLOW_ELEMENTS = TEN_MILLION if os.environ.get("HYPOTHESIS_PROFILE") == "campaign" else 1_000_000


def test_the_corpus_is_complete() -> None:
    files = {p.name for p in CORPUS.glob("*.json")}
    assert files == {case["file"] for case in CASES}, "regenerate with python tests/robustness/make_corpus.py"
    assert all(p.stat().st_size < 16_384 for p in CORPUS.iterdir()), "the committed corpus stays small"


# ------------------------------------------------------------------------------ kvproof check


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_corpus_file_in_process(case, capsys) -> None:
    """The exact exit code and diagnostic of each corpus file (in process: fast)."""
    path = CORPUS / case["file"]
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert code == case["exit"], out + err
    assert f"{path}: {case['prints']}" in out
    assert "Traceback" not in out + err


def test_mixed_directory(tmp_path) -> None:
    """Good and bad files, a non-JSON file, nested directories, a FIFO, links that lead nowhere
    and a file name that is not UTF-8: the good files are accepted, each bad one is reported."""
    for good in MINIMAX.glob("*.json"):
        (tmp_path / good.name).write_bytes(good.read_bytes())
    (tmp_path / "notes.txt").write_text("not a document")
    nested = tmp_path / "nested" / "deeper"
    nested.mkdir(parents=True)
    (nested / "truncated.json").write_bytes((CORPUS / "truncated.json").read_bytes())
    (tmp_path / "nested" / "bool.json").write_bytes((CORPUS / "bool_for_int.json").read_bytes())
    (tmp_path / "dir.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    (tmp_path / os.fsdecode(b"name-\xff\xfe.json")).write_bytes(b"{")
    run = kvproof("check", "--format", "json", tmp_path)
    run.assert_handled(codes=(2,))
    report = json.loads(run.out)
    by_name = {Path(d["file"]).name: d for d in report["documents"]}
    assert all(by_name[p.name]["status"] == "accepted" for p in MINIMAX.glob("*.json"))
    assert by_name["truncated.json"]["status"] == by_name["bool.json"]["status"] == "bad_input"
    assert [d["status"] for name, d in by_name.items() if name.startswith("name-")] == ["bad_input"]
    assert len(report["documents"]) == 6 + 3  # fifo, links, the directory and notes.txt are not documents
    text = kvproof("check", tmp_path)
    text.assert_handled(codes=(2,))
    assert "name-\\udcff\\udcfe.json: LD001 $: invalid JSON" in text.out


def test_big_file_is_refused_before_reading(tmp_path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.write(b'{"schema_version": "kvproof/record/v1", "kind": "worker", "x": "')
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            handle.write(chunk)
        handle.write(b'"}')
    assert big.stat().st_size > 100 * 10**6
    run = kvproof("check", big, memory=256 << 20)  # less memory than the file: it is never read
    run.assert_handled(codes=(2,))
    assert f"{big}: LD001 $: document is larger than 67108864 bytes" in run.out


@pytest.mark.parametrize("shape", ["arrays", "in_a_record"])
def test_100000_levels_of_nesting(tmp_path, shape) -> None:
    depth = 100_000
    if shape == "arrays":
        text = "[" * depth + "]" * depth
    elif shape == "objects":
        text = '{"a": ' * depth + "1" + "}" * depth
    else:
        prefix = (MINIMAX / "scheduler-dp0.json").read_text()
        text = prefix.replace('"num_blocks": 203368', '"num_blocks": ' + "[" * depth + "]" * depth, 1)
    path = tmp_path / "deep.json"
    path.write_text(text)
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    assert f"{path}: LD001 $: JSON nesting is too deep" in run.out


def _scheduler_with(tmp_path, key: str, array_text: str) -> Path:
    """The MiniMax scheduler with ``cache.<key>`` replaced by ``array_text`` (raw JSON)."""
    tree = json.loads((MINIMAX / "scheduler-dp0.json").read_text())
    tree["cache"][key] = "@@ARRAY@@"
    path = tmp_path / f"{key}.json"
    path.write_text(json.dumps(tree).replace('"@@ARRAY@@"', array_text))
    return path


def _ten_million(item: str, last: str | None = None, count: int = TEN_MILLION) -> str:
    items = (item + ", ") * (count - 1) + (last or item)
    return "[" + items + "]"


@pytest.mark.parametrize("item, count, prints", [
    ("1", TEN_MILLION, "LD002 $.cache.groups[0]: expected an object, got an integer"),
    ("{}", SLOW_ELEMENTS, "LD002 $.cache.groups[0].layer_names: required key is missing"),
    ("NaN", SLOW_ELEMENTS, "LD002 $.cache.groups[0]: non-finite number NaN is not allowed"),
], ids=["ints", "objects", "nan"])
def test_ten_million_bad_elements(tmp_path, item, count, prints) -> None:
    """Bounded output: at most MAX_PROBLEMS diagnostics per document, then a summary."""
    path = _scheduler_with(tmp_path, "groups", _ten_million(item, count=count))
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    assert f"{path}: {prints}" in run.out
    assert len(run.out.splitlines()) <= 210
    assert "not checked after 20 problems" in run.out or "more problems not reported after the first 200" in run.out


def test_ten_million_good_elements_then_a_bad_one(tmp_path) -> None:
    tree = json.loads((MINIMAX / "scheduler-dp0.json").read_text())
    tree["cache"]["groups"][0]["layer_names"] = "@@ARRAY@@"
    path = tmp_path / "names.json"
    path.write_text(json.dumps(tree).replace('"@@ARRAY@@"', _ten_million('"a"', "true")))
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    assert f"{path}: LD002 $.cache.groups[0].layer_names[{TEN_MILLION - 1}]: expected a string, got a bool" in run.out


def test_many_duplicate_keys(tmp_path) -> None:
    path = tmp_path / "dupes.json"
    path.write_text("{" + ", ".join(f'"k{i % 1000}": {i}' for i in range(1_000_000)) + "}")
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    assert f"{path}: LD002 $.k0: duplicate key 'k0'" in run.out
    assert len(run.out.splitlines()) <= 210


@pytest.mark.parametrize("special", ["/dev/zero", "/proc/self/mem", "fifo", "directory", "missing", "empty_directory"])
def test_unreadable_paths(tmp_path, special) -> None:
    if special.startswith("/") and not os.path.exists(special):
        pytest.skip(f"{special} does not exist on this system")
    path = {"fifo": tmp_path / "fifo.json", "directory": tmp_path, "missing": tmp_path / "missing.json",
            "empty_directory": tmp_path}.get(special, Path(special))
    if special == "fifo":
        os.mkfifo(path)  # nobody writes it: it must read as empty, not block
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    expected = {
        "/dev/zero": "LD001 $: document is larger than 67108864 bytes",
        "/proc/self/mem": "LD001 $: cannot read file:",
        "fifo": "LD001 $: document is empty",
        "missing": "LD001 $: no such file or directory",
    }.get(special, "no documents found")
    assert expected in run.out


def test_file_without_read_permission(tmp_path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: permission bits do not stop root (see test_unreadable_paths /proc/self/mem)")
    path = tmp_path / "secret.json"
    path.write_bytes((MINIMAX / "profile.json").read_bytes())
    path.chmod(0)
    run = kvproof("check", path)
    run.assert_handled(codes=(2,))
    assert f"{path}: LD001 $: cannot read file: Permission denied" in run.out


def test_a_document_too_big_to_hold_does_not_stop_the_others(tmp_path) -> None:
    """A geometry whose layer range would expand to 2**40 layers: that file is bad input
    (refused by the layer bound before anything is expanded), the records next to it are still
    checked."""
    for good in MINIMAX.glob("*.json"):
        (tmp_path / good.name).write_bytes(good.read_bytes())
    tree = json.loads((EXAMPLES / "geometries" / "plain-32-full-attention.json").read_text())
    tree["layers"][0]["range"] = [0, 2**40]
    (tmp_path / "huge-range.json").write_text(json.dumps(tree))
    run = kvproof("check", tmp_path)
    run.assert_handled(codes=(2,))
    assert "6 accepted" in run.out and "1 bad input" in run.out
    assert "huge-range.json: LD00" in run.out


def test_geometry_layer_range_is_bounded(tmp_path) -> None:
    """A layer range is refused by the layer bound, with its JSON path, before it is expanded
    (it used to be expanded into a list: [0, 2**40] ran out of memory, [0, 10**7] took ~30 s)."""
    tree = json.loads((EXAMPLES / "geometries" / "plain-32-full-attention.json").read_text())
    tree["layers"][0]["range"] = [0, 2**40]
    path = tmp_path / "huge-range.json"
    path.write_text(json.dumps(tree))
    run = kvproof("simulate", path, timeout=20, memory=512 << 20)
    run.assert_handled(codes=(2,))
    assert (f"{path}: LD002 $.layers[0].range: expands to {2**40} layer(s); a geometry holds at most "
            f"{MAX_LAYERS} layers") in run.out + run.err
    assert run.seconds < 15


def test_geometry_layer_bound_counts_every_entry() -> None:
    """Many entries, each under the bound, together over it: refused at the entry that passes it;
    exactly MAX_LAYERS layers load."""
    def geometry(counts):
        return {"max_model_len": 16, "available_memory_bytes": 1 << 30, "layers": [
            {"name": f"e{n}.{{i}}", "range": [0, count], "spec": "FullAttentionSpec", "num_kv_heads": 1,
             "head_size": 64, "dtype": "bfloat16"} for n, count in enumerate(counts)]}

    with pytest.raises(InputError) as error:
        load_geometry(geometry([MAX_LAYERS // 2, MAX_LAYERS // 2, 1]), "g.json")
    assert [d.render() for d in error.value.diagnostics] == [
        f"g.json: LD002 $.layers[2].range: expands to 1 layer(s) ({MAX_LAYERS + 1} with the entries before it); "
        f"a geometry holds at most {MAX_LAYERS} layers"]
    assert len(expand_layers(load_geometry(geometry([MAX_LAYERS - 1, 1])))) == MAX_LAYERS
    indices = geometry([1])
    indices["layers"][0].pop("range")
    indices["layers"][0]["indices"] = list(range(MAX_LAYERS + 1))
    with pytest.raises(InputError, match=r"\$\.layers\[0\]\.indices: expands to"):
        load_geometry(indices)


@pytest.mark.parametrize("tree", [[1, 2, 3], ["x"], 1, None, True, 1.5], ids=repr)  # (a str is JSON text)
def test_load_geometry_of_a_tree_that_is_not_an_object(tree) -> None:
    """A parsed tree of any JSON type is bad input (it used to be handed to parse_json: AttributeError)."""
    with pytest.raises(InputError) as error:
        load_geometry(tree, "g.json")
    assert [(d.rule, d.path) for d in error.value.diagnostics] == [("LD002", "$")]
    assert "expected an object" in error.value.diagnostics[0].message


def test_report_that_cannot_be_written(tmp_path) -> None:
    run = kvproof("check", "-o", tmp_path / "missing" / "report.txt", MINIMAX)
    run.assert_handled(codes=(2,))
    assert "cannot write the report" in run.err


def test_text_from_the_input_that_no_terminal_can_show(tmp_path) -> None:
    """Control characters, lone surrogates and XML specials from the input reach the report (in
    VG001's text): every format stays parseable, nothing raises, in a UTF-8 and an ASCII locale."""
    tree = json.loads((GLM / "scheduler-dp0.json").read_text())
    tree["runtime"]["version"] = "0.32.0\x01\x1b[31m\ud800<&]]>\"'"
    path = tmp_path / "odd-version.json"
    path.write_text(json.dumps(tree))
    for fmt, env in (("text", {"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}), ("junit", {"PYTHONIOENCODING": "latin-1"}),
                     ("sarif", {})):
        run = kvproof("check", "--format", fmt, path, env=env)
        run.assert_handled(codes=(1,))
        if fmt == "junit":
            ET.fromstring(run.stdout)
        elif fmt in ("json", "sarif"):
            json.loads(run.stdout)
        else:
            assert "VG001" in run.out


# ------------------------------------------------------------------------------ other commands


USAGE_ERRORS = [
    ("check",),
    ("check", "--format", "yaml", "x.json"),
    ("rules", "XX999"),
    ("rules", "--format", "yaml"),
    ("rules", os.fsdecode(b"\xff\xfe\x00"[:2])),
    ("rules", "VG001" * 20_000),
    ("schema",),
    ("schema", "nope"),
    ("frobnicate",),
    (os.fsdecode(b"\xff"),),
]
GOOD_CALLS = [("rules", "--format", "json"), ("schema", "record"), ("schema", "geometry")]


@pytest.fixture(scope="module")
def usage_runs() -> dict:
    return kvproof_many({args: args for args in USAGE_ERRORS + GOOD_CALLS})


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a)[:40])
def test_usage_errors(usage_runs, args) -> None:
    usage_runs[args].assert_handled(codes=(2,))


@pytest.mark.parametrize("args", GOOD_CALLS, ids=" ".join)
def test_rules_and_schema_run_under_the_limits(usage_runs, args) -> None:
    run = usage_runs[args]
    run.assert_handled(codes=(0,))
    if "--format" in args or args[0] == "schema":
        json.loads(run.out)


def _geometry(**changes) -> str:
    tree = json.loads((EXAMPLES / "geometries" / "plain-32-full-attention.json").read_text())
    for key, value in changes.items():
        if key.startswith("layer0_"):
            tree["layers"][0][key[len("layer0_"):]] = value
        else:
            tree[key] = value
    return json.dumps(tree)


def _geometry_text(key: str, literal: str) -> str:
    """The plain geometry with ``key`` set to a raw JSON ``literal`` (NaN, a duplicate, ...)."""
    return _geometry(**{key: "@@"}).replace('"@@"', literal)


#: Malformed geometries (the record/profile corpus is run through simulate and synth too, below).
GEOMETRY_CASES = {
    "bool_max_model_len": _geometry(max_model_len=True),
    "float_block_size": _geometry(block_size=16.0),
    "string_max_model_len": _geometry(max_model_len="8192"),
    "negative_memory": _geometry(available_memory_bytes=-1),
    "memory_past_2_53": _geometry(available_memory_bytes=2**60),
    "nan_memory": _geometry_text("available_memory_bytes", "NaN"),
    "infinity_memory": _geometry_text("available_memory_bytes", "-Infinity"),
    "huge_int_literal": _geometry_text("max_model_len", "9" * 5000),
    "duplicate_key": _geometry_text("block_size", '16, "block_size": 32'),
    "truncated": _geometry()[:70],
    "unknown_spec": _geometry(layer0_spec="NoSuchSpec"),
    "zero_heads": _geometry(layer0_num_kv_heads=0),
    "layers_null": _geometry(layers=None),
    "layers_object": _geometry(layers={}),
    "range_past_2_53": _geometry(layer0_range=[0, 2**53 + 1]),
    "range_2_40": _geometry(layer0_range=[0, 2**40]),
    "range_backwards": _geometry(layer0_range=[32, 0]),
    "range_four": _geometry(layer0_range=[0, 1, 2, 3]),  # ([start, stop, step] is a range: issue #13 item 8)
    "range_zero_step": _geometry(layer0_range=[0, 4, 0]),
    "tiny_memory": _geometry(available_memory_bytes=1),
    # the simulate block (docs/requests.md): types, bounds, cross-field rules
    "simulate_zero_prompt": _geometry(simulate={"prompt_tokens": 0}),
    "simulate_bool_probe": _geometry(simulate={"prompt_tokens": 10, "prefix_hit_probe": 1}),
    "simulate_float_chunk": _geometry(simulate={"prompt_tokens": 10, "chunk_tokens": 2.0}),
    "simulate_endless_single": _geometry(simulate={"prompt_tokens": 2**24, "chunk_tokens": 1}),
    "simulate_huge_prompt": _geometry(simulate={"prompt_tokens": 2**53}),
    "simulate_steps_past_bound": _geometry(simulate={"requests": [], "max_steps": 10**12}),
    "simulate_requests_object": _geometry(simulate={"requests": {"id": "a"}}),
    "simulate_duplicate_ids": _geometry(simulate={"requests": [{"id": "a", "prompt_tokens": 8, "decode_tokens": 1}] * 2}),
    "simulate_negative_arrival": _geometry(simulate={"requests": [
        {"id": "a", "prompt_tokens": 8, "decode_tokens": 1, "arrival_step": -1}]}),
    "simulate_prefix_past_prompt": _geometry(simulate={"requests": [
        {"id": "a", "prompt_tokens": 8, "decode_tokens": 1, "shared_prefix": "s", "shared_prefix_tokens": 9}]}),
    "simulate_too_many_tokens": _geometry(simulate={"requests": [
        {"id": str(i), "prompt_tokens": 2**24, "decode_tokens": 1} for i in range(9)]}),
    "simulate_unknown_key": _geometry(simulate={"requests": [], "seed": 1}),
}
#: Run in a child process under the limits too (the rest only in process: they cannot hang).
SIMULATE_CORPUS = ["empty.json", "binary.json", "deep_nesting.json", "array.json", "nan.json", "huge_int_literal.json"]


@pytest.fixture(scope="module")
def geometry_paths(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("geometries")
    paths = {name: CORPUS / name for name in SIMULATE_CORPUS}
    for name, text in GEOMETRY_CASES.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(text)
    return paths


@pytest.fixture(scope="module")
def simulate_runs(geometry_paths) -> dict:
    return kvproof_many({name: ("simulate", path) for name, path in geometry_paths.items()})


@pytest.mark.parametrize("name", SIMULATE_CORPUS + sorted(GEOMETRY_CASES))
def test_simulate_malformed_geometry(geometry_paths, simulate_runs, capsys, name) -> None:
    path, run = geometry_paths[name], simulate_runs[name]
    run.assert_handled()
    code = main(["simulate", "--format", "json", str(path)])  # the JSON rendering, in process
    out, err = capsys.readouterr()
    assert code == run.code and "Traceback" not in out + err
    json.loads(out)


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_every_corpus_file_through_simulate_and_synth(tmp_path, capsys, case) -> None:
    """No corpus file is a geometry: simulate (text and JSON) and synth refuse each with an LD
    diagnostic and exit 2, and synth writes nothing."""
    path = str(CORPUS / case["file"])
    for args in (["simulate", path], ["simulate", "--format", "json", path], ["synth", path, "-o", str(tmp_path / "out")]):
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 2, (args, out, err)
        assert "Traceback" not in out + err and "internal error" not in out + err
        if "json" in args:
            assert json.loads(out)["status"] == "bad_input"
        else:
            assert f"{path}: LD00" in out + err
    assert not (tmp_path / "out").exists()


def test_attention_free_geometry_is_planned(tmp_path, capsys) -> None:
    """``layers: []`` is an attention-free model, which vLLM starts with no KV cache (1 block, no
    capacity): exit 0 in both formats (the text rendering used to raise on max_concurrency None)."""
    path = tmp_path / "no-layers.json"
    path.write_text(_geometry(layers=[]))
    assert main(["simulate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "max_concurrency          - (no KV cache layers" in out and not err
    assert main(["simulate", "--format", "json", str(path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["groups"], result["max_concurrency"], result["kv_cache_size_tokens"]) == ([], None, None)


def _document_reader_calls(path: Path, out: Path) -> dict[str, tuple]:
    """Every entry point that reads a document file, given ``path`` as that file."""
    examples = out / "examples"
    (examples / "set").mkdir(parents=True, exist_ok=True)
    (examples / "set" / "input.json").symlink_to(path)
    return {
        "simulate": ("simulate", path),
        "synth": ("synth", path, "-o", out / "synth"),
        "explore": ("explore", path, "--minimize", "1"),
        "fuzz": ("fuzz", "--count", "0", "--output", out / "fuzz", path),
        "prove --examples": ("prove", "PF010", "--examples", examples),
        "import": ("import", examples / "set", "-o", out / "profile.json"),
        "plan": ("plan", path),
        "geometry": ("geometry", path, "--set", "available_memory_bytes=1"),
    }


@pytest.mark.parametrize("special", ["big", "deep", "ten_million", "fifo", "dev_zero"])
def test_big_and_unreadable_inputs_at_every_document_reader(tmp_path, special) -> None:
    """100 MB (sparse), 100,000 levels of nesting, ten million elements, a FIFO nobody writes and
    /dev/zero, at simulate, synth, explore, fuzz and prove --examples: exit 2 with a diagnostic,
    no hang (simulate used to block on the FIFO: it read it with Path.read_bytes)."""
    path = tmp_path / "geometry.json"
    if special == "big":
        with open(path, "wb") as handle:
            handle.write(b'{"layers": [], "x": "')
            handle.seek(100 << 20)
            handle.write(b'"}')
    elif special == "deep":
        path.write_text('{"layers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif special == "ten_million":
        path.write_text(_geometry(layers="@@").replace('"@@"', _ten_million("1")))
    elif special == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    runs = kvproof_many(_document_reader_calls(path, tmp_path), timeout=60)
    for name, run in runs.items():
        run.assert_handled(codes=(2,))
        if special == "fifo":
            assert run.seconds < 20, name


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_every_corpus_file_through_import_and_plan(tmp_path, capsys, case) -> None:
    """Each corpus file as the only document of a phase, and as plan's profile: exit 1 or 2 with
    a diagnostic, no traceback, and import writes nothing."""
    phase = tmp_path / "phase"
    phase.mkdir()
    (phase / case["file"]).write_bytes((CORPUS / case["file"]).read_bytes())
    for args in (["import", str(phase), "-o", str(tmp_path / "profile.json")], ["plan", str(CORPUS / case["file"])]):
        code = main(args)
        out, err = capsys.readouterr()
        assert code in (1, 2), (args, out, err)
        assert (out + err).strip() and "Traceback" not in out + err and "internal error" not in out + err
    assert not (tmp_path / "profile.json").exists()


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_every_corpus_file_as_a_config(case, capsys) -> None:
    """kvproof geometry of each corpus file: exit 2 with a diagnostic, no traceback."""
    code = main(["geometry", str(CORPUS / case["file"]), "--set", "available_memory_bytes=1"])
    out, err = capsys.readouterr()
    assert code == 2 and err.strip() and "Traceback" not in out + err and "internal error" not in out + err


@pytest.mark.parametrize("change", [
    {"num_hidden_layers": "80"}, {"num_hidden_layers": 1.5}, {"num_hidden_layers": True}, {"num_hidden_layers": -1},
    {"architectures": "LlamaForCausalLM"}, {"architectures": []}, {"architectures": [7]}, {"layer_types": 3},
    {"layer_types": ["sliding_attention"]}, {"torch_dtype": "int3"}, {"max_position_embeddings": "x"},
    {"num_key_value_heads": 0}, {"head_dim": [1]},
])
def test_config_with_wrong_types(tmp_path, capsys, change) -> None:
    config = json.loads((ROOT / "tests" / "configs" / "meta-llama--Llama-3.3-70B-Instruct" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}))
    code = main(["geometry", str(tmp_path), "--set", "available_memory_bytes=1", "--set", "block_size=[1"])
    out, err = capsys.readouterr()
    assert code == 2 and err.strip() and "Traceback" not in out + err and "internal error" not in out + err


def test_import_cannot_write_its_output(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["import", str(EXAMPLES / "minimax-m27-tp4"), "-o", str(blocker / "profile.json")]) == 2
    out, err = capsys.readouterr()
    assert "kvproof import: cannot write" in err and "Traceback" not in out + err
    assert main(["import", str(tmp_path / "missing"), "-o", str(tmp_path / "p.json")]) == 2
    assert "not a directory" in capsys.readouterr().out


def test_synth_cannot_write_its_output(tmp_path, capsys) -> None:
    geometry = EXAMPLES / "geometries" / "plain-32-full-attention.json"
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["synth", str(geometry), "-o", str(blocker / "records")]) == 2
    out, err = capsys.readouterr()
    assert "kvproof synth: cannot write the records to" in err and "Traceback" not in out + err


# ------------------------------------------------------------------------------ solver commands


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_every_corpus_file_as_an_explore_template_and_a_fuzz_input(tmp_path, capsys, case) -> None:
    """explore and fuzz read their documents through the strict loader before any solver or
    campaign runs: each corpus file is exit 2 with its LD diagnostic (the rule-refused one loads:
    explore and fuzz then run on it, which is not this test's business)."""
    if case["exit"] != 2:
        pytest.skip("loads: a well-formed document that a rule refuses")
    path = str(CORPUS / case["file"])
    for args in (["explore", path, "--minimize", "1"], ["fuzz", "--count", "0", "--output", str(tmp_path), path]):
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 2, (args, out, err)
        assert f"{path}: {case['prints']}" in out + err
        assert "Traceback" not in out + err and "internal error" not in out + err


PROFILE = MINIMAX / "profile.json"
#: Escapes a restricted objective parser must refuse before anything is evaluated.
OBJECTIVE_ESCAPES = [
    "().__class__.__base__.__subclasses__()",
    "doc.__class__",
    "[c for c in doc.__class__.__mro__]",
    "open('pwned', 'w')",
    "__import__('os').system('touch pwned')",
    "(lambda: 1)()",
    "'{0.__class__}'.format(doc)",
    "sim.document.json.loads('1')",
    "10 ** 10 ** 10",
    "(x := 1)",
]


def _solver_calls(tmp_path: Path) -> dict[str, tuple[tuple, tuple[int, ...]]]:
    fifo = tmp_path / "claims.py"
    os.mkfifo(fifo)
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom')\n")
    shape = ("--max-shape", "groups=1,layers=1,mutations=0")
    calls = {
        "prove unknown rule": (("prove", "XX999"), (2,)),
        "prove shape not a number": (("prove", "PF010", "--max-shape", "groups=abc"), (2,)),
        "prove shape negative": (("prove", "PF010", "--max-shape", "groups=-1"), (2,)),
        "prove shape garbage": (("prove", "PF010", "--max-shape", "\x01\xff"), (2,)),
        "prove timeout nan": (("prove", "PF010", "--timeout", "nan"), (2,)),
        "prove timeout inf": (("prove", "PF010", "--timeout", "inf"), (2,)),
        "prove timeout zero": (("prove", "PF010", "--timeout", "0"), (2,)),
        "prove rlimit zero": (("prove", "PF010", "--rlimit", "0"), (2,)),
        "prove rlimit past 2**64": (("prove", "PF010", "--rlimit", str(2**64)), (0, 2, 3)),  # bounded by --timeout
        "prove examples malformed": (("prove", "PF010", "--examples", ROOT / "tests" / "robustness"), (2,)),
        "prove examples not a directory": (("prove", "PF010", "--examples", "/dev/zero"), (2,)),
        "prove witness dir unwritable": (("prove", "PF010", *shape, "--output", "/dev/null/x"), (2,)),
        "claim not an expression": (("claim", "doc.("), (2,)),
        "claim NUL in expression": (("claim", "doc\x01"), (2,)),
        "claim expression raises": (("claim", "1/0"), (2,)),  # a bad expression is bad input (exit 2)
        "claim unknown attribute": (("claim", "doc.nope"), (2,)),
        "claim claims file binary": (("claim", "--claims", CORPUS / "binary.json"), (2,)),
        "claim claims file fifo": (("claim", "--claims", fifo), (2,)),
        "claim claims file missing": (("claim", "--claims", tmp_path / "missing.py"), (2,)),
        "claim two sources": (("claim", "True", "--all"), (2,)),
        "claim shape garbage": (("claim", "True", "--max-shape", "nonsense"), (2,)),
        "claim timeout nan": (("claim", "True", "--timeout", "nan"), (2,)),
        "explore no objective": (("explore", PROFILE), (2,)),
        "explore both objectives": (("explore", PROFILE, "--minimize", "1", "--maximize", "1"), (2,)),
        "explore open path garbage": (("explore", PROFILE, "--minimize", "1", "--open", "garbage[[["), (2,)),
        "explore timeout nan": (("explore", PROFILE, "--minimize", "1", "--timeout", "nan"), (2,)),
        "explore not an expression": (("explore", PROFILE, "--minimize", "doc.("), (2,)),
        "explore unknown attribute": (("explore", PROFILE, "--minimize", "doc.nope"), (2,)),
        "explore geometry": (("explore", EXAMPLES / "geometries" / "plain-32-full-attention.json", "--minimize", "1"),
                             (2,)),
        "fuzz fixtures missing": (("fuzz", "--campaign", "ablation", "--count", "0", "--output", tmp_path / "fuzz",
                                   "--fixtures", tmp_path / "missing", MINIMAX), (2,)),
        "fuzz path missing": (("fuzz", "--count", "0", tmp_path / "missing"), (2,)),
        "fuzz examples negative": (("fuzz", "--count", "-1"), (2,)),
    }
    for number, escape in enumerate(OBJECTIVE_ESCAPES):
        calls[f"explore escape {number}"] = (("explore", PROFILE, "--minimize", escape), (2,))
    return calls


@pytest.fixture(scope="module")
def solver_runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("solver")
    calls = _solver_calls(folder)
    assert sorted(calls) == sorted(SOLVER_CASES)
    runs = kvproof_many({name: args for name, (args, _codes) in calls.items()}, cwd=folder)
    return {"calls": calls, "runs": runs, "folder": folder}


SOLVER_CASES = [
    "prove unknown rule", "prove shape not a number", "prove shape negative", "prove shape garbage",
    "prove timeout nan", "prove timeout inf", "prove timeout zero", "prove rlimit zero", "prove rlimit past 2**64",
    "prove examples malformed", "prove examples not a directory", "prove witness dir unwritable",
    "claim not an expression", "claim NUL in expression", "claim expression raises", "claim unknown attribute",
    "claim claims file binary", "claim claims file fifo", "claim claims file missing", "claim two sources",
    "claim shape garbage", "claim timeout nan", "explore no objective", "explore both objectives",
    "explore open path garbage", "explore timeout nan", "explore not an expression", "explore unknown attribute",
    "explore geometry", "fuzz fixtures missing", "fuzz path missing", "fuzz examples negative",
    *(f"explore escape {n}" for n in range(len(OBJECTIVE_ESCAPES))),
]


@pytest.mark.parametrize("name", SOLVER_CASES)
def test_solver_commands_on_malformed_input(solver_runs, name) -> None:
    _args, codes = solver_runs["calls"][name]
    run = solver_runs["runs"][name]
    run.assert_handled(codes=codes)
    assert run.seconds < 45, f"{name}: {run.seconds:.1f} s"
    if name.startswith("explore escape"):
        assert re.search(r"--minimize \d+:\d+: .*(is not allowed|cannot be called|exponent|not values)", run.err), run.err
        assert not (solver_runs["folder"] / "pwned").exists()
    if name == "prove examples malformed":
        assert f"{CORPUS / 'nan.json'}: LD002" in run.out


# ------------------------------------------------------------------------------ z3 resource limits


def test_prove_out_of_resources_is_unknown() -> None:
    """A z3 query that runs out of its resource limit reports unknown (exit 3), quickly."""
    run = kvproof("prove", "PF010", "--max-shape", "groups=1,layers=1,mutations=0", "--rlimit", "1", timeout=60)
    run.assert_handled(codes=(3,))
    assert "1 unknown" in run.out
    assert run.seconds < 30


def test_claim_out_of_time_is_unknown() -> None:
    """A claim whose solver calls run out of time (a 1 ms limit) reports unknown (exit 3), quickly.
    A wall-clock limit is not deterministic: a fast enough machine may finish the query inside
    1 ms (exit 0, holds); the resource limit below is the deterministic check."""
    run = kvproof("claim", "--timeout", "0.001", "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups)",
                  timeout=60)
    run.assert_handled(codes=(0, 3))
    assert ("unknown" if run.code == 3 else "holds") in run.out
    assert run.seconds < 30


def test_claim_out_of_resources_is_unknown() -> None:
    run = kvproof("claim", "--rlimit", "1", "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups)",
                  timeout=60)
    run.assert_handled(codes=(3,))
    assert "unknown" in run.out
    assert run.seconds < 30


# ------------------------------------------------------------------------------ coverage


#: Every CLI entry point and the tests above that feed it malformed input.
ENTRY_POINTS = {
    "check": "corpus (every kind), mixed directory, 100 MB, nesting, ten million elements, duplicates, unreadable paths",
    "simulate": "malformed geometries, the corpus, 100 MB, nesting, ten million elements, FIFO, /dev/zero",
    "synth": "the corpus, 100 MB, nesting, ten million elements, FIFO, /dev/zero, unwritable output",
    "rules": "unknown IDs, bad format, undecodable and huge arguments",
    "schema": "missing and unknown kinds",
    "prove": "bad rule IDs, shapes, timeouts, resource limits, malformed --examples, unwritable witness dir",
    "claim": "bad expressions, claims files (binary, FIFO, missing), shapes, timeouts; out of time -> 3",
    "explore": "the corpus as template, 100 MB, nesting, FIFO, objective escapes, bad --open and timeouts",
    "fuzz": "the corpus, 100 MB, nesting, FIFO, /dev/zero, missing paths and fixtures",
    "import": "the corpus as a phase, 100 MB, nesting, ten million elements, FIFO, /dev/zero, no records, "
              "unwritable output",
    "plan": "the corpus, 100 MB, nesting, ten million elements, FIFO, /dev/zero",
    "geometry": "the corpus as a config, 100 MB, nesting, ten million elements, FIFO, /dev/zero, wrong types, "
                "bad --set",
}


def test_every_entry_point_is_covered() -> None:
    """A new command needs malformed-input cases here before it ships."""
    from kvproof.cli import cli

    assert set(cli.commands) == set(ENTRY_POINTS)


def test_console_entry_point_without_a_terminal(tmp_path) -> None:
    """Closed stdin, a read-only working directory: check still answers."""
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(stat.S_IRUSR | stat.S_IXUSR)
    run = kvproof("check", CORPUS / "nan.json", cwd=readonly)
    run.assert_handled(codes=(2,))
    assert str(ROOT) in run.out or "nan.json" in run.out
