#!/usr/bin/env bash
# Create the peer virtual environment (default /work/peer-venv) with the published
# `proxystore` package (and its redis extra), numpy, pandas and redis.
#
# Usage: bash benchmarks/peer_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail
source "$(dirname "$0")/_peer_venv.sh"
peer_venv "${1:-${PEER_VENV:-/work/peer-venv}}" .tether-peer-installed \
    'import proxystore, numpy, pandas, redis' 'proxystore[redis]' numpy pandas redis
