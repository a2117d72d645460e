#!/usr/bin/env bash
# Create the academy-py peer virtual environment (default /work/peer-venvs/academy) with
# the published `academy-py` 1.0 package and redis, for benchmarks/bench_agents*.py.
#
# Idempotent and safe to run concurrently: an flock serialises installers, and a stamp
# file records a finished install. tether never imports anything from this environment;
# the benchmarks only run its python as a subprocess.
#
# Usage: bash benchmarks/peer_academy_env.sh [VENV_DIR]   (prints the venv's python path)
set -euo pipefail

PEER_VENV="${1:-${ACADEMY_VENV:-/work/peer-venvs/academy}}"
STAMP="$PEER_VENV/.tether-peer-installed"
LOCK="${PEER_VENV%/}.lock"
PACKAGES=('academy-py==1.0.0' redis psutil)

if [[ -f "$STAMP" ]]; then
    echo "$PEER_VENV/bin/python"
    exit 0
fi

mkdir -p "$(dirname "$PEER_VENV")"
exec 9>"$LOCK"
flock -w 900 9 || { echo "peer_academy_env.sh: timed out waiting for $LOCK" >&2; exit 1; }

if [[ ! -f "$STAMP" ]]; then
    if [[ ! -x "$PEER_VENV/bin/python" ]]; then
        python3 -m venv "$PEER_VENV" >&2
    fi
    "$PEER_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${PACKAGES[@]}" >&2
    "$PEER_VENV/bin/python" -c 'import academy, redis, psutil' >&2
    "$PEER_VENV/bin/python" -m pip freeze > "$PEER_VENV/.tether-peer-freeze.txt"
    touch "$STAMP"
fi
echo "$PEER_VENV/bin/python"
