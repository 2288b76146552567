"""Differential test: simulate_document against vLLM 0.33.0 itself (opt-in: -m conformance).

The oracle (``tests/conformance/oracle.py``, run with ``.venv-vllm/bin/python``) drives vLLM's own
planning functions; every key it reports must be equal in kvproof's output (kvproof may add keys).
Refusals must agree on vLLM's exception type and text; bad input on the status only.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from kvproof.sim import simulate_document

from sim_helpers import GEOMETRIES
from random_geometries import gen

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tests" / "conformance" / "oracle.py"
PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
KVPROOF_ONLY = {"original_max_model_len"}

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.skipif(not (ORACLE.exists() and PYTHON.exists()), reason="needs .venv-vllm and the oracle"),
]


def oracle(docs: list[dict]) -> list[dict]:
    proc = subprocess.run([str(PYTHON), str(ORACLE), "--jsonl", "-"], input="".join(json.dumps(d) + "\n" for d in docs),
                          capture_output=True, text=True, cwd=ROOT, timeout=3600)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(answers) == len(docs), proc.stderr[-2000:]
    return answers


def differences(ours, theirs, path="$") -> list[str]:
    if isinstance(theirs, dict):
        out = []
        for key, value in theirs.items():
            if key in ("name", "stage"):
                continue
            if not isinstance(ours, dict) or key not in ours:
                out.append(f"{path}.{key}: missing")
            else:
                out += differences(ours[key], value, f"{path}.{key}")
        return out
    if isinstance(theirs, list) and isinstance(ours, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == theirs else [f"{path}: kvproof {json.dumps(ours)[:200]} vLLM {json.dumps(theirs)[:200]}"]


def verdict(doc: dict, theirs: dict) -> list[str]:
    ours = simulate_document(doc)
    if theirs["status"] == "bad_input" or ours["status"] == "bad_input":
        return [] if ours["status"] == theirs["status"] else [f"status {ours['status']} vs {theirs['status']}"]
    if theirs["status"] == "refused":
        if ours["status"] != "refused":
            return [f"kvproof {ours['status']}, vLLM refuses: {theirs['error']['message'][:200]}"]
        return differences(ours["error"], {k: v for k, v in theirs["error"].items() if k in ("message", "type")})
    return differences(ours, theirs)


def documents() -> list[dict]:
    docs = []
    for path in sorted(GEOMETRIES.glob("*.json")) + sorted((ROOT / "tests" / "conformance" / "geometries").glob("*.json")):
        doc = json.loads(path.read_text())
        if path.name.endswith(".expected.json") or KVPROOF_ONLY & set(doc):
            continue
        for backend in doc.get("views", {}).get("backends", []):
            backend.pop("name", None)
        doc["name"] = f"{path.name}: {doc.get('name', '')}"
        docs.append(doc)
    rng = random.Random(20261129)
    docs += [gen(rng, f"random-{n}") for n in range(40)]
    return docs


def test_kvproof_agrees_with_vllm() -> None:
    docs = documents()
    answers = oracle(docs)
    failures = {}
    for doc, theirs in zip(docs, answers):
        if theirs["status"] == "oracle_error":
            continue  # the oracle could not drive vLLM (reported by the conformance suite)
        problems = verdict(doc, theirs)
        if problems:  # the oracle's answers can depend on earlier documents of a batch: ask again alone
            problems = verdict(doc, oracle([doc])[0])
        if problems:
            failures[doc["name"]] = problems[:5]
    assert not failures, json.dumps(failures, indent=1)
