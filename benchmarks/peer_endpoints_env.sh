#!/usr/bin/env bash
# Build the peer environment for the endpoint benchmark: the published ProxyStore 1.1.0
# with its endpoints extra (aiortc, quart, uvicorn, websockets) and redis-py, in
# benchmarks/.peer-venvs/endpoints (or $1, or $PEER_ENDPOINTS_VENV). Idempotent; an flock
# serialises concurrent runs.
# Also installs the Debian packages the benchmark runs in its namespaces (coturn for the
# peer's STUN server, openssh-server for the Redis-over-SSH baseline, redis-server).
#
# Usage: bash benchmarks/peer_endpoints_env.sh [VENV_DIR]   (prints the venv's python)
set -euo pipefail

source "$(dirname "$0")/_peer_venv.sh"
VENV="${1:-${PEER_ENDPOINTS_VENV:-$(peer_venv_default endpoints)}}"
if [[ "${PEER_VENV_PRINT_ONLY:-0}" == 1 ]]; then
    peer_venv "$VENV" .tether-peer-installed ''
    exit 0
fi

need() {  # binary package
    command -v "$1" >/dev/null 2>&1 && return 0
    [[ -f /var/lib/apt/periodic/tether-updated ]] || { apt-get update -qq >&2; mkdir -p /var/lib/apt/periodic; touch /var/lib/apt/periodic/tether-updated; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >&2
}
need turnserver coturn
need sshd openssh-server
need /usr/sbin/sshd openssh-server
need redis-server redis-server
need iptables-legacy iptables
need gcc gcc
[[ -f /usr/include/libnetfilter_queue/libnetfilter_queue.h ]] || \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnetfilter-queue-dev >&2

peer_venv "$VENV" .tether-peer-installed 'import proxystore.endpoint, aiortc, redis' \
    'proxystore[endpoints]==1.1.0' redis
