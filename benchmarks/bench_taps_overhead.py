"""The bench engine's own overhead per task, against the bare executor (issue 12).

Submits N no-op tasks to a ThreadPoolExecutor directly, then through
``tether.bench.engine.Engine`` (without records, and with JSON records written to a
file), waits for all of them, and reports the extra time per task. Target: under 50 us
per task on the thread pool. The three variants alternate within each repeat, so that
changes in the machine's load hit them alike; medians over repeats. Both the wall time
and this process's CPU time (all its threads) are measured: on a machine shared with
other work the CPU time is the steadier measure of the engine's own work.

    .venv/bin/python benchmarks/bench_taps_overhead.py [--quick]
"""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
import time
from typing import Any

from _common import fmt_time, parse_args, print_table, summary, write_json
from tether.bench.engine import Engine
from tether.bench.record import JSONRecordLogger


def noop() -> None:
    return None


def bare(pool: concurrent.futures.ThreadPoolExecutor, n: int) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    futures = [pool.submit(noop) for _ in range(n)]
    concurrent.futures.wait(futures)
    return time.perf_counter() - start, time.process_time() - cpu


def engine_run(
    pool: concurrent.futures.ThreadPoolExecutor,
    n: int,
    records: str | None,
) -> tuple[float, float]:
    logger = JSONRecordLogger(records) if records else None
    engine = Engine(pool, record_logger=logger)
    start, cpu = time.perf_counter(), time.process_time()
    futures = [engine.submit(noop) for _ in range(n)]
    concurrent.futures.wait(futures)
    if logger is not None:
        logger.close()  # the last records reach the file: part of the cost
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    args = parse_args(__doc__)
    n = 2_000 if args.quick else 20_000
    repeats = 3 if args.quick else 7
    workers = 2
    names = ('bare', 'engine', 'engine+records')
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    load_before = os.getloadavg()
    with (
        concurrent.futures.ThreadPoolExecutor(workers) as pool,
        tempfile.TemporaryDirectory() as tmp,
    ):
        bare(pool, 500)
        engine_run(pool, 500, None)
        for i in range(repeats):
            path = os.path.join(tmp, f'tasks{i}.jsonl')
            for name, (w, c) in (
                ('bare', bare(pool, n)),
                ('engine', engine_run(pool, n, None)),
                ('engine+records', engine_run(pool, n, path)),
            ):
                wall[name].append(w / n)
                cpu[name].append(c / n)
    wall_stats: dict[str, Any] = {k: summary(v) for k, v in wall.items()}
    cpu_stats: dict[str, Any] = {k: summary(v) for k, v in cpu.items()}
    base_wall = wall_stats['bare']['median']
    base_cpu = cpu_stats['bare']['median']
    rows = []
    for name in names:
        w, c = wall_stats[name]['median'], cpu_stats[name]['median']
        rows.append(
            [
                name,
                fmt_time(w),
                fmt_time(w - base_wall) if name != 'bare' else '-',
                fmt_time(c),
                fmt_time(c - base_cpu) if name != 'bare' else '-',
            ],
        )
    load = os.getloadavg()
    md = print_table(
        f'no-op tasks on a {workers}-thread pool (N={n}, {repeats} repeats, per task; '
        f'load {load_before[0]:.1f} -> {load[0]:.1f})',
        ['variant', 'wall', 'engine overhead (wall)', 'CPU', 'engine overhead (CPU)'],
        rows,
    )
    write_json(
        'taps_overhead',
        {
            'tasks': n,
            'repeats': repeats,
            'workers': workers,
            'load_average_before': load_before,
            'load_average': load,
            'per_task_seconds': wall_stats,
            'per_task_cpu_seconds': cpu_stats,
            'overhead_seconds': {
                'engine': wall_stats['engine']['median'] - base_wall,
                'engine+records': wall_stats['engine+records']['median'] - base_wall,
            },
            'overhead_cpu_seconds': {
                'engine': cpu_stats['engine']['median'] - base_cpu,
                'engine+records': cpu_stats['engine+records']['median'] - base_cpu,
            },
        },
        md,
    )


if __name__ == '__main__':
    main()
