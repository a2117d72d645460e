"""CPU instructions an endpoint's metrics add to a put + get + evict, counted by callgrind.

Wall-clock A/B runs on a loaded machine vary more than the 3% the metrics must stay
under; instruction counts do not. For metrics off, then on, an endpoint runs under
callgrind (collection on only while measured) and a client, itself under callgrind,
does ``--ops`` rounds of a 1000-byte put + get + evict. The endpoint's count is net of
its idle work (its metrics thread wakes twice a second), measured over ``--idle``
seconds first. Prints instructions per operation and writes JSON.

    .venv/bin/python benchmarks/bench_metrics_overhead_callgrind.py --ops 1000

Under callgrind every request takes longer than the first latency bucket's bound
(100 µs), so each one also pays for a bucket search it skips at full speed: the count
for metrics on is a little high.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_VG = ['valgrind', '--tool=callgrind', '--instr-atstart=no']
_RESULT = 'metrics_overhead_endpoint_callgrind.json'


def _endpoint(name: str, home: Path) -> list[str]:
    return [sys.executable, '-m', 'tether.endpoint', name, str(home)]


def _client(home: Path, name: str, ops: int) -> list[str]:
    return [sys.executable, __file__, '--client', str(home), name, str(ops)]


def _ctl(pid: int, *args: str) -> None:
    subprocess.run(['callgrind_control', *args, str(pid)], check=True, capture_output=True)


def _total(path: str) -> int:
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith('summary:'))


def client(home: str, name: str, ops: int) -> None:
    """The client's side (run under callgrind): wait for a go on stdin, then measure."""
    from tether.connectors.endpoint import EndpointConnector

    conn = EndpointConnector([name], home=home, timeout=600)
    data = os.urandom(1000)
    for _ in range(100):
        conn.evict(conn.put(data))
    print('ready', flush=True)
    sys.stdin.readline()
    _ctl(os.getpid(), '-i', 'on')
    _ctl(os.getpid(), '-z')
    for _ in range(ops):
        key = conn.put(data)
        conn.get(key)
        conn.evict(key)
    _ctl(os.getpid(), '-d')
    _ctl(os.getpid(), '-i', 'off')
    conn.close()
    print('done', flush=True)


def measure(mode: str, ops: int, idle_seconds: float, out: Path) -> dict[str, float]:
    from tether.endpoint import SiteConfig

    home = Path(tempfile.mkdtemp(prefix='tether-cg-metrics-'))
    name = f'cg-{mode}'
    settings: dict[str, Any] = {'metrics': {'port': 0}} if mode == 'on' else {}
    SiteConfig.create(name, home, **settings)
    server_out = str(out / f'{mode}.server')
    with open(out / f'{mode}.server.log', 'w') as log:
        server = subprocess.Popen(
            [*_VG, f'--callgrind-out-file={server_out}', *_endpoint(name, home)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    state = home / 'endpoints' / name / 'state.json'
    deadline = time.monotonic() + 600
    while not (state.exists() and state.stat().st_size):
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit(f'endpoint {name} did not start (see {out})')
        time.sleep(0.5)
    client_out = str(out / f'{mode}.client')
    with open(out / f'{mode}.client.log', 'w') as log:
        cli = subprocess.Popen(
            [*_VG, f'--callgrind-out-file={client_out}', *_client(home, name, ops)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    try:
        assert cli.stdin is not None
        assert cli.stdout is not None
        if cli.stdout.readline().strip() != 'ready':
            raise SystemExit(f'the client did not start (see {out})')
        _ctl(server.pid, '-i', 'on')
        _ctl(server.pid, '-z')
        t0 = time.monotonic()
        time.sleep(idle_seconds)
        _ctl(server.pid, '-d')
        idle = time.monotonic() - t0
        t0 = time.monotonic()
        cli.stdin.write('go\n')
        cli.stdin.flush()
        if cli.stdout.readline().strip() != 'done':
            raise SystemExit(f'the client failed (see {out})')
        _ctl(server.pid, '-d')
        busy = time.monotonic() - t0
        _ctl(server.pid, '-i', 'off')
        cli.wait(600)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(600)
    rate = _total(server_out + '.1') / idle
    gross = _total(server_out + '.2')
    return {
        'server': (gross - rate * busy) / ops,
        'server_gross': gross / ops,
        'server_idle_per_second': rate,
        'client': _total(client_out + '.1') / ops,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == '--client':
        client(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--ops', type=int, default=1000)
    parser.add_argument('--idle', type=float, default=10.0, help='seconds of idle counting')
    parser.add_argument(
        '--json', default='benchmarks/results/metrics_overhead_endpoint_callgrind.json'
    )
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix='tether-cg-out-'))
    got = {mode: measure(mode, args.ops, args.idle, out) for mode in ('off', 'on')}
    off, on = got['off'], got['on']
    added = on['server'] - off['server']
    trip = off['server'] + off['client']
    print(f'instructions per 1000-byte put + get + evict ({args.ops} rounds)')
    print(f'{"metrics":8} {"endpoint":>10} {"client":>10}')
    for mode in ('off', 'on'):
        print(f'{mode:8} {got[mode]["server"]:10.0f} {got[mode]["client"]:10.0f}')
    print(
        f'metrics add {added:.0f} to the endpoint ({added / off["server"]:.1%} of its work, '
        f"{added / trip:.1%} of both sides')",
    )
    result: dict[str, Any] = {
        'args': vars(args),
        'instructions_per_op': got,
        'added_per_op': added,
        'added_of_endpoint': added / off['server'],
        'added_of_both_sides': added / trip,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == '__main__':
    main()
