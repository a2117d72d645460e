"""Warming-aware routing against random routing, the funcX paper's experiment scaled down.

Ten functions, each in a module whose import takes ``--init`` seconds (standing in for a
container start or a model load: a worker pays it once per function, a *cold start*),
each call ``--work`` seconds. A batch of ``--tasks`` calls, each function drawn uniformly,
goes to the ``managers`` engine: ``--managers`` managers of ``--workers`` workers. The
paper's uniform batch, and a skewed one (half the tasks call one function), under three
routings, alternated ``--repeats`` times in one invocation:

* ``warm``: a manager with room takes the oldest waiting task whose function it has warm
  (prefetch bounded to ``workers + 1`` per manager);
* ``random``: each task to a random manager with room (same bound);
* ``warm, unbounded prefetch``: warm routing, but every task handed to a manager at
  submission (prefetch as large as the batch): the functions are shared out among the
  managers before anything runs, and a manager that runs out of work cannot take over
  another's.

Completion time is from the batch's submission to its last result; the workers are
started (and idle) before. Sleep-bound on purpose (``time.sleep``): the 2 cores this
machine shares with other jobs do not decide the figures.

    .venv/bin/python benchmarks/bench_faas_warm.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import os
import queue
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Literal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import print_table, write_json

FUNCTIONS = 10

MODULE = """import time

time.sleep({init})  # the function's initialisation: a container start, a model load


def run(x):
    time.sleep({work})
    return x
"""


def make_functions(folder: str, init: float, work: float) -> list[Any]:
    """Ten functions in modules of their own under ``folder`` (on ``sys.path``); imported
    here without their initialisation (the workers pay it)."""
    functions = []
    for k in range(FUNCTIONS):
        name = f'warm_fn_{k}'
        with open(os.path.join(folder, f'{name}.py'), 'w') as f:
            f.write(MODULE.format(init=init, work=work))
    sys.path.insert(0, folder)
    real_sleep = time.sleep
    time.sleep = lambda s: None
    try:
        for k in range(FUNCTIONS):
            functions.append(importlib.import_module(f'warm_fn_{k}').run)
    finally:
        time.sleep = real_sleep
    return functions


def run_batch(
    functions: list[Any],
    plan: list[int],
    *,
    managers: int,
    workers: int,
    routing: Literal['warm', 'random'],
    prefetch: int,
) -> dict[str, Any]:
    from tether.faas import ComputeEndpointConfig
    from tether.faas.endpoint._managers import ManagersEngine
    from tether.faas.endpoint.engine import make_task

    results: queue.Queue[dict[str, Any]] = queue.Queue()
    config = ComputeEndpointConfig(
        name='bench',
        endpoint_id='bench',
        service_url='http://127.0.0.1:1',
        engine='managers',
        managers=managers,
        max_workers=workers,
        worker_prefetch=prefetch,
        routing=routing,
        max_retries=0,
    )
    engine = ManagersEngine(config, lambda ids: None, lambda h, p: results.put(h), seed=1)
    engine.start()
    try:
        deadline = time.monotonic() + 120
        while engine.stats()['workers'] < managers * workers:  # started, not yet timed
            if time.monotonic() > deadline:
                raise RuntimeError('the workers did not start')
            time.sleep(0.05)
        tasks = [make_task(functions[k], i) for i, k in enumerate(plan)]
        t0 = time.perf_counter()
        engine.submit(tasks)
        for _ in tasks:
            header = results.get(timeout=600)
            if header['status'] != 'success':
                raise RuntimeError(f'task failed: {header}')
        elapsed = time.perf_counter() - t0
        return {'seconds': elapsed, 'cold_starts': engine.cold_starts}
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer tasks and repeats')
    parser.add_argument('--managers', type=int, default=4)
    parser.add_argument('--workers', type=int, default=2, help='workers per manager')
    parser.add_argument('--tasks', type=int, default=300)
    parser.add_argument('--init', type=float, default=0.5, help='seconds of a cold start')
    parser.add_argument('--work', type=float, default=0.05, help='seconds of a call')
    parser.add_argument('--repeats', type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.repeats = 100, 1

    folder = tempfile.mkdtemp(prefix='tether-warm-fns-')
    functions = make_functions(folder, args.init, args.work)
    rng = random.Random(2026)
    plans = {
        'uniform': [rng.randrange(FUNCTIONS) for _ in range(args.tasks)],
        # Half the tasks call one function: a manager given it up front cannot share it.
        'skewed': [
            0 if rng.random() < 0.5 else rng.randrange(FUNCTIONS) for _ in range(args.tasks)
        ],
    }
    variants: list[tuple[str, Literal['warm', 'random'], int]] = [
        ('warm', 'warm', 1),
        ('random', 'random', 1),
        ('warm, unbounded prefetch', 'warm', args.tasks),
    ]
    runs: dict[str, list[dict[str, Any]]] = {
        f'{w}: {name}': [] for w in plans for name, _, _ in variants
    }
    load: list[float] = []
    started = time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())
    for r in range(args.repeats):
        for workload, plan in plans.items():
            for name, routing, prefetch in variants:
                load.append(os.getloadavg()[0])
                out = run_batch(
                    functions,
                    plan,
                    managers=args.managers,
                    workers=args.workers,
                    routing=routing,
                    prefetch=prefetch,
                )
                runs[f'{workload}: {name}'].append(out)
                print(
                    f'repeat {r + 1}: {workload:8s} {name:26s} {out["seconds"]:7.2f} s, '
                    f'{out["cold_starts"]:3d} cold starts',
                    file=sys.stderr,
                )
    ended = time.strftime('%H:%M:%S', time.gmtime())
    rows = []
    for workload in plans:
        base = statistics.median(x['seconds'] for x in runs[f'{workload}: random'])
        for name, _, _ in variants:
            seconds = [x['seconds'] for x in runs[f'{workload}: {name}']]
            colds = [x['cold_starts'] for x in runs[f'{workload}: {name}']]
            rows.append(
                [
                    workload,
                    name,
                    f'{statistics.median(seconds):.2f} s ({min(seconds):.2f}-{max(seconds):.2f})',
                    f'{statistics.median(colds):.0f} ({min(colds)}-{max(colds)})',
                    f'{statistics.median(seconds) / base:.2f}',
                ]
            )
    title = (
        f'{args.tasks} tasks of {FUNCTIONS} functions (cold start {args.init} s, call '
        f'{args.work} s), {args.managers} managers x {args.workers} workers, '
        f'{args.repeats} alternated repeats, {started}-{ended} UTC, load '
        f'{min(load):.1f}-{max(load):.1f}'
    )
    markdown = print_table(
        title,
        ['batch', 'routing', 'completion (median, range)', 'cold starts', 'vs random'],
        rows,
    )
    write_json(
        'faas_warm',
        {'args': vars(args), 'runs': runs, 'load': load, 'started': started},
        markdown=f'{title}\n\n{markdown}',
    )


if __name__ == '__main__':
    main()
