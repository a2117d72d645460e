"""Function service: no-op latency and batched throughput, split like funcX's figure 3.

For the dev stack (SQLite, in-process queues) and the production stack (PostgreSQL,
RabbitMQ; service, endpoint and client in three processes), against the bare process pool
and Parsl (HTEX on loopback) running the same no-op tasks. The latency of each task is
split into the parts of the funcX paper's figure 3: service (submit request, storing, the
result's storing), queue (time in the broker, both ways), endpoint (to and from the
endpoint, its queue and hand-off to a worker), worker (the function) and client (result
stream to the future).

    .venv/bin/python benchmarks/bench_faas.py [--quick]
"""

from __future__ import annotations

import concurrent.futures
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args, print_table, write_json
from _faas_stack import dev_stack, prod_stack


def noop() -> None:
    return None


PARTS = ('service', 'queue', 'endpoint', 'worker', 'client')


def split(t: dict[str, float]) -> dict[str, float]:
    return {
        'service': (t['service_queued'] - t['client_submit'])
        + (t['service_published'] - t['service_result']),
        'queue': (t['service_dispatched'] - t['service_queued'])
        + (t['service_sent'] - t['service_published']),
        'endpoint': (t['worker_start'] - t['service_dispatched'])
        + (t['service_result'] - t['worker_end']),
        'worker': t['worker_end'] - t['worker_start'],
        'client': t['client_received'] - t['service_sent'],
    }


def faas_latency(stack: dict[str, Any], n: int) -> dict[str, Any]:
    from tether.faas import Executor

    with Executor(stack['endpoint_id'], service_url=stack['url'], token=stack['token']) as ex:
        for _ in range(20):
            ex.submit(noop).result()
        samples = []
        parts: dict[str, list[float]] = {p: [] for p in PARTS}
        for _ in range(n):
            t0 = time.perf_counter()
            f = ex.submit(noop)
            f.result()
            samples.append(time.perf_counter() - t0)
            for k, v in split(f.timings).items():
                parts[k].append(v)
    return {
        'median': statistics.median(samples),
        'p95': sorted(samples)[int(0.95 * len(samples))],
        'parts': {k: statistics.median(v) for k, v in parts.items()},
    }


def faas_throughput(stack: dict[str, Any], n: int) -> float:
    from tether.faas import Executor

    with Executor(stack['endpoint_id'], service_url=stack['url'], token=stack['token']) as ex:
        for f in [ex.submit(noop) for _ in range(200)]:
            f.result()
        t0 = time.perf_counter()
        futures = [ex.submit(noop) for _ in range(n)]
        for f in futures:
            f.result()
        return n / (time.perf_counter() - t0)


def pool_latency_throughput(
    pool: concurrent.futures.Executor, n_lat: int, n_tp: int
) -> tuple[float, float]:
    for _ in range(20):
        pool.submit(noop).result()
    samples = []
    for _ in range(n_lat):
        t0 = time.perf_counter()
        pool.submit(noop).result()
        samples.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for f in [pool.submit(noop) for _ in range(n_tp)]:
        f.result()
    return statistics.median(samples), n_tp / (time.perf_counter() - t0)


def parsl_pool() -> Any:
    import tempfile

    from parsl.concurrent import ParslPoolExecutor
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    bindir = os.path.dirname(sys.executable)
    os.environ['PATH'] = bindir + os.pathsep + os.environ.get('PATH', '')
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ['PYTHONPATH'] = os.pathsep.join(filter(None, [here, os.environ.get('PYTHONPATH')]))
    config = Config(
        executors=[
            HighThroughputExecutor(
                label='bench',
                address='127.0.0.1',
                max_workers_per_node=2,
                provider=LocalProvider(init_blocks=1, max_blocks=1),
                encrypted=False,
            )
        ],
        run_dir=tempfile.mkdtemp(prefix='tfbench-parsl-'),
        strategy='none',
    )
    return ParslPoolExecutor(config)


def main() -> None:
    args = parse_args(__doc__)
    n_lat = 50 if args.quick else 200
    n_tp = 1000 if args.quick else 5000
    load_before = os.getloadavg()
    results: dict[str, Any] = {'n_latency': n_lat, 'n_throughput': n_tp}
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        lat, tp = pool_latency_throughput(pool, n_lat, n_tp)
    results['process_pool'] = {'median': lat, 'throughput': tp}
    pool = parsl_pool()
    try:
        lat, tp = pool_latency_throughput(pool, n_lat, min(n_tp, 2000))
    finally:
        pool.shutdown()
    results['parsl'] = {'median': lat, 'throughput': tp}
    for name, stack in (('dev', dev_stack), ('prod', prod_stack)):
        with stack() as s:
            lat_result = faas_latency(s, n_lat)
            lat_result['throughput'] = faas_throughput(s, n_tp)
            results[name] = lat_result
    results['load'] = {'before': load_before, 'after': os.getloadavg()}

    rows = []
    for name, label in (
        ('dev', 'tether faas dev (SQLite, in-process queues)'),
        ('prod', 'tether faas (PostgreSQL, RabbitMQ)'),
        ('process_pool', 'bare ProcessPoolExecutor(2)'),
        ('parsl', 'Parsl HTEX (2 workers)'),
    ):
        r = results[name]
        parts = r.get('parts', {})
        rows.append(
            [
                label,
                f'{r["median"] * 1e3:.2f}',
                f'{r.get("p95", float("nan")) * 1e3:.2f}' if 'p95' in r else '',
                *(f'{parts[p] * 1e3:.2f}' if parts else '' for p in PARTS),
                f'{r["throughput"]:,.0f}',
            ]
        )
    md = print_table(
        'No-op tasks: round trip (ms) and throughput (tasks/s)',
        ['system', 'median', 'p95', *(f'{p} ms' for p in PARTS), 'tasks/s'],
        rows,
    )
    md += (
        f'\n\nload average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; '
        f'{n_lat} sequential tasks, {n_tp} batched'
    )
    write_json('faas', results, md)


if __name__ == '__main__':
    main()
