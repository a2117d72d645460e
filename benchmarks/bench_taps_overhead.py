"""The bench engine's own overhead per task, against the bare executor (issue 12).

Submits N no-op tasks to a ThreadPoolExecutor directly, then through
``tether.bench.engine.Engine`` (without records, and with JSON records written to a
file), waits for all of them, and reports the extra time per task. Target: under 50 us
per task on the thread pool. The three variants alternate within each repeat, so that
changes in the machine's load hit them alike; medians over repeats.

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


def bare(pool: concurrent.futures.ThreadPoolExecutor, n: int) -> float:
    start = time.perf_counter()
    futures = [pool.submit(noop) for _ in range(n)]
    concurrent.futures.wait(futures)
    return time.perf_counter() - start


def engine_run(pool: concurrent.futures.ThreadPoolExecutor, n: int, records: str | None) -> float:
    logger = JSONRecordLogger(records) if records else None
    engine = Engine(pool, record_logger=logger)
    start = time.perf_counter()
    futures = [engine.submit(noop) for _ in range(n)]
    concurrent.futures.wait(futures)
    elapsed = time.perf_counter() - start
    if logger is not None:
        logger.close()
    return elapsed


def main() -> None:
    args = parse_args(__doc__)
    n = 2_000 if args.quick else 20_000
    repeats = 3 if args.quick else 7
    workers = 2
    samples: dict[str, list[float]] = {'bare': [], 'engine': [], 'engine+records': []}
    with (
        concurrent.futures.ThreadPoolExecutor(workers) as pool,
        tempfile.TemporaryDirectory() as tmp,
    ):
        bare(pool, 500)
        engine_run(pool, 500, None)
        for i in range(repeats):
            samples['bare'].append(bare(pool, n) / n)
            samples['engine'].append(engine_run(pool, n, None) / n)
            path = os.path.join(tmp, f'tasks{i}.jsonl')
            samples['engine+records'].append(engine_run(pool, n, path) / n)
    stats: dict[str, Any] = {k: summary(v) for k, v in samples.items()}
    base = stats['bare']['median']
    rows = []
    for name, s in stats.items():
        extra = s['median'] - base
        rows.append([name, fmt_time(s['median']), fmt_time(extra) if name != 'bare' else '-'])
    md = print_table(
        f'no-op tasks on a {workers}-thread pool (N={n}, {repeats} repeats, per task)',
        ['variant', 'time per task', 'engine overhead per task'],
        rows,
    )
    load = os.getloadavg()
    write_json(
        'taps_overhead',
        {
            'tasks': n,
            'repeats': repeats,
            'workers': workers,
            'load_average': load,
            'per_task_seconds': stats,
            'overhead_seconds': {
                'engine': stats['engine']['median'] - base,
                'engine+records': stats['engine+records']['median'] - base,
            },
        },
        md,
    )


if __name__ == '__main__':
    main()
