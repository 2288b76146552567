#!/usr/bin/env bash
# CI: build a wheel, install it in a fresh venv, run `prove --all` and `claim --all` from an empty
# folder, and compare their verdicts with what the checkout declares: each rule's and each shipped
# claim's `expect` (#13 item 1: an installed kvproof must find its shape templates as package data,
# not beside a source tree). This is stricter than proving the checkout too and comparing the two
# (which this step did before #20, at twice the time): the wheel runs the checkout's code, and a
# verdict other than the declared one fails here whether or not the checkout would share it.
#
#   scripts/ci-wheel-check.sh            # exit 0: the verdicts are as declared; 1: they differ; 2: setup failed
#
# Dependencies of the venv come from pip's configured index and cache. KVPROOF_WHEEL_KEEP=1 keeps
# the work folder. Prints each step's wall time and the verdicts it compares.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kvproof-wheel.XXXXXX")"
[ "${KVPROOF_WHEEL_KEEP:-}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
unset KVPROOF_EXAMPLES

step() { printf '== %s\n' "$*"; }
timed() {  # timed LABEL CMD...: run, print the wall time, keep the exit code
    local label="$1"; shift
    local start end code
    start=$(date +%s%N); "$@"; code=$?; end=$(date +%s%N)
    local tenths=$(( (end - start) / 100000000 ))
    printf '   %s: %d.%d s (exit %d)\n' "$label" $((tenths / 10)) $((tenths % 10)) "$code" >&2  # stdout may be a report
    return $code
}

step "build the wheel from $ROOT"
timed "pip wheel" "$PYTHON" -m pip wheel --no-deps --quiet -w "$WORK/dist" "$ROOT" || exit 2
WHEEL="$(ls "$WORK"/dist/kvproof-*.whl)"
COUNT="$("$PYTHON" -c 'import sys, zipfile; print(sum(n.startswith("kvproof/examples/") and n.endswith(".json") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$WHEEL")"
echo "   $(basename "$WHEEL"): $COUNT example documents as package data"
[ "$COUNT" -gt 0 ] || { echo "the wheel holds no example documents"; exit 1; }

step "install it in a fresh venv"
timed "venv" "$PYTHON" -m venv "$WORK/venv" || exit 2
pip_install() {  # pip's warnings about the configured index go to a log, shown if it fails
    "$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "$WHEEL" 2> "$WORK/pip.log" \
        || { cat "$WORK/pip.log"; return 1; }
}
timed "pip install" pip_install || exit 2

mkdir "$WORK/empty"
run_wheel() { (cd "$WORK/empty" && env -u PYTHONPATH "$WORK/venv/bin/kvproof" "$@"); }
INSTALLED="$(cd "$WORK/empty" && env -u PYTHONPATH "$WORK/venv/bin/python" -c 'import kvproof; print(kvproof.__file__)')"
echo "   the wheel's kvproof: $INSTALLED"
case "$INSTALLED" in "$WORK/venv/"*) ;; *) echo "   not the venv's copy"; exit 2 ;; esac

verdicts() {  # verdicts KEY FILE: "ID verdict" lines of a JSON report
    "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
key, path = sys.argv[1], sys.argv[2]
try:
    report = json.load(open(path))
except ValueError as exc:
    print(f"(no JSON report: {exc})")
    sys.exit(0)
entries = report["rules"] if key == "rule" else report["claims"]
for entry in entries:
    print(entry[key], entry["verdict"])
PY
}

declared() {  # declared KEY: "ID expect" lines of the checkout's rules (registry order) or shipped claims
    (cd "$ROOT" && PYTHONPATH="$ROOT" "$PYTHON" - "$1" <<'PY'
import sys
if sys.argv[1] == "rule":
    from kvproof.rules.registry import all_rules
    entries = all_rules()
else:
    from kvproof.solver.claims import shipped_claims
    entries = shipped_claims()
for entry in entries:
    print(entry.id, entry.expect)
PY
    )
}

status=0
for command in prove claim; do
    key=$([ "$command" = prove ] && echo rule || echo claim)
    step "kvproof $command --all: the wheel (from an empty folder) against the checkout's declarations"
    jobs=$([ "$command" = prove ] && echo "--jobs ${KVPROOF_JOBS:-2}")  # claim runs in one process
    # shellcheck disable=SC2086
    timed "wheel" run_wheel "$command" --all $jobs --format json > "$WORK/wheel-$command.json"
    verdicts "$key" "$WORK/wheel-$command.json" > "$WORK/wheel-$command.txt"
    declared "$key" > "$WORK/declared-$command.txt" || { echo "   the checkout's declarations did not load"; exit 2; }
    echo "   $(wc -l < "$WORK/declared-$command.txt") verdicts compared:" \
         "$(awk '{print $2}' "$WORK/declared-$command.txt" | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')"
    if diff -u "$WORK/declared-$command.txt" "$WORK/wheel-$command.txt" > "$WORK/$command.diff" \
            && [ -s "$WORK/declared-$command.txt" ]; then
        echo "   as declared"
    else
        echo "   DIFFERENT (declared -> wheel):"; cat "$WORK/$command.diff"; status=1
    fi
done
exit $status
