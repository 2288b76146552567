"""One arithmetic, one body (docs/design.md): the rules and the simulator compute with the formulas
floor, no rule body keeps a second plain-Python copy, and a rule family stands alone."""

from __future__ import annotations

import ast
from pathlib import Path

import kvproof.formulas
import kvproof.rules
from kvproof.rules.core import FAMILIES

FORMULAS = Path(kvproof.formulas.__file__).parent
RULES = Path(kvproof.rules.__file__).parent
SIM = FORMULAS.parent / "sim"


def _imports(path: Path) -> set[str]:
    """The kvproof modules a module imports, relative to ``kvproof`` (``from a import b`` counts as
    ``a`` and as ``a.b``: b may be a submodule)."""
    package = path.parent.relative_to(FORMULAS.parent.parent).parts  # ("kvproof", "rules")
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join(parts + (node.module.split(".") if node.module else []))
            if module.startswith("kvproof"):
                module = module.removeprefix("kvproof").removeprefix(".")
                out.add(module)
                out.update(f"{module}.{alias.name}".lstrip(".") for alias in node.names)
        elif isinstance(node, ast.Import):
            out.update(alias.name.removeprefix("kvproof.") for alias in node.names if alias.name.startswith("kvproof."))
    return out


def test_no_rule_tests_checking_concretely() -> None:
    offenders = [path.name for path in RULES.glob("*.py") if "checking_concretely" in path.read_text()]
    assert offenders == []


def test_a_family_imports_no_other_family() -> None:
    families = {module for module, _title in FAMILIES.values()}
    crossing = {}
    for module in families:
        imported = {name.split(".")[1] for name in _imports(RULES / f"{module}.py") if name.startswith("rules.")}
        others = sorted((imported & families) - {module})
        if others:
            crossing[module] = others
    assert crossing == {}


def test_the_formulas_floor_imports_only_logic_and_itself() -> None:
    for path in FORMULAS.glob("*.py"):
        imported = {name.split(".")[0] for name in _imports(path)} - {""}
        assert imported <= {"logic", "formulas"}, (path.name, imported)


def test_the_simulator_imports_the_floor_itself() -> None:
    """No module of kvproof/sim stands in for a formula module (a ``sys.modules`` alias): the
    simulator imports kvproof.formulas, as the rules do."""
    aliases = sorted(path.name for path in SIM.rglob("*.py") if "sys.modules[" in path.read_text())
    assert aliases == []
    assert {"formulas.blocks_per_request", "formulas.pages"} <= _imports(SIM / "startup" / "specs.py")
    assert "formulas.concurrency" in _imports(SIM / "startup" / "plan.py")


def test_views_and_the_view_rules_share_the_kernel_block_formulas() -> None:
    views = _imports(SIM / "startup" / "views.py") | _imports(SIM / "startup" / "pool.py")
    assert {"formulas.kernel_blocks", "formulas.pages"} <= views
    rules = _imports(RULES / "view_coverage.py") | _imports(RULES / "spec_classes.py")
    assert {"formulas.kernel_blocks", "formulas.pages", "formulas.dtypes"} <= rules
