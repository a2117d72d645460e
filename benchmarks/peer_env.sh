#!/usr/bin/env bash
# Create the peer virtual environment (default benchmarks/.peer-venvs/proxystore,
# or $PEER_VENV) with the published
# `proxystore` package (and its redis extra), numpy, pandas and redis.
#
# Usage: bash benchmarks/peer_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail
source "$(dirname "$0")/_peer_venv.sh"
peer_venv "${1:-${PEER_VENV:-$(peer_venv_default proxystore)}}" .tether-peer-installed \
    'import proxystore, numpy, pandas, redis' 'proxystore[redis]' numpy pandas redis
