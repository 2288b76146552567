#!/usr/bin/env bash
# Regenerate the request goldens (NAME.expected.json) with vLLM 0.33.0 itself:
#   bash tests/conformance/requests/regenerate.sh [NAME.json ...]   (default: every geometry here)
# Needs .venv-vllm (bash scripts/conformance-setup.sh). Prints one line per golden with its status
# and the oracle's seconds for it; review the diff (git diff tests/conformance/requests) before keeping it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
python="${KVPROOF_ORACLE_PYTHON:-$root/.venv-vllm/bin/python}"
if [ "$#" -eq 0 ]; then
  set -- $(ls "$here"/*.json | grep -v '\.expected\.json$')
fi
exec "$python" "$root/tests/conformance/oracle_requests.py" --write-expected "$@"
