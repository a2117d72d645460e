#!/usr/bin/env bash
# Run every benchmark (tether beside the peers where the issue names one): `make bench`.
# Usage: bash benchmarks/run_all.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
bash benchmarks/peer_env.sh >/dev/null
# First-touch of guest memory is slow on this VM: touch a few GiB once (WARM_GIB=0 skips).
"$PY" benchmarks/warm_memory.py "${WARM_GIB:-3}"
for bench in bench_serialize bench_proxy_overhead bench_roundtrip bench_throughput \
    bench_redis_batch bench_redis_bound bench_redis_cluster \
    bench_node bench_pipelining bench_dask bench_memory bench_stream bench_agents; do
    echo "== $bench $*"
    "$PY" "benchmarks/$bench.py" "$@"
done
