"""The function service's collector setting (``gc_young_threshold``) on one endpoint.

For each round, and each threshold in turn, a fresh ``tether faas serve`` (PostgreSQL +
RabbitMQ, ``_faas_stack.prod_stack``) with that setting and one endpoint: the median
round trip of 100 sequential no-op tasks and the throughput of 5,000 submitted at once
(``bench_faas``'s ``faas_latency`` and ``faas_throughput``). Alternating the settings
round by round spreads the machine's drift over all of them. The no-op function is
pickled by reference, so the endpoint's workers import it from this folder
(``PYTHONPATH`` is set to it for the processes the benchmark starts).

    .venv/bin/python benchmarks/bench_faas_gc.py [--rounds 6] [--thresholds 0,5000,20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import print_table, write_json
from _faas_stack import prod_stack
from bench_faas import faas_latency, faas_throughput


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--rounds', type=int, default=6)
    parser.add_argument('--thresholds', default='0,5000,20000')
    parser.add_argument('--tasks', type=int, default=5000, help='tasks of the batch')
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ['PYTHONPATH'] = os.pathsep.join(
        p for p in (here, os.environ.get('PYTHONPATH', '')) if p
    )
    thresholds = [int(x) for x in args.thresholds.split(',')]
    runs: dict[int, list[dict[str, float]]] = {t: [] for t in thresholds}
    for r in range(args.rounds):
        for t in thresholds:
            with prod_stack(more_settings=f'gc_young_threshold = {t}\n') as stack:
                run = {
                    'rtt_s': float(faas_latency(stack, 100)['median']),
                    'tasks_per_s': faas_throughput(stack, args.tasks),
                }
            runs[t].append(run)
            print(r, t, run, file=sys.stderr)
    results: dict[str, Any] = {'rounds': args.rounds, 'tasks': args.tasks, 'runs': runs}
    md = print_table(
        f'gc_young_threshold, one endpoint, medians of {args.rounds} rounds',
        ['threshold', 'round trip ms', 'batched tasks/s'],
        [
            [
                str(t),
                f'{1e3 * statistics.median(x["rtt_s"] for x in runs[t]):.2f}',
                f'{statistics.median(x["tasks_per_s"] for x in runs[t]):,.0f}',
            ]
            for t in thresholds
        ],
    )
    write_json('faas_gc', results, md)


if __name__ == '__main__':
    main()
