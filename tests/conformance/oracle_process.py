"""Shared by the conformance fixtures (conftest.py), test_conformance.py and the requests parity
suite (test_requests_parity.py): the vLLM oracle as a long-running process (``oracle.py`` or
``oracle_requests.py`` with ``--jsonl`` in ``.venv-vllm``) and the comparison of its answers."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ORACLE = HERE / "oracle.py"
VENV_PYTHON = Path(os.environ.get("KVPROOF_ORACLE_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
ORACLE_TIMEOUT_S = float(os.environ.get("KVPROOF_ORACLE_TIMEOUT", "600"))
#: ``KVPROOF_REQUESTS_SEED``: the seed of the requests suite's random workloads and, when given, of its
#: Hypothesis test too (test_requests_parity.py); without it the random workloads use 20261129 and
#: Hypothesis its own seed (``--hypothesis-seed``, or a random one).
REQUESTS_SEED_GIVEN = bool(os.environ.get("KVPROOF_REQUESTS_SEED"))
REQUESTS_SEED = int(os.environ.get("KVPROOF_REQUESTS_SEED") or "20261129")


class OracleProcess:
    """``SCRIPT --jsonl`` in ``.venv-vllm`` (``oracle.py`` by default, ``oracle_requests.py`` for
    requests over time): one geometry per line in, one answer per line out.

    vLLM is imported once per session; answers are cached by the geometry's canonical JSON (Hypothesis
    replays examples while shrinking).
    """

    def __init__(self, python: Path, script: Path = ORACLE, log_name: str = "conformance-oracle.stderr.log"):
        (ROOT / "out").mkdir(exist_ok=True)
        self._name = script.name
        self._log = open(ROOT / "out" / log_name, "w", encoding="utf-8")
        self._proc = subprocess.Popen(
            [str(python), str(script), "--jsonl"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, bufsize=1, cwd=str(ROOT),
        )
        self._cache: dict[str, dict] = {}
        self._lock = threading.Lock()

    def __call__(self, geometry: dict) -> dict:
        key = json.dumps(geometry, sort_keys=True)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self._name} exited with {self._proc.returncode}; see {self._log.name}")
            self._proc.stdin.write(json.dumps(geometry) + "\n")
            self._proc.stdin.flush()
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(self._proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(ORACLE_TIMEOUT_S)
            if not answer or not answer[0]:
                raise RuntimeError(f"no answer from {self._name} within {ORACLE_TIMEOUT_S}s; see {self._log.name}")
            result = json.loads(answer[0])
            self._cache[key] = result
            return result

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._log.close()


# --- comparing answers -----------------------------------------------------------------------------

MISSING = "<missing>"
MAX_DIFFERENCES = 25


def short(value) -> str:
    text = value if value is MISSING else json.dumps(value)
    return text if len(text) <= 240 else text[:237] + "..."


def json_diff(vllm, kvproof, path: str, out: list[dict], closed_maps: tuple[str, ...] = ()) -> None:
    """Append the differences of two JSON values, as paths, to ``out`` (at most MAX_DIFFERENCES).
    Scalars differ unless type and value agree (20 and 20.0 differ, and so do 1 and True). A key
    kvproof has beyond vLLM's is a difference only in maps whose path ends with ``closed_maps``."""
    if len(out) >= MAX_DIFFERENCES:
        return
    if isinstance(vllm, dict) and isinstance(kvproof, dict):
        for key, value in vllm.items():
            if key not in kvproof:
                out.append({"path": f"{path}.{key}", "vllm": short(value), "kvproof": MISSING})
            else:
                json_diff(value, kvproof[key], f"{path}.{key}", out, closed_maps)
        if closed_maps and path.endswith(closed_maps):
            for key in kvproof:
                if key not in vllm:
                    out.append({"path": f"{path}.{key}", "vllm": MISSING, "kvproof": short(kvproof[key])})
        return
    if isinstance(vllm, list) and isinstance(kvproof, list):
        if len(vllm) != len(kvproof):
            out.append({"path": f"{path}.length", "vllm": str(len(vllm)), "kvproof": str(len(kvproof))})
        for i, (a, b) in enumerate(zip(vllm, kvproof)):
            json_diff(a, b, f"{path}[{i}]", out, closed_maps)
        return
    if not (type(vllm) is type(kvproof) and vllm == kvproof):
        out.append({"path": path, "vllm": short(vllm), "kvproof": short(kvproof)})
