"""Peer side of bench_node.py: proxystore-ex's ZeroMQConnector, run in the peer venv.

Never imported by tether: bench_node.py runs it with the peer environment's python
(see peer_zmq_env.sh). Reads a JSON request on argv, prints a JSON result.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def main() -> None:
    req = json.loads(sys.argv[1])
    from proxystore_ex.connectors.dim.zmq import ZeroMQConnector

    connector = ZeroMQConnector(port=free_port(), address='127.0.0.1', timeout=5)
    results = {}
    try:
        for size, repeats in req['sizes']:
            data = os.urandom(size)
            for _ in range(1 if size >= 10_000_000 else 20):  # warm-up
                key = connector.put(data)
                connector.get(key)
                connector.evict(key)
            puts, gets = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                key = connector.put(data)
                t1 = time.perf_counter()
                got = connector.get(key)
                t2 = time.perf_counter()
                assert got is not None
                assert len(got) == size
                connector.evict(key)
                puts.append(t1 - t0)
                gets.append(t2 - t1)
            results[str(size)] = {
                'put': statistics.median(puts),
                'get': statistics.median(gets),
                'roundtrip': statistics.median(p + g for p, g in zip(puts, gets, strict=True)),
                'repeats': repeats,
            }
    finally:
        connector.close()
    print(json.dumps(results))


if __name__ == '__main__':
    main()
