"""No code execution from input: the package source holds none of the usual ways to run text
as code or to deserialise objects, and starts no shell.

Two modules run code on purpose: ``kvproof claim`` evaluates the claim expressions and claim
files its user writes (like pytest runs test files) and ``kvproof explore`` the objective
expression given on its command line. Their findings are listed in ``ALLOWED`` with that reason,
and a second test proves that no document path (``check``, ``simulate``, the loaders, the rules)
imports them, so a checked document can never reach them."""

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
]


#: file (relative to the package's parent) -> the FORBIDDEN reasons it may show, and why.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "kvproof/solver/claims/__init__.py": (
        {"eval() runs text as code", "the builtin compile() prepares text to run (re.compile is a method: allowed)",
         "importlib.import_module() imports a module named by a string"},
        "kvproof claim runs the claim expressions and claim files its user writes, never a checked document",
    ),
    "kvproof/solver/explore.py": (
        {"eval() runs text as code", "the builtin compile() prepares text to run (re.compile is a method: allowed)"},
        "kvproof explore evaluates the objective expression its user writes on the command line",
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


def test_no_document_path_imports_a_module_that_runs_code() -> None:
    """check, simulate, the loaders and the rules: none of them imports the claim runner."""
    entry = ("import sys\n"
             "import kvproof.cli, kvproof.commands.check, kvproof.models.documents, kvproof.rules.check\n"
             "try:\n    import kvproof.commands.simulate, kvproof.sim\nexcept ImportError:\n    pass\n"
             f"bad = [m for m in sys.modules if m.startswith({CODE_RUNNING_MODULES!r})]\n"
             "print(bad)\nsys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", entry], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_patterns_catch_what_they_should() -> None:
    bad = ["eval(text)", "x = exec(code)", "pickle.loads(b)", "yaml.load(f)", "subprocess.run(c, shell=True)",
           "os.system(cmd)", "__import__(name)", "importlib.import_module(name)", "compile(s, 'f', 'exec')"]
    for line in bad:
        assert any(re.search(p, _code_only(line)) for p, _ in FORBIDDEN), line
    fine = ["model.eval(term)", "solver.model().eval(x, model_completion=True)", "re.compile(r'x')",
            "# eval(x) in a comment", "'''eval(x) in a docstring'''", "evaluate(paths)"]
    for line in fine:
        assert not any(re.search(p, _code_only(line)) for p, _ in FORBIDDEN), line
