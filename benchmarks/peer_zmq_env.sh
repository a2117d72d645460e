#!/usr/bin/env bash
# Create the peer environment for bench_node.py (default /work/peer-venv-zmq): the published
# `proxystore` and `proxystore-ex` packages (ZeroMQ connector) with pyzmq.
#
# Idempotent and safe to run concurrently (flock + stamp file). tether never imports
# anything from this environment; the benchmark runs its python as a subprocess.
#
# Usage: bash benchmarks/peer_zmq_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail

PEER_VENV="${1:-${PEER_ZMQ_VENV:-/work/peer-venv-zmq}}"
STAMP="$PEER_VENV/.tether-peer-installed"
LOCK="${PEER_VENV%/}.lock"
PACKAGES=(proxystore proxystore-ex pyzmq)

if [[ -f "$STAMP" ]]; then
    echo "$PEER_VENV/bin/python"
    exit 0
fi

mkdir -p "$(dirname "$PEER_VENV")"
exec 9>"$LOCK"
flock -w 900 9 || { echo "peer_zmq_env.sh: timed out waiting for $LOCK" >&2; exit 1; }

if [[ ! -f "$STAMP" ]]; then
    if [[ ! -x "$PEER_VENV/bin/python" ]]; then
        python3 -m venv "$PEER_VENV" >&2
    fi
    "$PEER_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${PACKAGES[@]}" >&2
    "$PEER_VENV/bin/python" -c 'import proxystore_ex.connectors.dim.zmq, zmq' >&2
    "$PEER_VENV/bin/python" -m pip freeze > "$PEER_VENV/.tether-peer-freeze.txt"
    touch "$STAMP"
fi
echo "$PEER_VENV/bin/python"
