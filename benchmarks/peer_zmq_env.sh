#!/usr/bin/env bash
# Create the peer environment for bench_node.py (default
# benchmarks/.peer-venvs/zmq, or $PEER_ZMQ_VENV): the published
# `proxystore` and `proxystore-ex` packages (ZeroMQ connector) with pyzmq.
#
# Usage: bash benchmarks/peer_zmq_env.sh [VENV_DIR]     (prints the venv's python path)
set -euo pipefail
source "$(dirname "$0")/_peer_venv.sh"
peer_venv "${1:-${PEER_ZMQ_VENV:-$(peer_venv_default zmq)}}" .tether-peer-installed \
    'import proxystore_ex.connectors.dim.zmq, zmq' proxystore proxystore-ex pyzmq
