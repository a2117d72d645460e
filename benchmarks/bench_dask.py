"""Figures 3.22-3.23: Dask overheads with and without the tether Dask client.

* Round trip: a no-op task that receives a payload and returns one of the same size,
  submitted and waited for one at a time; payloads 1 KB to 100 MB; plain
  ``dask.distributed.Client`` versus ``tether.plugins.dask.Client`` with a Redis store
  and with a shared-memory store (threshold 10 KB). Median of ``repeats``.
* Throughput: tasks that receive 1 MB and return 1 MB of fresh data, ``workers`` of them
  kept in flight, on clusters of 1 and 2 workers; tasks per second.

Usage: ``python benchmarks/bench_dask.py [--quick]``; writes
``benchmarks/results/dask.json`` and ``docs/figures/dask_roundtrip.png``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from _patterns_common import (
    dask_cluster,
    median,
    print_table,
    private_redis,
    warm_workers,
    write_json,
)

SIZES = [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000]


def echo(data: Any) -> bytes:
    return bytes(len(data))


def fresh(data: Any) -> bytes:
    len(data)
    return os.urandom(len(data))


def roundtrip(client: Any, payload: bytes, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = client.submit(echo, payload, pure=False).result()
        len(result)  # the caller uses the result (a proxy resolves here)
        times.append(time.perf_counter() - start)
        del result
    return median(times)


def throughput(client: Any, n_tasks: int, in_flight: int, size: int) -> float:
    from distributed import wait

    payloads = [os.urandom(size) for _ in range(4)]
    start = time.perf_counter()
    running = {client.submit(fresh, payloads[i % 4], pure=False) for i in range(in_flight)}
    submitted = in_flight
    done = 0
    while running:
        finished, running = wait(running, return_when='FIRST_COMPLETED')
        for future in finished:
            len(future.result())
            done += 1
            if submitted < n_tasks:
                running.add(client.submit(fresh, payloads[submitted % 4], pure=False))
                submitted += 1
    return done / (time.perf_counter() - start)


def plot(rows: list[dict[str, Any]]) -> pathlib.Path | None:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    sizes = [r['size'] for r in rows]
    ax.loglog(sizes, [r['dask'] for r in rows], marker='o', label='Dask')
    ax.loglog(sizes, [r['redis'] for r in rows], marker='o', label='tether client, Redis')
    ax.loglog(sizes, [r['shm'] for r in rows], marker='o', label='tether client, shared memory')
    ax.set_xlabel('payload (bytes)')
    ax.set_ylabel('round-trip time (s)')
    ax.legend()
    out = pathlib.Path(__file__).resolve().parents[1] / 'docs' / 'figures' / 'dask_roundtrip.png'
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches='tight')
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--repeats', type=int, default=7)
    parser.add_argument('--tasks', type=int, default=300)
    parser.add_argument('--threshold', type=int, default=10_000)
    args = parser.parse_args()
    sizes = SIZES[:-1] if args.quick else SIZES
    repeats = 3 if args.quick else args.repeats
    n_tasks = 60 if args.quick else args.tasks

    from distributed import Client as DaskClient

    from tether.connectors.redis import RedisConnector
    from tether.connectors.shared_memory import SharedMemoryConnector
    from tether.plugins.dask import Client as TetherClient
    from tether.store import Store

    rt_rows = []
    tp_rows = []
    stores_used = ('redis', 'shm')
    namespace = f'benchdask{uuid.uuid4().hex[:8]}'
    with private_redis() as (port, _):
        stores = {
            'redis': Store('bench-dask', RedisConnector('127.0.0.1', port), register=True),
            'shm': Store('bench-dask-shm', SharedMemoryConnector(namespace), register=True),
        }

        def tether_client(address: str, kind: str) -> Any:
            return TetherClient(address, ps_store=stores[kind], ps_threshold=args.threshold)

        with dask_cluster(1) as cluster:
            clients = {'dask': DaskClient(cluster.scheduler_address)}
            for kind in stores_used:
                clients[kind] = tether_client(cluster.scheduler_address, kind)
                warm_workers(clients['dask'], stores[kind])
            for client in clients.values():
                roundtrip(client, b'x', 3)
            for size in sizes:
                payload = os.urandom(size)
                reps = max(3, repeats // 2) if size >= 100_000_000 else repeats
                samples: dict[str, list[float]] = {name: [] for name in clients}
                # Alternate to spread machine noise over every client.
                for _ in range(reps):
                    for name, client in clients.items():
                        samples[name].append(roundtrip(client, payload, 1))
                row: dict[str, Any] = {'size': size}
                row.update({name: median(v) for name, v in samples.items()})
                for kind in stores_used:
                    row[f'{kind}_improvement_pct'] = 100 * (1 - row[kind] / row['dask'])
                rt_rows.append(row)
                print(row, flush=True)
            for client in clients.values():
                client.close()
        for workers in (1, 2):
            with dask_cluster(workers) as cluster:
                rates = {}
                for name in ('dask', *stores_used):
                    # One client at a time: a second client on the scheduler skews the first.
                    if name == 'dask':
                        client = DaskClient(cluster.scheduler_address)
                    else:
                        client = tether_client(cluster.scheduler_address, name)
                        warm_workers(client, stores[name])
                    throughput(client, 10, workers, 1_000_000)
                    rates[name] = throughput(client, n_tasks, workers, 1_000_000)
                    client.close()
                row = {'workers': workers, **rates}
                for kind in stores_used:
                    row[f'{kind}_improvement_pct'] = 100 * (rates[kind] / rates['dask'] - 1)
                tp_rows.append(row)
                print(tp_rows[-1], flush=True)
        stores['redis'].close()
        stores['shm'].close(clear=True)
    print_table(
        f'No-op round trip (median of {repeats}; threshold {args.threshold} B)',
        (
            'payload (B)',
            'Dask (s)',
            'tether, Redis (s)',
            'improvement %',
            'tether, shm (s)',
            'improvement %',
        ),
        [
            (
                r['size'],
                r['dask'],
                r['redis'],
                r['redis_improvement_pct'],
                r['shm'],
                r['shm_improvement_pct'],
            )
            for r in rt_rows
        ],
    )
    print_table(
        f'Throughput, 1 MB in / 1 MB out, {n_tasks} tasks',
        ('workers', 'Dask (tasks/s)', 'tether, Redis', 'improvement %', 'tether, shm', 'impr. %'),
        [
            (
                r['workers'],
                r['dask'],
                r['redis'],
                r['redis_improvement_pct'],
                r['shm'],
                r['shm_improvement_pct'],
            )
            for r in tp_rows
        ],
    )
    path = write_json(
        'dask',
        {'threshold': args.threshold, 'roundtrip': rt_rows, 'throughput': tp_rows},
    )
    print(f'wrote {path}')
    figure = plot(rt_rows)
    if figure is not None:
        print(f'wrote {figure}')


if __name__ == '__main__':
    main()
