#!/usr/bin/env python3
"""Conformance oracle of the state support table: vLLM 0.33.0's own
``VllmConfig.validate_mamba_cached_kernel`` (``vllm/config/vllm.py:3454-3553``), called as an
unbound function on a stand-in that holds exactly the attributes it reads.

    .venv-vllm/bin/python tests/conformance/oracle_state_support.py --jsonl   # one request per line

A request line is ``{"combinations": [...]}`` (answer ``{"answers": [...]}``, one per combination:
``{"error": <ValueError text or null>, "use_kda_recoverssm": bool}``) or
``{"replayssm_architectures": true}`` (answer: the registered architectures whose class declares
``SupportsReplaySSM``, found in vLLM's source; see ``replayssm_architectures``).

A combination names vLLM's inputs: ``use_replayssm``, ``architecture`` (a class name), ``mamba_backend``
(a ``MambaBackendEnum`` value), ``use_v2_model_runner``, ``mamba_cache_mode``, ``num_speculative_tokens``,
``replayssm_buffer_len``, ``pipeline_parallel_size``, ``kv_connector`` (a NixlConnector
``KVTransferConfig`` in role kv_both, else None), ``stochastic_rounding``. docs/conformance.md
describes the stand-in. Output on stdout is JSON only.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

_REAL_STDOUT = sys.stdout
with contextlib.redirect_stdout(sys.stderr):
    import vllm
    from vllm.config.kv_transfer import KVTransferConfig
    from vllm.config.mamba import MambaBackendEnum
    from vllm.config.vllm import VllmConfig
    from vllm.model_executor.models import registry

VALIDATE = VllmConfig.validate_mamba_cached_kernel


def replayssm_architectures() -> list[str]:
    """The architectures of ``registry._VLLM_MODELS`` whose class has ``SupportsReplaySSM`` among
    its bases, directly or through another class of vLLM's source (a class name defined more than
    once with different answers takes the definitions outside ``amd/``: models/kimi_k3/__init__.py
    imports the ``nvidia/`` classes on CUDA and the ``amd/`` ones, without the interface, on ROCm)."""
    root = Path(vllm.__file__).parent
    bases: dict[str, list[tuple[str, list[str]]]] = {}
    # the model classes and the interfaces they implement live here (registry._resolve_module_name)
    for path in sorted([*(root / "model_executor" / "models").rglob("*.py"), *(root / "models").rglob("*.py")]):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
                bases.setdefault(node.name, []).append((str(path.relative_to(root)), names))

    memo: dict[tuple[str, str], bool] = {}

    def supports(name: str, where: str, seen: frozenset = frozenset()) -> bool:
        key = (name, where)
        if key not in memo:
            memo[key] = name == "SupportsReplaySSM" or any(
                supports(base, path, seen | {name}) for path, names in _definitions(name) for base in names
                if base not in seen)
        return memo[key]

    def _definitions(name: str) -> list[tuple[str, list[str]]]:
        found = bases.get(name, [])
        return [d for d in found if "/amd/" not in f"/{d[0]}"] or found

    out = []
    for arch, (_module, class_name) in sorted(registry._VLLM_MODELS.items()):
        if supports(class_name, ""):
            out.append(arch)
    return out


def _stand_in(c: dict) -> types.SimpleNamespace:
    """Exactly the attributes validate_mamba_cached_kernel reads (and the one it writes)."""
    supported = c["architecture"] in _SUPPORTED
    return types.SimpleNamespace(
        cache_config=types.SimpleNamespace(
            use_replayssm=c["use_replayssm"], replayssm_buffer_len=c["replayssm_buffer_len"],
            mamba_cache_mode=c["mamba_cache_mode"], use_kda_recoverssm=None),
        model_config=types.SimpleNamespace(architecture=c["architecture"], supports_replayssm=supported),
        num_speculative_tokens=c["num_speculative_tokens"],
        mamba_config=types.SimpleNamespace(backend=MambaBackendEnum(c["mamba_backend"]),
                                           enable_stochastic_rounding=c["stochastic_rounding"]),
        use_v2_model_runner=c["use_v2_model_runner"],
        parallel_config=types.SimpleNamespace(pipeline_parallel_size=c["pipeline_parallel_size"]),
        kv_transfer_config=KVTransferConfig(kv_connector="NixlConnector", kv_role="kv_both") if c["kv_connector"] else None,
    )


def answer(c: dict) -> dict:
    config = _stand_in(c)
    try:
        VALIDATE(config)
        error = None
    except ValueError as exc:
        error = str(exc)
    return {"error": error, "use_kda_recoverssm": config.cache_config.use_kda_recoverssm}


def main() -> int:
    if sys.argv[1:] != ["--jsonl"]:
        sys.stderr.write("usage: oracle_state_support.py --jsonl\n")
        return 2
    for line in sys.stdin:
        request = json.loads(line)
        if "combinations" in request:
            reply = {"answers": [answer(c) for c in request["combinations"]]}
        else:
            reply = {"replayssm_architectures": sorted(_SUPPORTED)}
        _REAL_STDOUT.write(json.dumps(reply) + "\n")
        _REAL_STDOUT.flush()
    return 0


with contextlib.redirect_stdout(sys.stderr):
    _SUPPORTED = frozenset(replayssm_architectures())

if __name__ == "__main__":
    sys.exit(main())
