"""What forwarding a small request costs an endpoint: CPU per operation, on loopback.

    .venv/bin/python benchmarks/bench_endpoint_forward.py [--ops 10000] [--size 1KB]

Starts a relay and two endpoints on this host (``fwd-a``; ``fwd-b`` reachable, so the two
peer over the direct path), puts one object at ``fwd-b``, then runs ``--ops`` ``get`` and
``set`` operations of it one after the other from a client of ``fwd-a``: first forwarded
through ``fwd-a``'s shared channels to ``fwd-b`` (``own_channels=False``), then over a
channel of the client's own (the connector's default), and as many ``get`` from a client
of ``fwd-b`` (local, for comparison), over its Unix socket (the default on the endpoint's
host) and over TCP (``unix_socket=False``, as from another host of the site).
For each phase it reports the median operation time and the CPU time each endpoint
process spent per operation (user and system, from ``/proc``). There is no link delay:
the figures are the endpoints' own costs, which the site-to-site benchmarks
(``bench_endpoints.py``, ``bench_endpoint_hops.py``) see under their round trips.

Writes ``benchmarks/results/endpoint_forward.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.endpoint.conftest import Relay, Site, write_relay_config

from _common import process_cpu_s
from tether._serve.sizes import parse_size

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / 'benchmarks' / 'results' / 'endpoint_forward.json'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _phase(op: Any, n: int, pids: dict[str, int]) -> dict[str, Any]:
    before = {name: process_cpu_s(pid) for name, pid in pids.items()}
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        op()
        times.append(time.perf_counter() - t0)
    result: dict[str, Any] = {'median_us': round(statistics.median(times) * 1e6, 1)}
    for name, pid in pids.items():
        user, system = process_cpu_s(pid)
        result[f'{name}_user_us'] = round((user - before[name][0]) / n * 1e6, 1)
        result[f'{name}_sys_us'] = round((system - before[name][1]) / n * 1e6, 1)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--ops', type=int, default=10_000, help='operations per phase')
    ap.add_argument('--size', default='1KB', help='object size')
    ap.add_argument('--out', default=str(OUT))
    args = ap.parse_args()
    size = parse_size(args.size)
    tmp = Path(tempfile.mkdtemp(prefix='tether-bench-forward-'))
    relay = Relay(write_relay_config(tmp / 'relay', '127.0.0.1', 0)).start()
    home = tmp / 'home'
    home.mkdir()
    (tmp / 'relay.pem').write_text((tmp / 'relay' / 'relay.pem').read_text())
    site = Site(home)
    try:
        port = _free_port()
        site.configure('fwd-a', relay.address)
        peering = {'port': port, 'advertise': [f'127.0.0.1:{port}']}
        site.configure('fwd-b', relay.address, peering=peering)
        site.start('fwd-a')
        site.start('fwd-b')
        conn_a, conn_b = site.connector('fwd-a', own_channels=False), site.connector('fwd-b')
        tcp_b = site.connector('fwd-b', unix_socket=False)
        own_a = site.connector('fwd-a')
        data = os.urandom(size)
        key = conn_b.put(data)
        for _ in range(200):  # peering, warm-up, first channels
            conn_a.get(key)
            own_a.get(key)
        pids = {'a': site.pid('fwd-a'), 'b': site.pid('fwd-b')}
        n = args.ops
        phases = {
            'forwarded get': _phase(lambda: conn_a.get(key), n, pids),
            'forwarded set': _phase(lambda: conn_a.set(key, data), n, pids),
            'own channel get': _phase(lambda: own_a.get(key), n, pids),
            'own channel set': _phase(lambda: own_a.set(key, data), n, pids),
            'local get': _phase(lambda: conn_b.get(key), n, pids),
            'local get over TCP': _phase(lambda: tcp_b.get(key), n, pids),
        }
        status = site.status('fwd-a')
        for conn in (conn_a, own_a, conn_b, tcp_b):
            conn.close()
    finally:
        for name in ('fwd-a', 'fwd-b'):
            try:
                site.stop(name)
            except Exception as e:  # report, and stop the other one
                print(f'stopping {name}: {e}', file=sys.stderr)
        relay.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f'{n} operations of {size} bytes per phase; CPU µs per operation\n')
    print('| phase | median µs | fwd-a user | fwd-a sys | fwd-b user | fwd-b sys |')
    print('|---|---|---|---|---|---|')
    for name, r in phases.items():
        print(
            f'| {name} | {r["median_us"]} | {r["a_user_us"]} | {r["a_sys_us"]} '
            f'| {r["b_user_us"]} | {r["b_sys_us"]} |'
        )
    print(
        f'\nfwd-a forwarded {status["forwarded"]}, passed through {status.get("passed")}, '
        f'own channels {status.get("own_channels")}'
    )
    out = {
        'command': ' '.join(['benchmarks/bench_endpoint_forward.py', *sys.argv[1:]]),
        'started': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'load': os.getloadavg(),
        'ops': n,
        'size': size,
        'phases': phases,
        'forwarded': status['forwarded'],
        'passed': status.get('passed'),
        'own_channels': status.get('own_channels'),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + '\n')
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
