"""The robustness campaign of issue #13: malformed and mutated inputs at every CLI entry point.

    python scripts/robustness-campaign.py [--cases 2000] [--seed 13] [--jobs 2] [--fresh 20] [--json FILE]

Every case is one real process with a 10 s wall-clock limit and a 2 GiB address-space limit
(RLIMIT_AS), and must end with no traceback, an exit code in 0-4, within the time, below the memory
bound. Cases run in processes forked from this one after kvproof, z3 and Hypothesis are imported
(a fork costs milliseconds, a fresh interpreter a second), ``--jobs`` at a time; ``--fresh N`` also
runs N of the cases as fresh ``python -m kvproof`` processes, so start-up is covered too. Peak
memory is each process's ``ru_maxrss`` (wait4), which includes the pages shared with this parent,
so it over-counts. The same seed gives the same cases. Exit 0 when every case passes, 1 otherwise.

An entry point is one line of :data:`ENTRY_POINTS`: a name, the kind of input it takes and how it
is called on that input. docs/robustness.md records the last run.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIME_LIMIT = 10.0
MEMORY_LIMIT = 2 << 30
KV_TIMEOUT = "5"  # the solver commands' own --timeout, below the campaign's limit

# ------------------------------------------------------------------------------ entry points
#: name -> (input kind, argv builder(input path, scratch folder)). Kinds: "document" (any record,
#: profile or geometry), "geometry", "record", "expression" (the input file holds an expression),
#: "template" (an explore template). Adding an entry point is one line.
ENTRY_POINTS: dict[str, tuple[str, Callable[[Path, Path], list[str]]]] = {
    "check": ("document", lambda f, d: ["check", str(f)]),
    "check --format sarif -o": ("document", lambda f, d: ["check", str(f), "--format", "sarif", "-o", str(d / "r.sarif")]),
    "check --probe": ("record", lambda f, d: ["check", str(EXAMPLES / "gemma-like-swa"), "--probe", str(f)]),
    "simulate": ("geometry", lambda f, d: ["simulate", str(f), "--format", "json"]),
    "synth": ("geometry", lambda f, d: ["synth", str(f), "-o", str(d / "out")]),
    "prove --examples": ("record", lambda f, d: ["prove", "PF010", "--timeout", KV_TIMEOUT, "--examples",
                                                  str(_examples_dir(f, d))]),
    "claim": ("expression", lambda f, d: ["claim", f.read_text("utf-8", "replace"), "--kind", "profile",
                                         "--timeout", KV_TIMEOUT, "--max-shape", "groups=1,layers=1"]),
    "explore": ("template", lambda f, d: ["explore", str(f), "--minimize",
                                          "doc.resources.runtime_memory.kv_cache_bytes", "--open",
                                          "$.resources.runtime_memory.kv_cache_bytes", "--timeout", KV_TIMEOUT]),
    "explore --minimize": ("expression", lambda f, d: ["explore", str(EXAMPLES / "minimax-m27-tp4" / "profile.json"),
                                                       "--minimize", f.read_text("utf-8", "replace"), "--open",
                                                       "$.resources.runtime_memory.kv_cache_bytes",
                                                       "--timeout", KV_TIMEOUT]),
    "import": ("record", lambda f, d: ["import", str(_phase_dir(f, d)), "-o", str(d / "profile.json")]),
    "import --verify": ("document", lambda f, d: ["import", str(EXAMPLES / "minimax-m27-tp4"), "--verify", str(f)]),
    "plan": ("document", lambda f, d: ["plan", str(f)]),
    "geometry": ("document", lambda f, d: ["geometry", str(f), "--set", "available_memory_bytes=17179869184"]),
}


def _phase_dir(path: Path, scratch: Path) -> Path:
    """``import PHASE_DIR``: the MiniMax record set with its worker replaced by the input."""
    folder = scratch / "phase"
    shutil.copytree(EXAMPLES / "minimax-m27-tp4", folder, ignore=shutil.ignore_patterns("profile.json"))
    target = folder / "worker-dp0-tp0-pp0.json"
    target.unlink()
    if path.is_symlink() or not path.is_file():
        os.symlink(path, target)
    else:
        shutil.copyfile(path, target)
    return folder


def _examples_dir(path: Path, scratch: Path) -> Path:
    """``prove --examples DIR`` reads ``DIR/*/*.json``: the input becomes one template."""
    folder = scratch / "examples" / "set"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "worker-dp0-tp0-pp0.json"
    if path.is_symlink() or not path.is_file():
        os.symlink(path, target)  # a FIFO, a device, a link loop: as it is
    else:
        shutil.copyfile(path, target)
    return scratch / "examples"


# ------------------------------------------------------------------------------ inputs
def _bases() -> dict[str, list[tuple[str, bytes]]]:
    documents = sorted(p for p in EXAMPLES.rglob("*.json"))
    geometry = [(p.name, p.read_bytes()) for p in documents if p.parent.name == "geometries"]
    record = [(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in documents
              if p.parent.name != "geometries" and p.name != "profile.json"]
    profile = [(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in documents if p.name == "profile.json"]
    return {"geometry": geometry, "record": record + profile, "document": geometry + record + profile,
            "template": profile, "expression": [(e, e.encode()) for e in EXPRESSIONS]}


#: Claim/explore expressions: valid ones to mutate. Nothing here (nor any mutation) names a module,
#: a builtin that does I/O or a dunder: the claim language of this branch still evaluates Python.
EXPRESSIONS = [
    "All(g.page_size_bytes > 0 for g in doc.resources.cache_groups)",
    "All(Implies(g.kind == 'state', g.page_size_bytes > 0) for g in doc.resources.cache_groups)",
    "Sum([g.page_size_bytes for g in doc.resources.cache_groups]) >= 0",
    "doc.resources.runtime_memory.kv_cache_bytes",
    "doc.resources.runtime_memory.kv_cache_bytes * 2 + 1",
    "Sum(If(g.kind == 'state', 1, 0) for g in doc.resources.cache_groups)",
    "doc.resources.max_batch_size - doc.resources.runtime_memory.kv_cache_bytes % 7",
]
TOKENS = ["(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "%", "**", "==", "<", ">=", " and ", " or ", " not ",
          " if ", " else ", " for ", " in ", "doc", "g", "x", "resources", "cache_groups", "page_size_bytes",
          "All", "Any", "Sum", "If", "Implies", "And", "Or", "Not", "len", "range", "min", "max", "0", "-0", "1",
          "2**64", "9**256", "1e308", "'state'", "None", "True", "lambda x: x", ":", "{", "}", "\\", "#", "'",
          '"', "\x00", "\ud800", "\u00e9"]
NASTY_EXPRESSIONS = [
    "(((9**256)**256)**256)**256", "9**9**9", "len([x for x in range(10**9)])", "len(range(10**18))",
    "[" * 3000 + "]" * 3000, "(" * 200 + "1" + ")" * 200, "doc" + ".resources" * 5000, "1 % -0", "1 / 0",
    "doc.resources.runtime_memory.kv_cache_bytes % -0", "", "   ", "doc.__class__", "doc._private",
    "sum(x for x in range(10**8))", "max(range(10**9))", "'a' * 10**9", "[0] * 10**9",
    "All(g.x > 0 for g in doc.resources.cache_groups)", "x", "doc.nothing", "lambda: 0", "f'{doc}'",
    "{1: 2}", "{1, 2}", "doc.resources.cache_groups[10**9]", "1" * 5000, "1e400", "---1",
]
WEIRD_VALUES = [None, True, False, 0, -1, 1, 2**53, 2**53 + 1, 2**64, -(2**63), 0.5, -0.0, 1e308, "", "x",
                "\ud800", "0.33.0", [], {}, [None], [[[[]]]], {"": None}, "x" * 5000, [0] * 2000, [0, 24, 2],
                [5, 3], [0, 2**40], "FullAttentionSpec", "MambaSpec", "bfloat16", "state", "attention"]


def _walk(tree, path=()):
    yield path, tree
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _walk(value, (*path, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from _walk(value, (*path, index))


def _set(tree, path, value):
    if not path:
        return value
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return tree


def _json_mutation(rng: random.Random, tree):
    sites = list(_walk(tree))
    path, value = rng.choice(sites)
    op = rng.choice(["weird", "weird", "delete", "insert", "list", "type", "deep", "huge_int"])
    if op == "weird":
        return _set(tree, path, copy.deepcopy(rng.choice(WEIRD_VALUES)))  # a copy: later edits must not reach the pool
    if op == "delete" and path:
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return tree
    if op == "insert" and isinstance(value, dict):
        value[rng.choice(["extra", "layers", "schema_version", "kind", "range", "", "\u00e9", "spec"])] = \
            copy.deepcopy(rng.choice(WEIRD_VALUES))
        return tree
    if op == "list" and isinstance(value, list):
        choice = rng.choice(["empty", "dup", "reverse", "many"])
        if choice == "empty":
            value.clear()
        elif choice == "dup" and value:
            value.append(json.loads(json.dumps(rng.choice(value))))
        elif choice == "reverse":
            value.reverse()
        else:
            value.extend(json.loads(json.dumps(value)) * rng.randint(2, 50) if value else [0] * 100)
        return tree
    if op == "type":
        replacement = {int: str, str: lambda v: len(v), bool: int, float: str, list: lambda v: {"0": v},
                       dict: lambda v: list(v.values()), type(None): lambda v: 0}[type(value)](value)
        return _set(tree, path, replacement)
    if op == "deep" and len(path) < 100:  # not inside an earlier nest: two would pass json.dumps's recursion limit
        nested = 0
        for _ in range(rng.choice([10, 100, 500])):  # deeper nesting is a text mutation (json.dumps recurses)
            nested = [nested]
        return _set(tree, path, nested)
    if op == "huge_int":
        return _set(tree, path, rng.choice([10**20, 2**53 * 3, 10**400 if rng.random() < 0.1 else 2**60]))
    return _set(tree, path, None)


def _text_mutation(rng: random.Random, data: bytes) -> bytes:
    op = rng.choice(["truncate", "flip", "insert", "delete", "bom", "utf16", "digits", "literal", "nul", "dup_key",
                     "deep"])
    if not data:
        return b"{"
    at = rng.randrange(len(data))
    if op == "truncate":
        return data[:at]
    if op == "flip":
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    if op == "insert":
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[at:]
    if op == "delete":
        return data[:at] + data[at + rng.randint(1, 20):]
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16")
    if op == "digits":
        return data.replace(b": 1", b": " + b"9" * rng.choice([30, 5000]), 1)
    if op == "literal":
        return data.replace(b": 0", b": " + rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999"]), 1)
    if op == "deep":
        depth = rng.choice([1000, 5000, 100_000])
        return data.replace(b": ", b": " + b"[" * depth + b"0" + b"]" * depth + b", \"_\": ", 1)
    if op == "nul":
        return data[:at] + b"\x00" + data[at:]
    return data.replace(b"{", b'{"k": 1, "k": 2, ', 1)


def _expression_mutation(rng: random.Random, text: str) -> str:
    if rng.random() < 0.15:
        return rng.choice(NASTY_EXPRESSIONS)
    import re

    tokens = re.findall(r"\w+|\s+|\*\*|[=<>!]=|\S", text) or [""]
    for _ in range(rng.choice([1, 1, 2, 3])):
        at = rng.randrange(len(tokens) + 1)
        op = rng.choice(["insert", "delete", "swap", "dup"])
        if op == "insert":
            tokens.insert(at, rng.choice(TOKENS))
        elif op == "delete" and at < len(tokens):
            del tokens[at]
        elif op == "swap" and len(tokens) > 1:
            i, j = rng.randrange(len(tokens)), rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif at < len(tokens):
            tokens.insert(at, tokens[at])
    return "".join(tokens)


def mutate(rng: random.Random, kind: str, base: bytes) -> bytes:
    if kind == "expression":
        return _expression_mutation(rng, base.decode()).encode("utf-8", "surrogatepass")
    if rng.random() < 0.3:
        return _text_mutation(rng, base)
    tree = json.loads(base)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        tree = _json_mutation(rng, tree)
    return json.dumps(tree, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


#: Inputs that are not file contents: each entry point gets them once.
SPECIALS = ["empty", "missing", "directory", "link_loop", "dangling_link", "dev_zero", "fifo_silent",
            "fifo_no_writer", "big_sparse"]


def _special(name: str, scratch: Path, keep: list[int]) -> Path:
    path = scratch / "input.json"
    if name == "empty":
        path.write_bytes(b"")
    elif name == "missing":
        pass
    elif name == "directory":
        path.mkdir()
    elif name == "link_loop":
        os.symlink(scratch / "other.json", path)
        os.symlink(path, scratch / "other.json")
    elif name == "dangling_link":
        os.symlink(scratch / "nowhere.json", path)
    elif name == "dev_zero":
        os.symlink("/dev/zero", path)
    elif name in ("fifo_silent", "fifo_no_writer"):
        os.mkfifo(path)
        if name == "fifo_silent":
            keep.append(os.open(path, os.O_RDWR | os.O_NONBLOCK))  # a writer that never writes
    elif name == "big_sparse":
        with open(path, "wb") as handle:
            handle.write(b'{"layers": [], "x": "')
            handle.seek(100 << 20)
            handle.write(b'"}')
    return path


# ------------------------------------------------------------------------------ running
def plan_cases(count: int, seed: int) -> list[dict]:
    """``count`` cases spread evenly over the entry points, plus each special input once per entry point."""
    rng = random.Random(seed)
    bases = _bases()
    names = list(ENTRY_POINTS)
    cases = [{"entry": e, "special": s} for e in names for s in SPECIALS if ENTRY_POINTS[e][0] != "expression"]
    for number in range(max(0, count - len(cases))):
        entry = names[number % len(names)]
        kind = ENTRY_POINTS[entry][0]
        base_name, base = rng.choice(bases[kind])
        cases.append({"entry": entry, "base": base_name, "data": mutate(rng, kind, base)})
    return cases


def _child(argv: list[str], scratch: Path, fresh: bool) -> None:
    """In the forked process: limits, streams, then kvproof's own entry point (or a fresh one)."""
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.chdir(scratch)
        for fd, name, mode in ((0, os.devnull, os.O_RDONLY), (1, scratch / "stdout", os.O_WRONLY | os.O_CREAT),
                               (2, scratch / "stderr", os.O_WRONLY | os.O_CREAT)):
            target = os.open(name, mode, 0o644)
            os.dup2(target, fd)
            os.close(target)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if fresh:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            env.pop("KVPROOF_DEBUG", None)
            os.execve(sys.executable, [sys.executable, "-m", "kvproof", *argv], env)
        os.environ.pop("KVPROOF_DEBUG", None)
        from kvproof.cli import main

        code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 4)
    except BaseException:  # noqa: BLE001 - anything escaping main() is a finding: print it, exit 99
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(99)


def run(cases: list[dict], jobs: int, fresh: int, seed: int, progress: bool = True) -> list[dict]:
    import kvproof.cli  # noqa: F401 - imported once here, inherited by every forked case
    import kvproof.commands.check  # noqa: F401
    import kvproof.rules.check  # noqa: F401
    import kvproof.solver.prove  # noqa: F401
    import kvproof.sim  # noqa: F401
    import z3  # noqa: F401

    fresh_ids = set(random.Random(seed + 1).sample(range(len(cases)), min(fresh, len(cases))))
    work = Path(tempfile.mkdtemp(prefix="kvproof-campaign-"))
    results: list[dict] = []
    pending = list(enumerate(cases))
    running: dict[int, tuple[int, dict, float, Path, list[int], list[str]]] = {}
    started = time.perf_counter()
    try:
        while pending or running:
            while pending and len(running) < jobs:
                number, case = pending.pop(0)
                scratch = work / f"{number:05d}"
                scratch.mkdir()
                keep: list[int] = []
                if "special" in case:
                    path = _special(case["special"], scratch, keep)
                else:
                    path = scratch / "input.json"
                    path.write_bytes(case["data"])
                # A command line cannot hold a NUL character; everything else reaches kvproof as drawn.
                argv = [a.replace("\x00", "\\0") for a in ENTRY_POINTS[case["entry"]][1](path, scratch)]
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(argv, scratch, number in fresh_ids)
                running[pid] = (number, case, time.perf_counter(), scratch, keep, argv)
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            now = time.perf_counter()
            if pid == 0:
                for child, (number, case, start, scratch, keep, argv) in list(running.items()):
                    if now - start > TIME_LIMIT:
                        os.kill(child, signal.SIGKILL)  # reaped below as a hang
                        running[child] = (number, {**case, "hang": True}, start, scratch, keep, argv)
                time.sleep(0.005)
                continue
            number, case, start, scratch, keep, argv = running.pop(pid)
            for fd in keep:
                os.close(fd)
            out = (scratch / "stdout").read_bytes() if (scratch / "stdout").exists() else b""
            err = (scratch / "stderr").read_bytes() if (scratch / "stderr").exists() else b""
            code = os.waitstatus_to_exitcode(status)
            results.append({
                "number": number, "entry": case["entry"], "input": case.get("special") or case.get("base"),
                "fresh": number in fresh_ids, "code": code, "seconds": round(now - start, 3),
                "max_rss_bytes": usage.ru_maxrss * 1024, "hang": bool(case.get("hang")),
                "traceback": b"Traceback (most recent call last)" in out + err,
                "internal": code == 4 or b"internal error" in out + err,
                "memory_error": b"out of memory" in out + err or b"MemoryError" in err,
                "argv": [a if len(a) < 300 else a[:300] + "..." for a in argv],
                "tail": (err or out)[-600:].decode("utf-8", "backslashreplace"),
            })
            shutil.rmtree(scratch, ignore_errors=True)
            if progress and len(results) % 100 == 0:
                print(f"  {len(results)}/{len(cases)} cases, {now - started:.0f} s", file=sys.stderr, flush=True)
    finally:
        for child in running:
            os.kill(child, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    return sorted(results, key=lambda r: r["number"])


def failures(result: dict) -> list[str]:
    out = []
    if result["traceback"]:
        out.append("traceback")
    if not 0 <= result["code"] <= 4:
        out.append(f"exit {result['code']}")
    if result["hang"] or result["seconds"] > TIME_LIMIT:
        out.append("hang")
    if result["max_rss_bytes"] > MEMORY_LIMIT:
        out.append("memory")
    return out


def summarize(results: list[dict]) -> dict:
    by_entry: dict[str, dict] = {}
    for result in results:
        entry = by_entry.setdefault(result["entry"], {"cases": 0, "codes": {}, "failures": 0, "internal": 0,
                                                      "max_seconds": 0.0, "max_rss_mib": 0})
        entry["cases"] += 1
        entry["codes"][str(result["code"])] = entry["codes"].get(str(result["code"]), 0) + 1
        entry["failures"] += bool(failures(result))
        entry["internal"] += result["internal"]
        entry["max_seconds"] = max(entry["max_seconds"], result["seconds"])
        entry["max_rss_mib"] = max(entry["max_rss_mib"], result["max_rss_bytes"] >> 20)
    return {
        "cases": len(results), "fresh": sum(r["fresh"] for r in results),
        "tracebacks": sum(r["traceback"] for r in results),
        "exit_outside_0_4": sum(not 0 <= r["code"] <= 4 for r in results),
        "hangs_over_10s": sum(r["hang"] or r["seconds"] > TIME_LIMIT for r in results),
        "over_2gib": sum(r["max_rss_bytes"] > MEMORY_LIMIT for r in results),
        "internal_errors": sum(r["internal"] for r in results),
        "memory_errors": sum(r["memory_error"] for r in results),
        "entry_points": by_entry,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fresh", type=int, default=20, help="cases run as fresh interpreters")
    parser.add_argument("--entry", action="append", help="only these entry points (repeatable)")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    cases = plan_cases(args.cases, args.seed)
    if args.entry:
        cases = [c for c in cases if c["entry"] in args.entry]
    start = time.perf_counter()
    results = run(cases, args.jobs, args.fresh, args.seed)
    summary = {**summarize(results), "seed": args.seed, "jobs": args.jobs, "seconds": round(time.perf_counter() - start)}
    bad = [r for r in results if failures(r) or r["internal"]]
    for result in bad:
        print(f"FAIL {', '.join(failures(result) + (['internal error'] if result['internal'] else []))}: "
              f"{result['entry']} ({result['input']}) exit {result['code']} {result['seconds']} s: "
              f"kvproof {' '.join(result['argv'])}\n    {result['tail'].strip().splitlines()[-1] if result['tail'].strip() else ''}")
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    return 0 if not any(failures(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
