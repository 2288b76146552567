#!/usr/bin/env bash
# Create .venv-vllm/ at the repository root (or the venv KVPROOF_VLLM_VENV names): the interpreter
# of the conformance oracle (tests/conformance/oracle.py), which runs vLLM 0.33.0's own KV-cache
# planning code. The tests find it there, or through KVPROOF_ORACLE_PYTHON=<venv>/bin/python.
#
#   bash scripts/conformance-setup.sh && python -m pytest -m conformance tests/conformance
#
# What goes in:
#   * torch==2.13.0 (the CPU build; on this machine pip takes it from local disk),
#   * vllm==0.33.0 with --no-deps (vLLM itself asks for torch==2.14.0 and ~90 packages, CUDA kernels
#     among them; the planning code needs none of that),
#   * only the packages that `import`ing the planning modules and the oracle needs, found by trial
#     (see docs/conformance.md), with the version ranges vLLM 0.33.0's own metadata asks for.
# xgrammar is installed with --no-deps: its triton dependency (1 GB) is never imported on the CPU.
#
# Idempotent: each step is skipped when what it installs is already there; a stamp file records a
# finished set-up, and a later run with the same requirements only re-checks the imports (a venv is
# never trusted because its folder exists). A venv whose interpreter or pip does not run is removed
# and built anew; one that still fails the import check after the installs is rebuilt once from
# scratch.
# Environment: KVPROOF_VLLM_VENV (the venv to create or check; default <repo>/.venv-vllm), PYTHON
# (default python3), VLLM_WHEEL (a local vllm-0.33.0 wheel to use instead of the
# registry; default: the copy under /work/vllm033 when present).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KVPROOF_VLLM_VENV:-$root/.venv-vllm}"
py="${PYTHON:-python3}"
start=$(date +%s)
log() { printf '[conformance-setup %4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

# Requirements of the planning import closure (module -> distribution, range from vLLM's METADATA).
read -r -d '' REQUIREMENTS <<'REQ' || true
packaging
numpy
regex
pydantic>=2.12.0
cbor2
psutil
pyzmq>=25.0.0
requests>=2.33.0
aiohttp>=3.14.4
transformers>=5.16.1,<5.21.0
oss-harmony>=0.0.11
openai>=2.25.0
pillow>=13.0.0
pybase64
cachetools
msgspec
cloudpickle
uvloop
py-cpuinfo
prometheus_client>=0.18.0
fastapi>=0.133.0,<0.137.0
partial-json-parser
llguidance>=1.7.0,<1.8.0
einops
apache-tvm-ffi==0.1.11
REQ
XGRAMMAR="xgrammar==0.2.8"
TORCH="torch==2.13.0"
VLLM_VERSION="0.33.0"
stamp="$venv/.kvproof-conformance-setup"
want_stamp="$(printf '%s\n%s\n%s\nvllm==%s\n' "$REQUIREMENTS" "$XGRAMMAR" "$TORCH" "$VLLM_VERSION" | sha256sum | cut -c1-16)"

check_imports() {
  "$venv/bin/python" - <<'PY'
import os, sys, contextlib
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
import importlib
for mod in ("vllm.v1.kv_cache_interface", "vllm.v1.core.kv_cache_utils",
            "vllm.v1.core.kv_cache_planning", "vllm.config", "vllm.platforms.interface",
            "vllm.v1.core.kv_cache_manager", "vllm.v1.worker.utils",
            "vllm.model_executor.layers.mamba.abstract", "vllm.model_executor.models.config"):
    importlib.import_module(mod)
import torch, vllm
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert vllm.__version__ == "0.33.0", vllm.__version__
print(f"imports ok: torch {torch.__version__}, vllm {vllm.__version__}")
PY
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]] && check_imports 2>/dev/null; then
  log "already set up ($venv); nothing to do"
  exit 0
fi

if [[ -e "$venv" || -L "$venv" ]] && ! "$venv/bin/python" -c 'import pip' >/dev/null 2>&1; then
  log "$venv is not a working venv (its python or pip does not run): removing it"
  rm -rf -- "$venv"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  log "creating $venv"
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

pip_install() {  # pip install "$@"; on failure print everything, else only what is not known noise
  local out
  out="$(mktemp)"
  if ! "${pip[@]}" install -q "$@" >"$out" 2>&1; then
    cat "$out"; rm -f "$out"; exit 1
  fi
  # Noise: the machine's pip.conf names local index folders that do not exist, and pip's resolver
  # notes that vllm's own (deliberately not installed) requirements are missing.
  grep -v -E "^(WARNING: Location '|ERROR: pip's dependency resolver|vllm 0\.33\.0 requires)" "$out" || true
  rm -f "$out"
}

installed() {  # installed <dist> <version-prefix>: true when that version is present
  "$venv/bin/python" - "$1" "$2" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    sys.exit(0 if version(sys.argv[1]).startswith(sys.argv[2]) else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
}

if installed torch 2.13.0; then
  log "torch 2.13.0 present"
else
  log "installing $TORCH (CPU build)"
  pip_install "$TORCH"
fi

if installed vllm "$VLLM_VERSION"; then
  log "vllm $VLLM_VERSION present"
else
  wheel="${VLLM_WHEEL:-}"
  if [[ -z "$wheel" ]]; then
    wheel="$(ls /work/vllm033/vllm-${VLLM_VERSION}-*.whl 2>/dev/null | head -n 1 || true)"
  fi
  if [[ -n "$wheel" && -f "$wheel" ]]; then
    log "installing vllm $VLLM_VERSION --no-deps from $wheel"
    pip_install --no-deps "$wheel"
  else
    log "installing vllm==$VLLM_VERSION --no-deps from the registry"
    pip_install --no-deps "vllm==$VLLM_VERSION"
  fi
fi

log "installing the planning modules' imports"
# shellcheck disable=SC2086
pip_install $REQUIREMENTS
if installed xgrammar 0.2.8; then
  log "xgrammar 0.2.8 present"
else
  pip_install --no-deps "$XGRAMMAR"
fi

log "checking imports"
if ! check_imports; then
  if [[ -n "${KVPROOF_SETUP_REBUILT:-}" ]]; then
    log "the imports still fail in a venv built from scratch"
    exit 1
  fi
  log "the imports fail: rebuilding $venv from scratch"
  rm -rf -- "$venv"
  KVPROOF_SETUP_REBUILT=1 exec bash "${BASH_SOURCE[0]}"
fi
echo "$want_stamp" > "$stamp"
log "done"
