"""No code execution from input: the package source holds none of the usual ways to run text
as code or to deserialise objects, and starts no shell.

Two modules run code on purpose. ``kvproof claim`` runs the claim expressions and claim files
its user writes: they are Python, run with the user's privileges like ``python -c`` (or pytest
running test files), by design (docs/formats.md "Code from input", ``kvproof claim --help``).
Claim expressions and ``kvproof explore`` objectives are no Python: they are checked and run by
the interpreter of ``kvproof.solver.expression`` (an AST allow-list; no eval). Their findings are listed in ``ALLOWED`` with that reason (and
an allowance that no longer matches anything fails, so the list cannot go stale); further tests
prove that no document path (``check``, ``simulate``, ``synth``, the loaders, the rules) imports
them, so a checked document can never reach them, and that the explore command parses before the
solver evaluates."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kvproof"
SOURCES = sorted(PACKAGE.rglob("*.py"))

#: (pattern, why it is forbidden). Method calls such as z3's ``model.eval(term)`` are not the
#: builtins and do not match (the builtin forms are not preceded by a dot or a name character).
FORBIDDEN = [
    (r"(?<![.\w])eval\s*\(", "eval() runs text as code"),
    (r"(?<![.\w])exec\s*\(", "exec() runs text as code"),
    (r"(?<![.\w])compile\s*\(", "the builtin compile() prepares text to run (re.compile is a method: allowed)"),
    (r"(?<![.\w])__import__\s*\(", "__import__() imports a module named by a string"),
    (r"\bimport_module\s*\(", "importlib.import_module() imports a module named by a string"),
    (r"\bpickle\b|\bcPickle\b|\bdill\b|\bcloudpickle\b|\bshelve\b|\bmarshal\b", "unpickling runs code"),
    (r"\byaml\.(load|unsafe_load|full_load)\s*\(", "yaml.load() can build arbitrary objects"),
    (r"\bjsonpickle\b", "jsonpickle builds arbitrary objects"),
    (r"shell\s*=\s*True", "a shell interprets its command line"),
    (r"\bos\.(system|popen|exec\w*|spawn\w*)\s*\(", "starts a program through the OS"),
    (r"\bsubprocess\b", "kvproof check/simulate start no process"),
    (r"\bpty\.spawn\b|\bcode\.interact\b|\bruntime\.eval\b", "interactive code execution"),
    (r"\bexec_module\s*\(|\bspec_from_file_location\s*\(|\brunpy\b|\bSourceFileLoader\b",
     "imports and runs a Python file"),
    (r"\bctypes\b|\bcffi\b", "calls native code"),
    (r"\bbuiltins\s*\.\s*(eval|exec|compile|__import__)\b|__builtins__\s*\[", "reaches eval/exec through builtins"),
    (r"\bgetattr\s*\(\s*(builtins|__builtins__)\b", "reaches eval/exec through builtins"),
]


#: file (relative to the package's parent) -> the FORBIDDEN reasons it may show, and why.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "kvproof/solver/native.py": (
        {"calls native code"},
        "z3's own C entry points (the functions the z3 package wraps) for the solver's DAG walks, and "
        "glibc's mallopt with constant arguments: nothing an input chooses reaches a call, and no "
        "document path imports it (the solver only)",
    ),
    "kvproof/solver/claims/__init__.py": (
        {"imports and runs a Python file"},
        "kvproof claim --claims FILE imports the claim file its user writes (user code by design, like "
        "python -c), never a checked document",
    ),
}
#: Modules that run user code; no document path may import them.
CODE_RUNNING_MODULES = ("kvproof.solver.claims", "kvproof.solver.explore")


def _code_only(source: str) -> str:
    """The source with docstrings, comments and string literals blanked (a docstring may name eval)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    blank = [list(line) for line in lines]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and hasattr(node, "end_lineno"):
            for row in range(node.lineno - 1, node.end_lineno):
                start = node.col_offset if row == node.lineno - 1 else 0
                end = node.end_col_offset if row == node.end_lineno - 1 else len(blank[row])
                for col in range(start, min(end, len(blank[row]))):
                    if blank[row][col] not in "\r\n":
                        blank[row][col] = " "
    text = "".join("".join(row) for row in blank)
    return re.sub(r"#.*", "", text)


def test_the_scan_sees_the_package() -> None:
    assert len(SOURCES) > 20
    assert any(p.name == "codec.py" for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_code_execution_from_input(path) -> None:
    code = _code_only(path.read_text(encoding="utf-8"))
    allowed, _reason = ALLOWED.get(path.relative_to(PACKAGE.parent).as_posix(), (set(), ""))
    found = [f"{why}: {m.group(0)!r} at line {code[:m.start()].count(chr(10)) + 1}"
             for pattern, why in FORBIDDEN for m in re.finditer(pattern, code) if why not in allowed]
    assert not found, f"{path}: {found}"


def _findings(path: Path) -> set[str]:
    code = _code_only(path.read_text(encoding="utf-8"))
    return {why for pattern, why in FORBIDDEN if re.search(pattern, code)}


def test_every_allowance_is_still_needed() -> None:
    """An allowance that matches nothing is removed, so the allow list only holds what runs code."""
    for name, (allowed, _reason) in ALLOWED.items():
        path = PACKAGE.parent / name
        assert path.exists(), f"{name} is allowed but does not exist"
        assert allowed <= _findings(path), f"{name}: allowed but not found: {allowed - _findings(path)}"


def test_explore_parses_the_objective_before_the_solver_evaluates_it() -> None:
    """In kvproof/commands/explore.py, run() calls parse() before explore() (the AST of run, in
    source order), and the expression language refuses the classic escapes."""
    from kvproof.solver.expression import ExpressionError, parse

    tree = ast.parse((PACKAGE / "commands" / "explore.py").read_text(encoding="utf-8"))
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    calls = [(n.lineno, n.func.id) for n in ast.walk(run) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in ("parse", "explore")]
    assert [name for _line, name in sorted(calls)] == ["parse", "explore"], calls
    for escape in ("().__class__.__base__.__subclasses__()", "doc.__dict__", "__import__('os')", "open('x')",
                   "(lambda: 0)()", "sim.plan.math.__loader__", "'{0.__class__}'.format(doc)", "[].append(1)",
                   "getattr(doc, 'x')", "f'{doc!r}'", "{doc: 1}", "9 ** 9 ** 9", "(y := doc)"):
        with pytest.raises(ExpressionError):
            parse(escape)
    parse("Sum([g.page_size_bytes * 2 for g in doc.resources.cache_groups]) + len(doc.x)")


def test_no_document_path_imports_a_module_that_runs_code() -> None:
    """check, simulate, synth, the loaders and the rules: none of them imports the claim runner."""
    entry = ("import sys\n"
             "import kvproof.cli, kvproof.commands.check, kvproof.commands.synth, kvproof.commands.explore\n"
             "import kvproof.models.documents, kvproof.models.geometry, kvproof.rules.check\n"
             "try:\n    import kvproof.commands.simulate, kvproof.sim\nexcept ImportError:\n    pass\n"
             f"bad = [m for m in sys.modules if m.startswith({CODE_RUNNING_MODULES!r})]\n"
             "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", entry], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_patterns_catch_what_they_should() -> None:
    bad = ["eval(text)", "x = exec(code)", "pickle.loads(b)", "yaml.load(f)", "subprocess.run(c, shell=True)",
           "os.system(cmd)", "__import__(name)", "importlib.import_module(name)", "compile(s, 'f', 'exec')",
           "spec.loader.exec_module(m)", "importlib.util.spec_from_file_location(n, p)", "runpy.run_path(p)",
           "import ctypes", "builtins.eval(s)", "__builtins__['exec'](s)", "getattr(builtins, name)"]
    for line in bad:
        assert any(re.search(p, _code_only(line)) for p, _ in FORBIDDEN), line
    fine = ["model.eval(term)", "solver.model().eval(x, model_completion=True)", "re.compile(r'x')",
            "# eval(x) in a comment", "'''eval(x) in a docstring'''", "evaluate(paths)"]
    for line in fine:
        assert not any(re.search(p, _code_only(line)) for p, _ in FORBIDDEN), line
