"""Overhead of Prometheus metrics on a node server's or an endpoint's hot path (small
put + get + evict).

Two servers run as processes, one with metrics on (port 0) and one without; one client
times round trips to each in alternating rounds (A, B, A, B ...) so the machine's load
hits both alike. Prints a table and writes JSON. ``--aa`` is the control: both servers
without metrics (the "on" side too), so its ratio shows what the harness resolves.

    .venv/bin/python benchmarks/bench_metrics_overhead.py --rounds 10 --ops 2000
    .venv/bin/python benchmarks/bench_metrics_overhead.py --server endpoint --rounds 10
    .venv/bin/python benchmarks/bench_metrics_overhead.py --server endpoint --rounds 10 --aa
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tether.connectors.node import NodeConnector
from tether.node import read_state

SECRET = 'bench-metrics-secret'


def _start(run_dir: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    name = f'bench-{uuid.uuid4().hex[:8]}'
    proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'tether.node',
            'start',
            '--name',
            name,
            '--run-dir',
            str(run_dir),
            '--bind',
            '127.0.0.1',
            '--memory',
            '256MiB',
            *args,
        ],
        env={**os.environ, 'TETHER_NODE_SECRET': SECRET},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while read_state(run_dir, name) is None:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f'node server {name} did not start')
        time.sleep(0.05)
    return proc, name


def _endpoints(home: Path, aa: bool) -> tuple[Any, Any]:
    """Two endpoints (no relay) in ``home``, metrics off and on (``aa``: off and off), and
    a connector to each."""
    from tether.connectors.endpoint import EndpointConnector
    from tether.endpoint import SiteConfig, start_endpoint

    conns = []
    on: dict[str, Any] = {} if aa else {'metrics': {'port': 0}}
    for name, metrics in (('off', {}), ('on', on)):
        SiteConfig.create(name, home, **metrics)
        start_endpoint(name, home)
        conns.append(EndpointConnector([name], home=str(home), timeout=60))
    return conns[0], conns[1]


def _round(conn: Any, ops: int, payload: bytes) -> float:
    start = time.perf_counter()
    for _ in range(ops):
        key = conn.put(payload)
        conn.get(key)
        conn.evict(key)
    return (time.perf_counter() - start) / ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--ops', type=int, default=2000)
    parser.add_argument('--size', type=int, default=1000)
    parser.add_argument('--server', choices=['node', 'endpoint'], default='node')
    parser.add_argument('--aa', action='store_true', help='control: metrics off on both sides')
    parser.add_argument('--json', default=None, help='default: benchmarks/results/...')
    args = parser.parse_args()
    if args.json is None:
        suffix = ('' if args.server == 'node' else '_endpoint') + ('_aa' if args.aa else '')
        args.json = f'benchmarks/results/metrics_overhead{suffix}.json'
    payload = os.urandom(args.size)
    times: dict[str, list[float]] = {'off': [], 'on': []}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            if args.server == 'node':
                off_proc, off = _start(run_dir)
                on_proc, on = _start(run_dir, *([] if args.aa else ['--metrics-port', '0']))
                procs = [off_proc, on_proc]
                conns = {
                    mode: NodeConnector(
                        n, address='127.0.0.1', run_dir=str(run_dir), secret=SECRET
                    )
                    for mode, n in (('off', off), ('on', on))
                }
            else:
                off_conn, on_conn = _endpoints(run_dir, args.aa)
                conns = {'off': off_conn, 'on': on_conn}
            for c in conns.values():
                _round(c, 200, payload)  # warm up
            for i in range(args.rounds):  # off, on, then on, off: neither always first
                for mode in ('off', 'on') if i % 2 == 0 else ('on', 'off'):
                    times[mode].append(_round(conns[mode], args.ops, payload))
            for c in conns.values():
                c.close()
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)
            if args.server == 'endpoint':
                from tether.endpoint import stop_endpoint

                for name in ('off', 'on'):
                    stop_endpoint(name, run_dir)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med['on'] / med['off']
    spread = {k: (min(v) / med[k], max(v) / med[k]) for k, v in times.items()}
    paired = statistics.median(a / b for a, b in zip(times['on'], times['off'], strict=True))
    control = ' (A/A control: metrics off on both sides)' if args.aa else ''
    print(
        f'{args.server}, put+get+evict of {args.size} B, {args.rounds} alternating rounds{control}'
    )
    print(f'{"metrics":8} {"median us/op":>13} {"min/median":>11} {"max/median":>11}')
    for k in ('off', 'on'):
        lo, hi = spread[k]
        print(f'{k:8} {med[k] * 1e6:13.1f} {lo:11.3f} {hi:11.3f}')
    print(f'on/off ratio of medians: {ratio:.3f}, median of paired ratios: {paired:.3f}')
    result: dict[str, Any] = {
        'args': vars(args),
        'seconds_per_op': times,
        'median': med,
        'ratio_on_off': ratio,
        'paired_ratio_on_off': paired,
        'load_average': os.getloadavg(),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == '__main__':
    main()
