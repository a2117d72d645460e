"""Parsl task server start-up: seconds from ``start()`` to the first result, and to stop.

Colmena's own tests give a Parsl task server 10 s to start, run a task and stop. The
task server runs one HighThroughputExecutor block of one worker (tether's
``local_config``, initial blocks only), as Colmena's ``test_retry.py`` does. Each round
runs it twice, alternating: as tether runs it (the kernel's first scaling poll made at
start, ``scale_out_now``) and with that call skipped (Parsl's own poller then launches
the block at its second poll, ``strategy_period`` = 5 s after the kernel started). The
load average is recorded with each sample: on 2 shared cores it moves the figures more
than anything measured here.

Usage: python benchmarks/bench_parsl_task_server_start.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import print_table, write_json  # noqa: E402


def one_start(first_poll: bool) -> dict[str, float]:
    import tether.steer.task_server.parsl as parsl_server
    from tether.plugins.parsl import local_config
    from tether.steer.queue.python import PipeQueues

    original = parsl_server.scale_out_now
    if not first_poll:
        parsl_server.scale_out_now = lambda dfk: None  # the server forks with this
    try:
        with tempfile.TemporaryDirectory(prefix='bench-parsl-start-') as run_dir:
            queues = PipeQueues()
            server = parsl_server.ParslTaskServer(
                [abs],
                queues,
                local_config(workers=1, run_dir=run_dir),
            )
            start = time.perf_counter()
            server.start()
            queues.send_inputs(-1, method='abs')
            result = queues.get_result(timeout=300)
            first = time.perf_counter() - start
            queues.send_kill_signal()
            server.join(60)
            stopped = time.perf_counter() - start
    finally:
        parsl_server.scale_out_now = original
    if result is None or not result.success:
        raise RuntimeError(f'the task failed: {result}')
    return {'first_result_s': first, 'stopped_s': stopped, 'load1': os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {'first_poll': [], 'parsl_poller_only': []}
    for _ in range(args.rounds):
        samples['first_poll'].append(one_start(True))
        samples['parsl_poller_only'].append(one_start(False))
    rows = []
    out: dict[str, Any] = {'rounds': args.rounds, 'samples': samples}
    for name, runs in samples.items():
        first = statistics.median(r['first_result_s'] for r in runs)
        stopped = statistics.median(r['stopped_s'] for r in runs)
        load = statistics.median(r['load1'] for r in runs)
        out[name] = {'first_result_median_s': first, 'stopped_median_s': stopped}
        rows.append([name, f'{first:.2f} s', f'{stopped:.2f} s', f'{load:.1f}'])
    table = print_table(
        'Parsl task server: start to first result, and to stopped (medians)',
        ['variant', 'first result', 'stopped', 'load average'],
        rows,
    )
    write_json('parsl_task_server_start', out, table)


if __name__ == '__main__':
    main()
