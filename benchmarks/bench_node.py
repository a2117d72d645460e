"""Node connector benchmark: round trips beside Redis, shared memory and the peer's ZeroMQ.

Measures, in one invocation on this host (loopback):

* put, get and round trip (put + get) medians for 1 KB to 100 MB through
  ``NodeConnector``, ``RedisConnector`` (the local Redis), ``SharedMemoryConnector`` and,
  when its environment can be built, proxystore-ex's ``ZeroMQConnector`` (run with the
  peer venv's python, never imported here);
* 100 MB get throughput, beside the floor of a raw TCP socket that receives into a
  fresh buffer (what any get that returns new memory pays);
* aggregate throughput of 1, 2, 4 and 8 client processes getting 1 MB objects.

Usage::

    .venv/bin/python benchmarks/bench_node.py [--quick] [--no-peer]

Prints tables and writes ``benchmarks/results/bench_node.json``. The machine is shared and
noisy: every figure is a median over repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / 'results' / 'bench_node.json'
KB, MB = 1000, 1000 * 1000
SIZES = [1 * KB, 10 * KB, 100 * KB, 1 * MB, 10 * MB, 100 * MB]
SECRET = uuid.uuid4().hex


def repeats_for(size: int, quick: bool) -> int:
    if size >= 100 * MB:
        return 3 if quick else 9
    if size >= 10 * MB:
        return 5 if quick else 25
    return 50 if quick else 300


def measure(connector: Any, sizes: list[int], quick: bool) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for size in sizes:
        data = os.urandom(size)
        for _ in range(1 if size >= 10 * MB else 20):  # warm-up (connections, caches)
            key = connector.put(data)
            connector.get(key)
            connector.evict(key)
        puts, gets = [], []
        for _ in range(repeats_for(size, quick)):
            t0 = time.perf_counter()
            key = connector.put(data)
            t1 = time.perf_counter()
            got = connector.get(key)
            t2 = time.perf_counter()
            assert got is not None
            assert memoryview(got).nbytes == size
            del got
            connector.evict(key)
            puts.append(t1 - t0)
            gets.append(t2 - t1)
        out[str(size)] = {
            'put': statistics.median(puts),
            'get': statistics.median(gets),
            'roundtrip': statistics.median(p + g for p, g in zip(puts, gets, strict=True)),
            'repeats': len(puts),
        }
    return out


def node_connector(run_dir: str, name: str) -> Any:
    from tether.connectors.node import NodeConnector

    return NodeConnector(
        name,
        address='127.0.0.1',
        run_dir=run_dir,
        secret=SECRET,
        memory='4GB',
        idle_timeout=600,
    )


def peer_zmq(sizes: list[int], quick: bool) -> dict[str, Any]:
    try:
        out = subprocess.run(
            ['bash', str(HERE / 'peer_zmq_env.sh')],
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        python = out.stdout.strip().splitlines()[-1]
        req = {'sizes': [[s, repeats_for(s, quick)] for s in sizes]}
        run = subprocess.run(
            [python, str(HERE / 'node_peer_zmq.py'), json.dumps(req)],
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
        result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
        return result
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        stderr = getattr(e, 'stderr', '') or ''
        return {'error': f'{e!r} {stderr[-500:]}'}


_TCP_SERVER = textwrap.dedent(
    """
    import socket, sys
    data = bytes(int(sys.argv[1]))
    srv = socket.create_server(('127.0.0.1', 0))
    print(srv.getsockname()[1], flush=True)
    conn, _ = srv.accept()
    while conn.recv(1):
        conn.sendall(data)
    """,
)


def tcp_floor(size: int, repeats: int) -> float:
    """GB/s of a raw socket receiving ``size`` bytes into a fresh bytearray."""
    proc = subprocess.Popen(
        [sys.executable, '-c', _TCP_SERVER, str(size)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    times = []
    with socket.create_connection(('127.0.0.1', port)) as sock:
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            sock.sendall(b'x')
            buf = bytearray(size)
            view = memoryview(buf)
            while view.nbytes:
                view = view[sock.recv_into(view) :]
            times.append(time.perf_counter() - t0)
            view.release()
            del buf
    proc.wait(10)
    return size / statistics.median(times[1:]) / 1e9


_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from tether.connectors.node import NodeConnector, NodeKey
    req = json.loads(sys.argv[1])
    c = NodeConnector(req['name'], address='127.0.0.1', run_dir=req['run_dir'],
                      secret=req['secret'])
    keys = [NodeKey(*k) for k in req['keys']]
    c.get(keys[0])  # connect before the start line
    while time.time() < req['start']:
        time.sleep(0.001)
    t0 = time.time()
    n = 0
    for i in range(req['gets']):
        n += len(c.get(keys[i % len(keys)]))
    print(json.dumps({'start': t0, 'end': time.time(), 'bytes': n}))
    """,
)


def concurrency(run_dir: str, name: str, quick: bool) -> dict[str, float]:
    c = node_connector(run_dir, name)
    keys = [list(c.put(os.urandom(MB))) for _ in range(16)]
    gets = 100 if quick else 400
    out: dict[str, float] = {}
    for n in (1, 2, 4, 8):
        samples = []
        for _ in range(1 if quick else 3):
            req = {
                'name': name,
                'run_dir': run_dir,
                'secret': SECRET,
                'keys': keys,
                'gets': gets,
                'start': time.time() + 1.0 + 0.15 * n,
            }
            procs = [
                subprocess.Popen(
                    [sys.executable, '-c', _WORKER, json.dumps(req)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(n)
            ]
            results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
            wall = max(r['end'] for r in results) - min(r['start'] for r in results)
            samples.append(sum(r['bytes'] for r in results) / wall / 1e9)
        out[str(n)] = statistics.median(samples)
    c.close()
    return out


def human(size: int) -> str:
    return f'{size // MB} MB' if size >= MB else f'{size // KB} KB'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer repeats')
    parser.add_argument('--no-peer', action='store_true', help='skip proxystore-ex ZeroMQ')
    parser.add_argument('--output', type=Path, default=RESULTS)
    args = parser.parse_args()

    sys.path.insert(0, str(HERE.parent / 'src'))
    from tether.connectors.node import NodeConnector

    run_dir = tempfile.mkdtemp(prefix='bench-node-')
    name = f'bench-{uuid.uuid4().hex[:8]}'
    results: dict[str, Any] = {'sizes': SIZES, 'quick': args.quick, 'connectors': {}}
    node = node_connector(run_dir, name)
    try:
        results['connectors']['node'] = measure(node, SIZES, args.quick)

        from tether.connectors.shared_memory import SharedMemoryConnector

        shm = SharedMemoryConnector(namespace=f'bench{uuid.uuid4().hex[:8]}')
        try:
            results['connectors']['shared_memory'] = measure(shm, SIZES, args.quick)
        finally:
            shm.close(clear=True)

        try:
            from tether.connectors.redis import RedisConnector

            redis = RedisConnector('127.0.0.1', 6379, prefix=f'bench-{uuid.uuid4().hex}:')
            try:
                results['connectors']['redis'] = measure(redis, SIZES, args.quick)
            finally:
                redis.close(clear=True)
        except Exception as e:
            results['connectors']['redis'] = {'error': repr(e)}

        if not args.no_peer:
            results['connectors']['peer_zmq'] = peer_zmq(SIZES, args.quick)

        results['tcp_floor_100MB_gbps'] = tcp_floor(100 * MB, 3 if args.quick else 9)
        results['concurrency_1MB_gbps'] = concurrency(run_dir, name, args.quick)
    finally:
        node.close()
        NodeConnector(name, run_dir=run_dir, secret=SECRET).stop_server()

    report(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + '\n')
    print(f'\nwrote {args.output}')


def report(results: dict[str, Any]) -> None:
    conns = results['connectors']
    names = [n for n in ('node', 'shared_memory', 'redis', 'peer_zmq') if n in conns]
    print('Round trip (put + get), median ms')
    print(f'{"size":>8} ' + ' '.join(f'{n:>14}' for n in names) + f' {"peer/node":>10}')
    for size in results['sizes']:
        row = [f'{human(size):>8}']
        for n in names:
            r = conns[n].get(str(size)) if 'error' not in conns[n] else None
            row.append(f'{r["roundtrip"] * 1e3:>14.3f}' if r else f'{"-":>14}')
        peer = conns.get('peer_zmq', {}).get(str(size))
        ratio = peer['roundtrip'] / conns['node'][str(size)]['roundtrip'] if peer else None
        row.append(f'{ratio:>9.1f}x' if ratio else f'{"-":>10}')
        print(' '.join(row))
    for n in names:
        if 'error' in conns[n]:
            print(f'{n}: did not run: {conns[n]["error"]}')
    big = conns['node'][str(100 * MB)]
    print(
        f'\n100 MB through node: put {100 * MB / big["put"] / 1e9:.2f} GB/s, '
        f'get {100 * MB / big["get"] / 1e9:.2f} GB/s '
        f'(raw TCP into a fresh buffer: {results["tcp_floor_100MB_gbps"]:.2f} GB/s)',
    )
    print('\nConcurrent clients getting 1 MB objects (aggregate GB/s)')
    for n, gbps in results['concurrency_1MB_gbps'].items():
        print(f'{n:>3} processes: {gbps:.2f}')


if __name__ == '__main__':
    main()
