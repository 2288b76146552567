"""The example of docs/fuzz.md ("Strategies for your own tests") runs as written."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "fuzz.md"


def test_the_documented_example_runs(tmp_path) -> None:
    section = DOC.read_text(encoding="utf-8").split("## Strategies for your own tests", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    module_file = tmp_path / "fuzz_doc_example.py"  # a real file: Hypothesis reads the tests' source
    module_file.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("fuzz_doc_example", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
    assert len(tests) == 3
    for test in tests:
        test()
