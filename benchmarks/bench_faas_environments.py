"""Function service, per-function environments: the process-pool engine's no-op round trip
and throughput in its default environment and in a second virtual environment, in the
same run, plus what an environment costs once (its probe, its first worker).

The second environment is made here (``python -m venv --without-pip`` plus a ``.pth``
file that adds this environment's site-packages: no network). Tasks go straight to the
engine (no service, no broker): what differs between environments is the worker pool.

    .venv/bin/python benchmarks/bench_faas_environments.py [--quick]

With ``BENCH_DEFAULT_ONLY=1`` only the default environment runs (and no ``environments``
table is configured), so the same script measures a tree from before environments
existed: ``PYTHONPATH=<that tree>/src`` (how the before/after figures of
``docs/performance.md`` were taken).
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args, print_table, write_json


def noop() -> None:
    return None


def make_venv(root: pathlib.Path) -> pathlib.Path:
    venv = root / 'second'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    purelib = subprocess.run(
        [
            str(venv / 'bin' / 'python'),
            '-c',
            'import sysconfig; print(sysconfig.get_paths()["purelib"])',
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()['purelib']
    (pathlib.Path(purelib) / 'bench.pth').write_text(f'import site; site.addsitedir({ours!r})\n')
    return venv


class Results:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.done: dict[str, Any] = {}

    def on_result(self, header: dict[str, Any], payload: bytes) -> None:
        with self.lock:
            self.done[header['task_id']] = header
            self.lock.notify_all()

    def wait(self, ids: list[str], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not all(i in self.done for i in ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError('tasks did not finish')
                self.lock.wait(left)
        for i in ids:
            if self.done[i]['status'] != 'success':
                raise RuntimeError(f'task failed: {self.done[i]}')


def run_side(environment: str, venv: pathlib.Path, n_lat: int, n_tp: int) -> dict[str, Any]:
    from tether.faas import EndpointConfig
    from tether.faas.endpoint._pool import ProcessPoolEngine
    from tether.faas.endpoint.engine import make_task

    config = EndpointConfig(
        name='bench',
        endpoint_id='bench',
        service_url='http://127.0.0.1:1',
        max_workers=2,
        **({'environments': {'second': {'python': str(venv)}}} if environment else {}),
    )
    results = Results()
    engine = ProcessPoolEngine(config, lambda ids: None, results.on_result)
    engine.start()

    def task() -> Any:
        t = make_task(noop)
        if environment:
            t.environment = environment
        return t

    try:
        t0 = time.perf_counter()
        first = task()
        engine.submit([first])
        results.wait([first.task_id])
        cold = time.perf_counter() - t0
        for _ in range(20):
            t = task()
            engine.submit([t])
            results.wait([t.task_id])
        samples = []
        for _ in range(n_lat):
            t = task()
            t0 = time.perf_counter()
            engine.submit([t])
            results.wait([t.task_id])
            samples.append(time.perf_counter() - t0)
        batch = [task() for _ in range(n_tp)]
        t0 = time.perf_counter()
        engine.submit(batch)
        results.wait([t.task_id for t in batch])
        throughput = n_tp / (time.perf_counter() - t0)
    finally:
        engine.stop()
    return {
        'first_task_s': cold,
        'median_s': statistics.median(samples),
        'p95_s': sorted(samples)[int(0.95 * len(samples))],
        'throughput': throughput,
    }


def main() -> None:
    args = parse_args(__doc__)
    n_lat = 100 if args.quick else 500
    n_tp = 2000 if args.quick else 10000
    rounds = 1 if args.quick else 3
    load_before = os.getloadavg()
    default_only = os.environ.get('BENCH_DEFAULT_ONLY') == '1'
    probe_s = 0.0
    runs: dict[str, list[dict[str, Any]]] = {'default': [], 'second': []}
    with tempfile.TemporaryDirectory(prefix='tfenv-') as tmp:
        venv = pathlib.Path(tmp)
        if not default_only:
            from tether.faas.endpoint._environments import probe

            venv = make_venv(venv)
            t0 = time.perf_counter()
            info = probe('second', {'second': _env(venv)})
            probe_s = time.perf_counter() - t0
            assert 'error' not in info, info
        for _ in range(rounds):  # alternated: the machine's load drifts
            runs['default'].append(run_side('', venv, n_lat, n_tp))
            if not default_only:
                runs['second'].append(run_side('second', venv, n_lat, n_tp))
    results: dict[str, Any] = {
        'n_latency': n_lat,
        'n_throughput': n_tp,
        'rounds': rounds,
        'probe_s': probe_s,
        'runs': runs,
        'load': {'before': load_before, 'after': os.getloadavg()},
    }
    rows = []
    for name, label in (('default', 'default environment'), ('second', 'second venv')):
        r = runs[name]
        if not r:
            continue
        rows.append(
            [
                label,
                f'{statistics.median(x["first_task_s"] for x in r) * 1e3:.0f}',
                f'{statistics.median(x["median_s"] for x in r) * 1e3:.3f}',
                f'{statistics.median(x["p95_s"] for x in r) * 1e3:.3f}',
                f'{statistics.median(x["throughput"] for x in r):,.0f}',
            ]
        )
    md = print_table(
        'Process-pool engine, no-op tasks, by environment (medians of the rounds)',
        ['environment', 'first task ms', 'round trip ms', 'p95 ms', 'tasks/s'],
        rows,
    )
    md += (
        f'\n\nprobe of the second environment: {probe_s * 1e3:.0f} ms; {rounds} alternated '
        f'round(s) of {n_lat} sequential and {n_tp} batched tasks; load average before '
        f'{load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}'
    )
    write_json('faas_environments_default' if default_only else 'faas_environments', results, md)


def _env(venv: pathlib.Path) -> Any:
    from tether.faas.endpoint._environments import EnvironmentConfig

    return EnvironmentConfig(python=str(venv))


if __name__ == '__main__':
    main()
