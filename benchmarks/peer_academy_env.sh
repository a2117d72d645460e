#!/usr/bin/env bash
# Create the academy-py peer virtual environment (default
# benchmarks/.peer-venvs/academy, or $ACADEMY_VENV) with
# the published `academy-py` 1.0 package and redis, for benchmarks/bench_agents*.py.
#
# Usage: bash benchmarks/peer_academy_env.sh [VENV_DIR]   (prints the venv's python path)
set -euo pipefail
source "$(dirname "$0")/_peer_venv.sh"
peer_venv "${1:-${ACADEMY_VENV:-$(peer_venv_default academy)}}" .tether-peer-installed \
    'import academy, redis, psutil' 'academy-py==1.0.0' redis psutil
