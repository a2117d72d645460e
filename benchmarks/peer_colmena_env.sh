#!/usr/bin/env bash
# Create the Colmena peer virtual environment (default /work/peer-colmena-venv) with the
# published colmena 0.7.2 and redis-py below 6 (8.x's default socket timeout kills its
# task server). tether never imports anything from this environment.
# Idempotent and safe to run concurrently: an flock serialises installers, and a stamp
# file records a finished install. tether never imports anything from this environment;
# benchmarks only run its python as a subprocess.
#
# Usage: bash benchmarks/peer_colmena_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail

PEER_VENV="${1:-${PEER_COLMENA_VENV:-/work/peer-colmena-venv}}"
STAMP="$PEER_VENV/.tether-colmena-installed"
LOCK="${PEER_VENV%/}.lock"
PACKAGES=('colmena==0.7.2' 'redis<6' numpy)

if [[ -f "$STAMP" ]]; then
    echo "$PEER_VENV/bin/python"
    exit 0
fi

mkdir -p "$(dirname "$PEER_VENV")"
exec 9>"$LOCK"
flock -w 900 9 || { echo "peer_colmena_env.sh: timed out waiting for $LOCK" >&2; exit 1; }

if [[ ! -f "$STAMP" ]]; then
    if [[ ! -x "$PEER_VENV/bin/python" ]]; then
        python3 -m venv "$PEER_VENV" >&2
    fi
    "$PEER_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --upgrade pip >&2 || true
    "$PEER_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${PACKAGES[@]}" >&2
    "$PEER_VENV/bin/python" -c 'import colmena, parsl, proxystore, redis' >&2
    "$PEER_VENV/bin/python" -m pip freeze > "$PEER_VENV/.tether-colmena-freeze.txt"
    touch "$STAMP"
fi
echo "$PEER_VENV/bin/python"
