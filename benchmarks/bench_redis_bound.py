"""Small Redis round trips, one at a time: tether against ProxyStore and the floor.

For values of 1 KB, 10 KB and 100 KB, sequential ``put`` (a new key each time) and
``get`` (one key, again and again) against one private ``redis-server``, timed per
operation on each side:

* ``raw socket``: a pre-encoded ``GET``/``SET`` written to a plain socket and the reply
  read to its last byte into a preallocated buffer: no client library at all (the floor
  of one Python process: the server + loopback + two system calls);
* ``redis-benchmark``: Redis's own C client, one connection, no pipelining
  (``-c 1 -P 1``): 1 / its requests per second (its ``SET`` overwrites one key);
* ``redis-py``: ``client.get``/``client.set`` in tether's environment (hiredis parser);
* ``ProxyStore connector`` and ``ProxyStore store``: the published ProxyStore's
  ``RedisConnector.put``/``get`` and ``Store.put``/``get`` (cache off), in its own
  environment (``benchmarks/peer_env.sh``: PyPI's ``proxystore[redis]``, redis-py);
* ``tether connector`` and ``tether store``: ``RedisConnector.put``/``get`` and
  ``Store.put``/``get`` (cache off: every get goes to Redis and deserializes).

Each library runs in a worker process of its own environment (the raw socket and
redis-py in tether's); the driver asks the workers for one cell at a time, the sides in
a rotated order each round, and keeps the median of the rounds; the ratios are medians of
the per-round ratios (two sides of one round ran back to back, so a load that comes and
goes moves both). Keys written by a ``put`` cell are deleted after it, untimed. Writes
``benchmarks/results/redis_bound.json``.

    .venv/bin/python benchmarks/bench_redis_bound.py [--quick] [--no-peer]
        [--rounds 25] [--count 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

from _common import peer_python, print_table, redis_server, write_json

SIZES = {'1KB': 10**3, '10KB': 10**4, '100KB': 10**5}
TETHER_SIDES = ('raw socket', 'redis-py', 'tether connector', 'tether store')
PEER_SIDES = ('ProxyStore connector', 'ProxyStore store')
_PAIRS = (
    ('ProxyStore connector', 'tether connector'),
    ('ProxyStore store', 'tether store'),
    ('tether connector', 'raw socket'),
    ('tether store', 'tether connector'),
    ('redis-py', 'tether connector'),
)

# One worker: reads {"side", "op", "size", "count"} lines, answers {"per_op": seconds}.
_WORKER = textwrap.dedent(
    """
    import json, os, socket, sys, time, uuid
    port, library = int(sys.argv[1]), sys.argv[2]
    prefix = f'bound-{uuid.uuid4().hex[:8]}:'
    sides = {}
    if library == 'tether':
        import redis
        from tether.connectors.redis import RedisConnector
        from tether.store import Store
        connector = RedisConnector('127.0.0.1', port, prefix=prefix)
        store = Store(f'bound-{uuid.uuid4().hex[:6]}', connector, cache_size=0)
        client = redis.Redis('127.0.0.1', port)
        sides['tether connector'] = (connector.put, connector.get, connector.evict)
        sides['tether store'] = (store.put, store.get, store.evict)
        counter = iter(range(1 << 60))
        def new_name():
            return f'{prefix}py-{next(counter)}'
        def py_put(value):
            name = new_name()
            client.set(name, value)
            return name
        sides['redis-py'] = (py_put, client.get, client.delete)
        sock = socket.create_connection(('127.0.0.1', port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = memoryview(bytearray(1 << 20))
        def raw_put(value):
            name = f'{prefix}raw-{next(counter)}'.encode()
            sock.sendmsg([b'*3\\r\\n$3\\r\\nSET\\r\\n$%d\\r\\n%s\\r\\n$%d\\r\\n'
                          % (len(name), name, len(value)), value, b'\\r\\n'])
            got = 0
            while got < 5:  # +OK
                got += sock.recv_into(buf[got:5])
            return name
        def raw_get(name):
            sock.sendall(b'*2\\r\\n$3\\r\\nGET\\r\\n$%d\\r\\n%s\\r\\n' % (len(name), name))
            head = len(b'$%d\\r\\n' % sizes[name]) + sizes[name] + 2
            got = 0
            while got < head:
                got += sock.recv_into(buf[got:head])
            return buf[:head]
        sizes = {}
        def raw_put_sized(value):
            name = raw_put(value)
            sizes[name] = len(value)
            return name
        sides['raw socket'] = (raw_put_sized, raw_get, client.delete)
    else:
        from proxystore.connectors.redis import RedisConnector
        from proxystore.store import Store
        from proxystore.store.utils import get_key
        connector = RedisConnector('127.0.0.1', port, clear=False)
        store = Store(f'bound-{uuid.uuid4().hex[:6]}', connector, cache_size=0)
        sides['ProxyStore connector'] = (connector.put, connector.get, connector.evict)
        sides['ProxyStore store'] = (store.put, store.get, store.evict)
    values, got_keys = {}, {}
    for line in sys.stdin:
        ask = json.loads(line)
        side, op, size, count = ask['side'], ask['op'], ask['size'], ask['count']
        put, get, evict = sides[side]
        value = values.setdefault(size, os.urandom(size))
        if op == 'put':
            keys = [None] * count
            t0 = time.perf_counter()
            for i in range(count):
                keys[i] = put(value)
            per_op = (time.perf_counter() - t0) / count
            for key in keys:
                evict(key)
        else:
            key = got_keys.get((side, size))
            if key is None:
                key = got_keys[(side, size)] = put(value)
            out = get(key)
            assert out is not None and len(out) >= size, (side, size)
            t0 = time.perf_counter()
            for _ in range(count):
                get(key)
            per_op = (time.perf_counter() - t0) / count
        print(json.dumps({'per_op': per_op}), flush=True)
    for (side, size), key in got_keys.items():
        sides[side][2](key)
    """
)


class _Worker:
    def __init__(self, python: str, port: int, library: str) -> None:
        self.proc = subprocess.Popen(
            [python, '-c', _WORKER, str(port), library],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def cell(self, side: str, op: str, size: int, count: int) -> float:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        ask = {'side': side, 'op': op, 'size': size, 'count': count}
        self.proc.stdin.write(json.dumps(ask) + '\n')
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f'the {side} worker died (exit {self.proc.wait()})')
        per_op: float = json.loads(line)['per_op']
        return per_op

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def _redis_benchmark(port: int, nbytes: int, n: int) -> dict[str, float]:
    command = ['redis-benchmark', '-p', str(port), '-c', '1', '-P', '1', '-n', str(n)]
    command += ['-d', str(nbytes), '-t', 'set,get', '--csv']
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rates: dict[str, float] = {}
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(',')]
        if fields[0] in ('SET', 'GET'):
            rates[fields[0].lower()] = 1.0 / float(fields[1])
    return rates


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='1 round of 200 operations')
    parser.add_argument('--no-peer', action='store_true', help='without ProxyStore')
    parser.add_argument('--rounds', type=int, default=25)
    parser.add_argument('--count', type=int, default=300, help='operations per cell')
    parser.add_argument('--shared-redis', action='store_true')
    return parser.parse_args()


def _paired(
    samples: dict[tuple[str, str, str], list[float]], key: tuple[str, str], a: str, b: str
) -> float:
    """The median over rounds of side ``a``'s time / side ``b``'s in the same round (the
    two ran back to back: a load that comes and goes moves both)."""
    size, op = key
    pairs = zip(samples[(size, a, op)], samples[(size, b, op)], strict=True)
    return statistics.median(x / y for x, y in pairs)


def _rows(
    medians: dict[tuple[str, str, str], float],
    samples: dict[tuple[str, str, str], list[float]],
    sides: list[str],
) -> list[list[str]]:
    rows = []
    for size in SIZES:
        for op in ('get', 'put'):
            cell = {s: medians[(size, s, op)] for s in sides}
            row = [f'{size} {op}', *(f'{cell[s] * 1e6:.1f} us' for s in sides)]
            if 'ProxyStore connector' in cell:
                for layer in ('connector', 'store'):
                    ratio = _paired(samples, (size, op), f'ProxyStore {layer}', f'tether {layer}')
                    row.append(f'{ratio:.2f}x')
            row.append(f'{_paired(samples, (size, op), "tether connector", "raw socket"):.2f}')
            rows.append(row)
    return rows


def main() -> None:
    args = _parse()
    rounds, count = (1, 200) if args.quick else (args.rounds, args.count)
    samples: dict[tuple[str, str, str], list[float]] = {}
    with redis_server(args.shared_redis) as port:
        workers = [_Worker(sys.executable, port, 'tether')]
        owner = dict.fromkeys(TETHER_SIDES, workers[0])
        if not args.no_peer:
            workers.append(_Worker(peer_python(), port, 'proxystore'))
            owner.update(dict.fromkeys(PEER_SIDES, workers[1]))
        sides = list(owner)
        try:
            for side in sides:  # (warm up: connections, imports, first keys)
                for op in ('get', 'put'):
                    owner[side].cell(side, op, SIZES['1KB'], 20)
            for r in range(rounds):
                for size, nbytes in SIZES.items():
                    order = sides[r % len(sides) :] + sides[: r % len(sides)]
                    for op in ('get', 'put'):
                        for side in order:
                            value = owner[side].cell(side, op, nbytes, count)
                            samples.setdefault((size, side, op), []).append(value)
                    for command, sec in _redis_benchmark(port, nbytes, count * 2).items():
                        op = 'put' if command == 'set' else command
                        samples.setdefault((size, 'redis-benchmark', op), []).append(sec)
                print(f'round {r + 1}/{rounds} done', file=sys.stderr, flush=True)
        finally:
            for worker in workers:
                worker.close()
    medians = {k: statistics.median(v) for k, v in samples.items()}
    shown = ['raw socket', 'redis-benchmark', 'redis-py', *sides[4:], *sides[2:4]]
    columns = ['', *shown]
    if not args.no_peer:
        columns += ['ProxyStore / tether (connector)', 'ProxyStore / tether (store)']
    columns.append('tether connector / raw')
    md = print_table(
        f'Redis round trips, one at a time (median per op of {rounds} rounds x {count})',
        columns,
        _rows(medians, samples, shown),
    )
    write_json(
        'redis_bound',
        {
            'rounds': rounds,
            'count': count,
            'load_average': os.getloadavg(),
            'per_op_s': {'|'.join(k): v for k, v in medians.items()},
            'paired_ratios': {
                f'{size}|{op}|{a} / {b}': _paired(samples, (size, op), a, b)
                for size in SIZES
                for op in ('get', 'put')
                for a, b in _PAIRS
                if (size, a, op) in samples
            },
            'samples_s': {'|'.join(k): v for k, v in samples.items()},
        },
        md,
    )


if __name__ == '__main__':
    main()
