"""Small helpers shared by the benchmark scripts.

* timing: :func:`repeat` (median over repeats of one call), :func:`per_call` (median
  cost of one call of a fast operation), :func:`summary`;
* output: :func:`print_table` (rich, also returns the table as Markdown),
  :func:`write_json` (to ``benchmarks/results/<name>.json``), :func:`fmt_time`;
* :func:`process_cpu_s`: a process's user and system CPU seconds so far (``/proc``);
* :func:`parse_args` (``--quick``) and :func:`run_side`, which runs
  ``benchmarks/_harness.py`` for tether (this interpreter) or the peer (the peer venv's
  interpreter, built by ``benchmarks/peer_env.sh``) and returns its JSON.

Standard library only at import time (rich is imported when a table is printed), so the
peer venv's interpreter can import this module too.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, 'results')
PEER_ENV_SCRIPT = os.path.join(HERE, 'peer_env.sh')


def summary(samples: list[float]) -> dict[str, Any]:
    """Median, min, max, count and the samples themselves."""
    return {
        'median': statistics.median(samples),
        'min': min(samples),
        'max': max(samples),
        'n': len(samples),
        'samples': samples,
    }


def repeat(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> dict[str, Any]:
    """Time ``fn()`` ``repeats`` times (seconds) after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return summary(samples)


def _nothing() -> None:
    return None


def per_call(fn: Callable[[], Any], number: int, repeats: int) -> dict[str, Any]:
    """Seconds per call of a fast ``fn``: ``number`` calls per sample, loop cost removed."""
    overhead = float('inf')
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(number):
            _nothing()
        overhead = min(overhead, time.perf_counter() - t0)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append(max(time.perf_counter() - t0 - overhead, 0.0) / number)
    return summary(samples)


def fmt_time(seconds: float | None) -> str:
    """Format seconds as ns/us/ms/s with three significant digits."""
    if seconds is None:
        return '-'
    for unit, scale in (('s', 1.0), ('ms', 1e-3), ('us', 1e-6)):
        if seconds >= scale:
            return f'{seconds / scale:.3g} {unit}'
    return f'{seconds / 1e-9:.3g} ns'


def ratio(a: float | None, b: float | None) -> str:
    """``a/b`` formatted with two decimals (``-`` when either is missing)."""
    if a is None or b is None or b == 0:
        return '-'
    return f'{a / b:.2f}'


def parse_args(description: str | None) -> argparse.Namespace:
    """The common command line: ``--quick``, ``--no-peer``, ``--shared-redis``."""
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('--quick', action='store_true', help='fewer repeats and objects')
    parser.add_argument('--no-peer', action='store_true', help='run the tether side only')
    parser.add_argument(
        '--shared-redis',
        action='store_true',
        help='use the shared Redis at 127.0.0.1:6379 instead of a private redis-server',
    )
    return parser.parse_args()


@contextlib.contextmanager
def redis_server(shared: bool) -> Iterator[int]:
    """Yield the port of the Redis to benchmark against, exported as ``BENCH_REDIS_PORT``.

    By default a private ``redis-server`` (no persistence) on a free loopback port, so
    that other users of the shared server do not disturb the figures; ``shared`` uses
    127.0.0.1:6379.
    """
    if shared:
        os.environ['BENCH_REDIS_PORT'] = '6379'
        yield 6379
        return
    from tether.testing import RedisServer

    with RedisServer() as server:
        os.environ['BENCH_REDIS_PORT'] = str(server.port)
        yield server.port


def peer_python() -> str:
    """Path of the peer venv's python, creating the venv first if needed."""
    out = subprocess.run(
        ['bash', PEER_ENV_SCRIPT],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=1800,
    ).stdout
    return out.strip().splitlines()[-1]


def run_side(side: str, bench: str, quick: bool, timeout: float = 3600) -> dict[str, Any]:
    """Run ``_harness.py`` for ``side`` ('tether', 'peer' or 'raw') and return its JSON."""
    python = peer_python() if side == 'peer' else sys.executable
    cmd = [python, os.path.join(HERE, '_harness.py'), '--backend', side, bench]
    if quick:
        cmd.append('--quick')
    print(f'running {side} {bench} ...', file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, timeout=timeout)
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge several :func:`run_side` results: timings get the samples of all runs."""
    merged = {**runs[0], 'result': dict(runs[0]['result']), 'rounds': len(runs)}
    for key, value in runs[0]['result'].items():
        if isinstance(value, dict) and 'samples' in value:
            extra = {k: v for k, v in value.items() if k not in ('median', 'min', 'max', 'n')}
            extra.pop('samples')
            samples = [x for run in runs for x in run['result'][key]['samples']]
            merged['result'][key] = {**extra, **summary(samples)}
    return merged


def process_cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds used so far by process ``pid`` (Linux ``/proc``; raises
    ``OSError`` once the process is gone)."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()  # after the command name, which may hold ')'
    tick = os.sysconf('SC_CLK_TCK')
    return int(fields[11]) / tick, int(fields[12]) / tick


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Print a table with rich; return it as a Markdown table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify='left' if i == 0 else 'right')
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)
    lines = [
        '| ' + ' | '.join(columns) + ' |',
        '|' + '|'.join('---' if i == 0 else '---:' for i in range(len(columns))) + '|',
    ]
    lines += ['| ' + ' | '.join(row) + ' |' for row in rows]
    return '\n'.join(lines)


def machine() -> dict[str, Any]:
    """A short description of the machine the figures come from."""
    return {
        'python': platform.python_version(),
        'platform': platform.platform(),
        'cpus': os.cpu_count(),
        'loadavg': os.getloadavg(),
        'time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
    }


def write_json(name: str, data: dict[str, Any], markdown: str | None = None) -> str:
    """Write ``data`` (plus machine info) to ``benchmarks/results/<name>.json``.

    When ``markdown`` is given it is written beside it as ``<name>.md``.
    """
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f'{name}.json')
    with open(path, 'w') as f:
        json.dump({'machine': machine(), **data}, f, indent=1)
    if markdown is not None:
        with open(os.path.join(RESULTS, f'{name}.md'), 'w') as f:
            f.write(markdown + '\n')
    print(f'wrote {path}', file=sys.stderr)
    return path
