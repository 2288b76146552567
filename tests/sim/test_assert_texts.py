"""The requests port's bare asserts are vLLM's: the text of the AssertionError they raise (empty)
is part of what ``simulate`` reports (``raised``), so it must be what vLLM raises, whoever imports
kvproof. pytest rewrites the asserts of every module of a distribution that ships a pytest plugin
(kvproof does), which turned ``assert a == b`` into ``assert 16 == 32 ...`` under pytest when kvproof
was installed from a wheel: the conformance suite saw texts vLLM never gives."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
from _pytest.assertion.rewrite import rewrite_asserts

import kvproof.sim

SIM = Path(kvproof.sim.__file__).parent


def _modules_with_asserts() -> list[Path]:
    return sorted(path for path in SIM.rglob("*.py")
                  if any(isinstance(node, ast.Assert) for node in ast.walk(ast.parse(path.read_text()))))


def test_the_port_has_asserts_to_keep() -> None:
    names = {path.stem for path in _modules_with_asserts()}
    assert {"block_pool", "managers", "scheduler"} <= names


@pytest.mark.parametrize("path", _modules_with_asserts(), ids=lambda path: path.stem)
def test_pytest_leaves_the_asserts_as_vllm_wrote_them(path: Path) -> None:
    source = path.read_bytes()
    tree = ast.parse(source)
    before = ast.dump(tree)
    rewritten = copy.deepcopy(tree)
    rewrite_asserts(rewritten, source)  # pytest's own decision (it honours PYTEST_DONT_REWRITE)
    assert ast.dump(rewritten) == before, f"pytest would rewrite the asserts of {path.name}"
