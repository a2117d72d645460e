#!/usr/bin/env bash
# Create the Colmena peer virtual environment (default
# benchmarks/.peer-venvs/colmena, or $PEER_COLMENA_VENV) with the
# published colmena 0.7.2 and redis-py below 6 (8.x's default socket timeout kills its
# task server).
#
# Usage: bash benchmarks/peer_colmena_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail
source "$(dirname "$0")/_peer_venv.sh"
peer_venv "${1:-${PEER_COLMENA_VENV:-$(peer_venv_default colmena)}}" .tether-colmena-installed \
    'import colmena, parsl, proxystore, redis' 'colmena==0.7.2' 'redis<6' numpy
