"""Is the Redis server the bound for small round trips? tether against the floor.

For values of 1 KB, 10 KB and 100 KB, one process times sequential round trips to a
private ``redis-server`` (median per operation):

* ``raw socket``: a pre-encoded ``GET``/``SET`` written to a plain socket and the reply
  read to its last byte: no client library at all (the floor: server + loopback);
* ``redis-benchmark``: Redis's own C client, one connection, no pipelining
  (``-c 1 -P 1``): 1 / its requests per second;
* ``redis-py``: ``client.get``/``client.set`` (hiredis parser);
* ``tether connector``: ``RedisConnector.get``/``put``;
* ``tether store``: ``Store.get`` (cache off: every get goes to Redis and deserializes)
  and ``Store.put``.

The sides alternate within each round; medians over all rounds.

    .venv/bin/python benchmarks/bench_redis_bound.py [--quick]
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

from _common import parse_args, print_table, redis_server, write_json

SIZES = {'1KB': 10**3, '10KB': 10**4, '100KB': 10**5}


def _per_op(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _raw(port: int, key: bytes, value: bytes) -> tuple[Callable[[], None], Callable[[], None]]:
    sock = socket.create_connection(('127.0.0.1', port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    get = b'*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n' % (len(key), key)
    set_ = b'*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n' % (len(key), key, len(value))
    reply_len = len(b'$%d\r\n' % len(value)) + len(value) + 2
    buf = bytearray(reply_len)
    view = memoryview(buf)

    def do_get() -> None:
        sock.sendall(get)
        got = 0
        while got < reply_len:
            got += sock.recv_into(view[got:])

    def do_set() -> None:
        sock.sendmsg([set_, value, b'\r\n'])
        got = 0
        while got < 5:  # +OK\r\n
            got += sock.recv_into(view[got:5])

    return do_get, do_set


def _redis_benchmark(port: int, nbytes: int, n: int) -> dict[str, float]:
    out = subprocess.run(
        [
            'redis-benchmark',
            '-p',
            str(port),
            '-c',
            '1',
            '-P',
            '1',
            '-n',
            str(n),
            '-d',
            str(nbytes),
            '-t',
            'set,get',
            '--csv',
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rates: dict[str, float] = {}
    for line in out.splitlines():
        fields = [f.strip('"') for f in line.split(',')]
        if fields[0] in ('SET', 'GET'):
            rates[fields[0].lower()] = 1.0 / float(fields[1])
    return rates


def _tether_and_redis_py(
    size: str,
    *,
    value: bytes,
    name: bytes,
    client: Any,
    connector: Any,
    store: Any,
    n: int,
    add: Callable[[str, str, str, float], None],
) -> None:
    client.set(name, value)
    add(size, 'redis-py', 'set', _per_op(lambda: client.set(name, value), n))
    add(size, 'redis-py', 'get', _per_op(lambda: client.get(name), n))
    key = connector.put(value)
    add(size, 'tether connector', 'set', _per_op(lambda: connector.put(value), n))
    add(size, 'tether connector', 'get', _per_op(lambda: connector.get(key), n))
    skey = store.put(value)
    add(size, 'tether store', 'set', _per_op(lambda: store.put(value), n))
    add(size, 'tether store', 'get', _per_op(lambda: store.get(skey), n))


def main() -> None:
    args = parse_args(__doc__)
    import redis

    from tether.connectors.redis import RedisConnector
    from tether.store import Store

    n = 300 if args.quick else 2000
    rounds = 1 if args.quick else 5
    samples: dict[tuple[str, str, str], list[float]] = {}

    def add(size: str, side: str, op: str, value: float) -> None:
        samples.setdefault((size, side, op), []).append(value)

    with redis_server(args.shared_redis) as port:
        prefix = f'bound-{uuid.uuid4().hex[:8]}:'
        client = redis.Redis('127.0.0.1', port)
        connector = RedisConnector('127.0.0.1', port, prefix=prefix)
        store = Store(f'bound-{uuid.uuid4().hex[:6]}', connector, cache_size=0)
        try:
            for _ in range(rounds):
                for size, nbytes in SIZES.items():
                    value = os.urandom(nbytes)
                    name = f'{prefix}raw-{size}'.encode()
                    raw_get, raw_set = _raw(port, name, value)
                    raw_set()
                    add(size, 'raw socket', 'set', _per_op(raw_set, n))
                    add(size, 'raw socket', 'get', _per_op(raw_get, n))
                    for op, sec in _redis_benchmark(port, nbytes, n).items():
                        add(size, 'redis-benchmark', op, sec)
                    _tether_and_redis_py(
                        size,
                        value=value,
                        name=name,
                        client=client,
                        connector=connector,
                        store=store,
                        n=n,
                        add=add,
                    )
        finally:
            store.close(clear=True)
            client.close()
    medians = {k: statistics.median(v) for k, v in samples.items()}
    sides = ['raw socket', 'redis-benchmark', 'redis-py', 'tether connector', 'tether store']
    rows = []
    for size in SIZES:
        for op in ('get', 'set'):
            floor = medians[(size, 'raw socket', op)]
            cells = [f'{medians[(size, s, op)] * 1e6:.1f} us' for s in sides]
            ratios = [f'{medians[(size, s, op)] / floor:.2f}' for s in sides[2:]]
            rows.append([f'{size} {op.upper()}', *cells, *ratios])
    md = print_table(
        f'Redis round trips, one connection, sequential (median per op, {rounds} rounds)',
        ['', *sides, 'redis-py/raw', 'connector/raw', 'store/raw'],
        rows,
    )
    write_json(
        'redis_bound',
        {'redis_port': port, 'per_op_s': {'|'.join(k): v for k, v in medians.items()}},
        md,
    )


if __name__ == '__main__':
    main()
