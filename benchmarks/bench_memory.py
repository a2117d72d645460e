"""Figure 4.13: memory use of repeated map-reduce rounds under four memory models.

Each round: ``mappers`` tasks each receive ``input_mb`` MB and produce ``output_mb`` MB,
then one reducer consumes every mapper output. Models:

* no-proxy: Dask moves all data;
* default: inputs and outputs are store proxies nobody evicts (ProxyStore's default);
* manual: the same proxies, evicted by the client once the consuming task is done;
* ownership: a StoreExecutor with ownership=True (borrowed inputs, owned outputs moved to
  the reducer) evicts everything automatically.

Memory is sampled every 0.1 s as the sum of the resident sizes of the client, the Dask
scheduler and workers, and a private Redis server. Usage:
``python benchmarks/bench_memory.py [--quick]``; writes
``benchmarks/results/memory.json`` and ``docs/figures/memory.png``.
"""

from __future__ import annotations

import argparse
import gc
import pathlib
import sys
import threading
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from _patterns_common import (
    dask_cluster,
    print_table,
    private_redis,
    warm_workers,
    write_json,
)

MB = 1_000_000


def mapper(data: Any, output_mb: int, sleep: float) -> bytes:
    len(data)
    time.sleep(sleep)
    return bytes(output_mb * MB)


def mapper_proxy(data: Any, output_mb: int, sleep: float, store_config: Any) -> Any:
    from tether.store import get_or_create_store

    len(data)
    time.sleep(sleep)
    return get_or_create_store(store_config).proxy(bytes(output_mb * MB))


def reducer(*parts: Any) -> int:
    return sum(len(p) for p in parts)


class Sampler:
    """Samples the summed RSS of this process tree and the Redis server."""

    def __init__(self, redis_pid: int, interval: float = 0.1) -> None:
        import psutil

        self.procs = [psutil.Process(), psutil.Process(redis_pid)]
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> float:
        import psutil

        total = 0
        seen = set()
        for proc in [*self.procs, *self.procs[0].children(recursive=True)]:
            if proc.pid in seen:
                continue
            seen.add(proc.pid)
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        return total / MB

    def _run(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - start, self._rss()))
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *args: Any) -> None:
        self._stop.set()
        self._thread.join()


def run(model: str, client: Any, store: Any, cfg: argparse.Namespace) -> None:
    from tether.store.executor import ProxySize, StoreExecutor

    inputs = [bytes(cfg.input_mb * MB) for _ in range(cfg.mappers)]
    executor = None
    if model == 'ownership':
        executor = StoreExecutor(
            client,
            store,
            should_proxy=ProxySize(MB),
            ownership=True,
            close_store=False,
            close_executor=False,
        )
    for _ in range(cfg.rounds):
        if model == 'no-proxy':
            maps = [client.submit(mapper, d, cfg.output_mb, cfg.sleep, pure=False) for d in inputs]
            client.submit(reducer, *maps, pure=False).result()
            del maps
        elif model in ('default', 'manual'):
            proxies = [store.proxy(d, populate_target=False) for d in inputs]
            maps = [
                client.submit(
                    mapper_proxy, p, cfg.output_mb, cfg.sleep, store.config(), pure=False
                )
                for p in proxies
            ]
            outs = client.gather(maps)
            if model == 'manual':
                for p in proxies:
                    store.evict(p.__proxy_factory__.key)
            client.submit(reducer, *outs, pure=False).result()
            if model == 'manual':
                for o in outs:
                    store.evict(o.__proxy_factory__.key)
            del maps, outs, proxies
        else:
            assert executor is not None
            maps = [executor.submit(mapper, d, cfg.output_mb, cfg.sleep) for d in inputs]
            outs = [m.result() for m in maps]
            del maps
            executor.submit(reducer, *outs).result()
            del outs
        gc.collect()
    if executor is not None:
        executor.shutdown()


def plot(traces: dict[str, list[tuple[float, float]]]) -> pathlib.Path | None:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for model, samples in traces.items():
        ax.plot([t for t, _ in samples], [m / 1000 for _, m in samples], label=model)
    ax.set_xlabel('time (s)')
    ax.set_ylabel('memory (GB): client + Dask + Redis')
    ax.legend()
    out = pathlib.Path(__file__).resolve().parents[1] / 'docs' / 'figures' / 'memory.png'
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches='tight')
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--quick', action='store_true', help='4 rounds of 4 mappers, 10 MB')
    parser.add_argument('--rounds', type=int, default=8)
    parser.add_argument('--mappers', type=int, default=8)
    parser.add_argument('--input-mb', type=int, default=50)
    parser.add_argument('--output-mb', type=int, default=5)
    parser.add_argument('--sleep', type=float, default=0.5)
    parser.add_argument('--workers', type=int, default=4)
    cfg = parser.parse_args()
    if cfg.quick:
        cfg.rounds, cfg.mappers, cfg.input_mb, cfg.output_mb = 4, 4, 10, 1

    from distributed import Client

    from tether.connectors.redis import RedisConnector
    from tether.store import Store

    traces: dict[str, list[tuple[float, float]]] = {}
    summary = []
    for model in ('no-proxy', 'default', 'manual', 'ownership'):
        with private_redis() as (port, pid), dask_cluster(cfg.workers) as cluster:
            store = Store(
                f'bench-memory-{model}', RedisConnector('127.0.0.1', port), register=True
            )
            with Client(cluster.scheduler_address) as client:
                client.submit(reducer, b'', pure=False).result()
                warm_workers(client, store)
                time.sleep(0.5)
                with Sampler(pid) as sampler:
                    start = time.perf_counter()
                    run(model, client, store, cfg)
                    elapsed = time.perf_counter() - start
                    time.sleep(0.5)
                import redis

                left = redis.Redis('127.0.0.1', port).dbsize()
            store.close()
        samples = sampler.samples
        base = samples[0][1]
        traces[model] = samples
        peak = max(m for _, m in samples)
        summary.append((model, elapsed, base, peak, peak - base, samples[-1][1] - base, left))
        print(f'{model}: peak {peak:.0f} MB, keys left {left}', flush=True)
    print_table(
        f'Memory: {cfg.rounds} rounds x {cfg.mappers} mappers, {cfg.input_mb} MB in, '
        f'{cfg.output_mb} MB out',
        ('model', 'time (s)', 'start (MB)', 'peak (MB)', 'peak - start', 'end - start', 'keys'),
        summary,
    )
    path = write_json(
        'memory',
        {
            'config': vars(cfg),
            'summary': [
                dict(
                    zip(
                        ('model', 'time', 'start', 'peak', 'growth', 'end_growth', 'keys_left'),
                        r,
                        strict=True,
                    )
                )
                for r in summary
            ],
            'traces': traces,
        },
    )
    print(f'wrote {path}')
    figure = plot(traces)
    if figure is not None:
        print(f'wrote {figure}')


if __name__ == '__main__':
    main()
