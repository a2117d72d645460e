"""Function service: round trips of 1 KB-100 MB arguments, by value and by proxy.

The dissertation's figures 3.9-3.11, scaled to one machine: a task that touches its
argument (``len``, which resolves a proxy) and returns a small value, with the argument
sent through the service (by value, up to the service's 10 MiB limit) or as a proxy of a
Redis store (a private ``redis-server``) or of a shared-memory store, which the service
never sees. Against the dev stack (SQLite, in-process queues).

Every side and size first runs :data:`WARMUP` untimed tasks, one per worker of the dev
stack: each worker's first large argument pays one-off costs (its first allocation of that
size faults in fresh pages; the shared-memory store's first segment of a size class),
which in a median of three samples would otherwise be two of them.

    .venv/bin/python benchmarks/bench_faas_payload.py [--quick]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args, print_table, redis_server, write_json
from _faas_stack import dev_stack

SIZES = [1_000, 100_000, 1_000_000, 10_000_000, 100_000_000]
LIMIT = 10 * 2**20
WARMUP = 2
"""Untimed tasks per side and size: the dev stack's workers (``dev_stack(max_workers=2)``)."""


def touch(data: Any) -> int:
    return len(data)


def main() -> None:
    args = parse_args(__doc__)
    # 21 timed tasks per cell: with 7, one slow task in a cell moved the 10 MB / 1 KB
    # ratio by 0.3 from run to run on this 2-core machine.
    repeats = 3 if args.quick else 21
    from tether.connectors.redis import RedisConnector
    from tether.faas import Executor
    from tether.store import Store

    load_before = os.getloadavg()
    from tether.connectors.shared_memory import SharedMemoryConnector, cleanup

    results: dict[str, Any] = {
        'repeats': repeats,
        'sizes': SIZES,
        'value': {},
        'proxy': {},
        'shm': {},
    }
    shm_ns = f'tfb{uuid.uuid4().hex[:8]}'
    with redis_server(args.shared_redis) as port, dev_stack(max_workers=WARMUP) as s:
        connector = RedisConnector('127.0.0.1', port, prefix=f'tfbench-{uuid.uuid4().hex[:6]}:')
        shm_connector = SharedMemoryConnector(shm_ns, clear=True)
        with (
            Store('faas-bench', connector, register=True) as store,
            Store('faas-bench-shm', shm_connector, register=True) as shm,
            Executor(s['endpoint_id'], service_url=s['url'], token=s['token']) as ex,
        ):
            for _ in range(5):
                ex.submit(touch, b'warm').result()

            def timed(make_arg: Any, size: int) -> float:
                for _ in range(WARMUP):
                    assert ex.submit(touch, make_arg()).result() == size
                samples = []
                for _ in range(repeats if size < 100_000_000 else max(3, repeats // 3)):
                    t0 = time.perf_counter()
                    assert ex.submit(touch, make_arg()).result() == size
                    samples.append(time.perf_counter() - t0)
                return statistics.median(samples)

            for size in SIZES:
                data = os.urandom(size)
                if size + 1000 < LIMIT:
                    results['value'][size] = timed(lambda d=data: d, size)
                results['proxy'][size] = timed(lambda d=data: store.proxy(d, evict=True), size)
                results['shm'][size] = timed(lambda d=data: shm.proxy(d, evict=True), size)
                print(
                    size,
                    results['value'].get(size),
                    results['proxy'][size],
                    results['shm'][size],
                    file=sys.stderr,
                )
        cleanup(shm_ns)
    results['load'] = {'before': load_before, 'after': os.getloadavg()}
    base = results['proxy'][1_000]
    base_shm = results['shm'][1_000]
    rows = []
    for size in SIZES:
        v = results['value'].get(size)
        p = results['proxy'][size]
        m = results['shm'][size]
        rows.append(
            [
                f'{size:,}',
                f'{v * 1e3:.1f}' if v is not None else 'over the limit',
                f'{p * 1e3:.1f}',
                f'{p / base:.2f}',
                f'{m * 1e3:.1f}',
                f'{m / base_shm:.2f}',
            ]
        )
    md = print_table(
        'Round trip of a task touching its argument (ms, median)',
        [
            'argument bytes',
            'by value (through the service)',
            'proxy, Redis store',
            'Redis / Redis at 1 KB',
            'proxy, shared-memory store',
            'shm / shm at 1 KB',
        ],
        rows,
    )
    md += (
        f'\n\nload average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; '
        f'{repeats} repeats'
    )
    write_json('faas_payload', results, md)


if __name__ == '__main__':
    main()
