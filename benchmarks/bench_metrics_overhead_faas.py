"""Overhead of Prometheus metrics on the function service's no-op round trip.

Two stacks run side by side, each in its own process: a dev-mode service (SQLite and
in-process queues) and one endpoint agent with a process pool; one has metrics on (the
service's and the agent's endpoints), the other off. One client (this process) times
no-op round trips (``Executor.submit(noop).result()``, one at a time) to each in
alternating rounds, so that the machine's load hits both alike. Prints a table and
writes JSON.

    .venv/bin/python benchmarks/bench_metrics_overhead_faas.py --rounds 10 --tasks 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tether.faas import Executor

CHILD = r"""
import asyncio, json, sys
from tether._serve.metrics import MetricsOptions
from tether.faas import ServiceConfig
from tether.faas._config import ComputeEndpointConfig
from tether.faas._server import ServiceThread
from tether.faas.endpoint._agent import Agent

on = sys.argv[1] == 'on'
metrics = MetricsOptions(port=0) if on else MetricsOptions()
service = ServiceThread(
    ServiceConfig(port=0, database='sqlite://', broker='memory://', metrics=metrics)
)
service.start()
repo = service.service.repo
user, token = service.call(repo.create_user('bench'))
endpoint_id, endpoint_token = service.call(repo.add_endpoint(user, 'bench'))
config = ComputeEndpointConfig(
    name='bench', endpoint_id=endpoint_id, service_url=service.url, max_workers=1,
    min_workers=1, metrics=metrics,
)

async def main():
    stop = asyncio.Event()
    agent = Agent(config, endpoint_token)
    run = asyncio.ensure_future(agent.run(stop))
    await agent.connected.wait()
    print(json.dumps({'url': service.url, 'token': token, 'endpoint_id': endpoint_id}))
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    stop.set()
    await run

asyncio.run(main())
service.stop()
"""


def noop() -> None:
    """The task."""


def _round(ex: Executor, tasks: int) -> float:
    start = time.perf_counter()
    for _ in range(tasks):
        ex.submit(noop).result(timeout=60)
    return (time.perf_counter() - start) / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--tasks', type=int, default=200)
    parser.add_argument('--json', default='benchmarks/results/metrics_overhead_faas.json')
    args = parser.parse_args()
    procs: dict[str, subprocess.Popen[str]] = {}
    infos: dict[str, dict[str, Any]] = {}
    try:
        for mode in ('off', 'on'):
            proc = subprocess.Popen(
                [sys.executable, '-c', CHILD, mode],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)},
            )
            procs[mode] = proc
            assert proc.stdout is not None
            infos[mode] = json.loads(proc.stdout.readline())
        executors = {
            m: Executor(i['endpoint_id'], service_url=i['url'], token=i['token'])
            for m, i in infos.items()
        }
        for ex in executors.values():
            _round(ex, 20)  # warm up: the function registered, the worker warm
        times: dict[str, list[float]] = {'off': [], 'on': []}
        for _ in range(args.rounds):
            for mode in ('off', 'on'):
                times[mode].append(_round(executors[mode], args.tasks))
        for ex in executors.values():
            ex.shutdown()
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = statistics.median(on / off for on, off in zip(times['on'], times['off'], strict=True))
    print(f'function service no-op round trip, {args.rounds} alternating rounds of {args.tasks}')
    print(f'{"metrics":8} {"median ms":>10} {"min/median":>11} {"max/median":>11}')
    for k in ('off', 'on'):
        print(
            f'{k:8} {med[k] * 1e3:10.3f} {min(times[k]) / med[k]:11.3f} '
            f'{max(times[k]) / med[k]:11.3f}'
        )
    print(
        f'on/off: ratio of medians {med["on"] / med["off"]:.3f}, median paired ratio {paired:.3f}'
    )
    result = {
        'args': vars(args),
        'seconds_per_task': times,
        'median': med,
        'ratio_on_off': med['on'] / med['off'],
        'paired_ratio_on_off': paired,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == '__main__':
    main()
