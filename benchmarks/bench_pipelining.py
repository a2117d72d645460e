"""Figure 4.11: task pipelining with distributed futures, on Dask.

Eight chained tasks; each sleeps ``f * s`` (start-up overhead), uses its input, sleeps
``(1 - f) * s`` (compute) and passes ``size`` bytes to the next. Three deployments:

* no-proxy: task i is submitted when task i-1's result (the data) is back; Dask moves it;
* proxy: the same, but tasks return store proxies, so only proxies go through Dask;
* future: all tasks are submitted at once; task i resolves a proxy of a future that task
  i-1 sets, so its start-up overhead overlaps its predecessor's compute.

Usage: ``python benchmarks/bench_pipelining.py [--quick]``; writes
``benchmarks/results/pipelining.json`` and ``docs/figures/pipelining.png``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
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


def task_plain(data: Any, f: float, s: float, size: int) -> bytes:
    time.sleep(f * s)
    if data is not None:
        len(data)
    time.sleep((1 - f) * s)
    return bytes(size)


def task_proxy(data: Any, f: float, s: float, size: int, store_config: Any) -> Any:
    from tether.store import get_or_create_store

    time.sleep(f * s)
    if data is not None:
        len(data)  # resolves the proxy
    time.sleep((1 - f) * s)
    return get_or_create_store(store_config).proxy(bytes(size), evict=True)


def task_future(data: Any, out: Any, f: float, s: float, size: int) -> None:
    time.sleep(f * s)
    if data is not None:
        len(data)  # waits for the predecessor's result
    time.sleep((1 - f) * s)
    out.set_result(bytes(size))


def run_plain(client: Any, n: int, f: float, s: float, size: int) -> float:
    start = time.perf_counter()
    data = None
    for _ in range(n):
        data = client.submit(task_plain, data, f, s, size, pure=False).result()
    return time.perf_counter() - start


def run_proxy(client: Any, store: Any, n: int, f: float, s: float, size: int) -> float:  # noqa: PLR0917
    start = time.perf_counter()
    data = None
    for _ in range(n):
        data = client.submit(task_proxy, data, f, s, size, store.config(), pure=False).result()
    return time.perf_counter() - start


def run_future(client: Any, store: Any, n: int, f: float, s: float, size: int) -> float:  # noqa: PLR0917
    start = time.perf_counter()
    futures = [store.future(evict=True, timeout=120) for _ in range(n)]
    tasks = []
    for i in range(n):
        data = None if i == 0 else futures[i - 1].proxy(target_class=bytes)
        tasks.append(client.submit(task_future, data, futures[i], f, s, size, pure=False))
    futures[-1].result(timeout=120)
    for t in tasks:
        t.result()
    elapsed = time.perf_counter() - start
    store.evict(futures[-1].key)
    return elapsed


def plot(results: list[dict[str, Any]], n: int, s: float) -> pathlib.Path | None:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fs = [r['f'] for r in results]
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, label in (('no_proxy', 'no proxy'), ('proxy', 'proxy'), ('future', 'ProxyFuture')):
        ax.plot(fs, [r[mode] for r in results], marker='o', label=label)
    ax.plot(fs, [s + (n - 1) * (1 - f) * s for f in fs], '--', color='grey', label='ideal')
    ax.set_xlabel('overhead fraction f')
    ax.set_ylabel('makespan (s)')
    ax.legend()
    out = pathlib.Path(__file__).resolve().parents[1] / 'docs' / 'figures' / 'pipelining.png'
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches='tight')
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true', help='fewer f values, one repeat')
    parser.add_argument('--tasks', type=int, default=8)
    parser.add_argument('--seconds', type=float, default=1.0)
    parser.add_argument('--size', type=int, default=10_000_000)
    parser.add_argument('--repeats', type=int, default=2)
    args = parser.parse_args()
    fractions = [0.0, 0.2, 0.5] if args.quick else [round(0.1 * i, 1) for i in range(10)]
    repeats = 1 if args.quick else args.repeats

    from distributed import Client

    from tether.connectors.redis import RedisConnector
    from tether.store import Store

    n, s, size = args.tasks, args.seconds, args.size
    results = []
    with private_redis() as (port, _), dask_cluster(4) as cluster:
        store = Store('bench-pipelining', RedisConnector('127.0.0.1', port), register=True)
        with Client(cluster.scheduler_address) as client:
            client.submit(task_plain, None, 0, 0, 10).result()  # warm up
            warm_workers(client, store)
            for f in fractions:
                row: dict[str, Any] = {'f': f}
                row['no_proxy'] = median(
                    [run_plain(client, n, f, s, size) for _ in range(repeats)]
                )
                row['proxy'] = median(
                    [run_proxy(client, store, n, f, s, size) for _ in range(repeats)],
                )
                row['future'] = median(
                    [run_future(client, store, n, f, s, size) for _ in range(repeats)],
                )
                row['ideal'] = s + (n - 1) * (1 - f) * s
                results.append(row)
                print(f'f={f}: {row}', flush=True)
        store.close()
    rows = []
    for r in results:
        base = r['no_proxy']
        rows.append(
            (
                r['f'],
                r['no_proxy'],
                r['proxy'],
                r['future'],
                r['ideal'],
                100 * (1 - r['proxy'] / base),
                100 * (1 - r['future'] / base),
                100 * r['f'],
            ),
        )
    print_table(
        f'Pipelining: {n} tasks x {s} s, {size / 1e6:.0f} MB between tasks (median of {repeats})',
        (
            'f',
            'no proxy (s)',
            'proxy (s)',
            'future (s)',
            'ideal (s)',
            'proxy red. %',
            'future red. %',
            'seed ideal red. %',
        ),
        rows,
    )
    path = write_json(
        'pipelining',
        {'tasks': n, 'seconds': s, 'size': size, 'repeats': repeats, 'results': results},
    )
    print(f'wrote {path}')
    figure = plot(results, n, s)
    if figure is not None:
        print(f'wrote {figure}')


if __name__ == '__main__':
    main()
