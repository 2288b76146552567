#!/usr/bin/env bash
# The conformance step of CI (.ci/run runs it after the default suite): kvproof against vLLM 0.33.0's
# own code, on the planning and requests goldens and on a sample of generated cases whose seed comes
# from the commit under test, so that every landing tries cases no earlier one saw.
#
#   bash scripts/ci-conformance.sh
#
# 1. The vLLM 0.33.0 venv (scripts/conformance-setup.sh): KVPROOF_VLLM_VENV when set, else the
#    checkout's .venv-vllm when present, else one kept for the machine under
#    ${XDG_CACHE_HOME:-~/.cache}/kvproof/ (CI runs in a fresh clone). Built when absent, checked by
#    importing vLLM's planning modules when present, repaired or rebuilt when that fails.
# 2. The seed: the first 8 hex digits of `git rev-parse HEAD` as an integer; outside a git checkout
#    the documented fallback 20261129. It is Hypothesis' seed (--hypothesis-seed) and
#    KVPROOF_REQUESTS_SEED (the random workloads and the requests Hypothesis test).
# 3. pytest -m conformance tests/conformance, on every core (-n auto; KVPROOF_CONFORMANCE_WORKERS
#    sets the number, 0 runs in one process; the workers' comparisons merge into one summary): goldens, examples, KVPROOF_CONFORMANCE_EXAMPLES (default
#    200) planning geometries per model family, KVPROOF_REQUESTS_RANDOM (default 40) random workloads,
#    KVPROOF_REQUESTS_HYPOTHESIS (default 400) generated requests cases (tight pools that preempt
#    included). A disagreement fails the step; the summary prints it with its shrunk geometry and
#    differing keys (also in out/conformance-report.json). Also tests/test_executor.py's conformance
#    sample: the same report on the local pool and on a 2-worker Dask cluster (docs/scale.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
start=$(date +%s)
log() { printf '[ci-conformance %4ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

FALLBACK_SEED=20261129
if [[ -n "${KVPROOF_VLLM_VENV:-}" ]]; then
  venv="$KVPROOF_VLLM_VENV"
elif [[ -e "$root/.venv-vllm" || -L "$root/.venv-vllm" ]]; then
  venv="$root/.venv-vllm"
else
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/kvproof/venv-vllm-0.33.0"
  mkdir -p "$(dirname "$venv")"
fi
log "vLLM 0.33.0 environment: $venv"
KVPROOF_VLLM_VENV="$venv" bash "$root/scripts/conformance-setup.sh"
log "environment ready"

if commit="$(git -C "$root" rev-parse HEAD 2>/dev/null)"; then
  seed=$(( 16#${commit:0:8} ))
  log "commit $commit: seed $seed (the first 8 hex digits of the commit)"
else
  seed=$FALLBACK_SEED
  log "not a git checkout: no commit to derive the seed from; the documented fallback seed $seed"
fi

planning=${KVPROOF_CONFORMANCE_EXAMPLES:-200}
random_cases=${KVPROOF_REQUESTS_RANDOM:-40}
requests_cases=${KVPROOF_REQUESTS_HYPOTHESIS:-400}
log "cases: goldens and examples; $planning generated geometries per model family (8 families);" \
    "$random_cases random workloads; $requests_cases generated requests cases"

status=0
KVPROOF_ORACLE_PYTHON="$venv/bin/python" KVPROOF_CONFORMANCE_REQUIRED=1 KVPROOF_REQUESTS_SEED="$seed" \
  KVPROOF_CONFORMANCE_EXAMPLES="$planning" KVPROOF_REQUESTS_RANDOM="$random_cases" \
  KVPROOF_REQUESTS_HYPOTHESIS="$requests_cases" \
  python -m pytest -m conformance tests/conformance tests/test_executor.py -p no:cacheprovider -q \
  --hypothesis-seed="$seed" -o addopts="" -n "${KVPROOF_CONFORMANCE_WORKERS:-auto}" || status=$?
if [[ $status -eq 5 ]]; then
  log "pytest collected no conformance test: that is a failure here"
  status=1
fi
log "conformance step: exit $status (seed $seed)"
exit $status
