"""The main demo (``make demo`` / ``tether demo``): a process-pool pipeline, twice.

A three-stage pipeline runs on a :class:`~concurrent.futures.ProcessPoolExecutor` (no
server): stage 1 generates ``tasks`` arrays of ``size_mb`` MB each, stage 2 normalises
each array, stage 3 averages them. It runs once passing the arrays *by value* through the
executor (pickled into and out of the worker processes) and once passing *proxies* of
them, stored by a :class:`~tether.store.Store` over a
:class:`~tether.connectors.shared_memory.SharedMemoryConnector`. The stage functions are
the same plain NumPy functions in both runs: proxies are transparent.

For each run the demo counts the bytes that went through the executor (the pickled size
of every task's arguments and result, measured in the parent with pickle protocol 5 and
out-of-band buffers, so without copying) and the wall time, checks that both runs give
bit-identical results, and prints a table (or JSON with ``--json``). Every shared-memory
segment the demo makes is removed before it returns, also on errors and Ctrl-C.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import pickle
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from tether.store.config import StoreConfig

__all__ = ['combine', 'demo_command', 'generate', 'normalise', 'run_demo']

_MB = 1 << 20


# The three stages: plain NumPy code that works on arrays and on proxies of arrays alike.


def generate(index: int, n: int) -> Any:
    """Stage 1: a reproducible array of ``n`` float64 values."""
    import numpy as np

    return np.random.default_rng(index).standard_normal(n)


def normalise(x: Any) -> Any:
    """Stage 2: scale to zero mean and unit variance, then clip to three sigmas."""
    import numpy as np

    y = (x - x.mean()) / x.std()
    return np.clip(y, -3.0, 3.0)


def combine(*arrays: Any) -> Any:
    """Stage 3: the element-wise mean of the arrays."""
    import numpy as np

    out = np.zeros(len(arrays[0]))
    for a in arrays:
        out += a
    return out / len(arrays)


# What runs in the worker processes.


def _init_worker() -> None:
    """Let the parent handle Ctrl-C: it drains the pool, then removes the segments."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import numpy  # noqa: F401  (warm up: import before the timed runs)

    import tether.connectors.shared_memory  # noqa: F401


def _ready(_: int) -> bool:
    return True


def _task(fn: Callable[..., Any], args: tuple[Any, ...], config: StoreConfig | None) -> Any:
    """Run ``fn(*args)``; with a store config, return a proxy of the result instead."""
    result = fn(*args)
    if config is None:
        return result
    from tether.store import get_or_create_store

    store = get_or_create_store(config)
    # evict=True: the consumer's first resolve removes the segment (it keeps its mapping).
    return store.proxy(result, evict=True)


# What runs in the parent.


def _pickled_size(obj: Any) -> int:
    """Bytes ``obj`` pickles to (out-of-band buffers counted, not copied)."""
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return len(stream) + sum(b.raw().nbytes for b in buffers)


class _Run:
    """Submits the pipeline's tasks to a pool and counts the bytes it moves."""

    def __init__(
        self,
        pool: concurrent.futures.Executor,
        config: StoreConfig | None,
        advance: Callable[[], None],
    ) -> None:
        self.pool = pool
        self.config = config
        self.advance = advance
        self.bytes_in = 0
        self.bytes_out = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        self.bytes_in += _pickled_size((_task, fn, args, self.config))
        return self.pool.submit(_task, fn, args, self.config)

    def result(self, future: concurrent.futures.Future[Any]) -> Any:
        value = future.result()
        self.bytes_out += _pickled_size(value)
        self.advance()
        return value

    def pipeline(self, tasks: int, n: int) -> Any:
        stage1 = [self.submit(generate, i, n) for i in range(tasks)]
        order = {f: i for i, f in enumerate(stage1)}
        stage2: list[concurrent.futures.Future[Any] | None] = [None] * tasks
        for f in concurrent.futures.as_completed(stage1):
            # Start normalising each array as soon as it exists.
            stage2[order[f]] = self.submit(normalise, self.result(f))
        del stage1, order
        normalised = [self.result(f) for f in stage2 if f is not None]
        del stage2
        final = self.result(self.submit(combine, *normalised))
        del normalised
        if self.config is not None:
            from tether.proxy import extract

            final = extract(final)
        return final


def _shm_segments(namespace: str) -> int:
    import os

    from tether.connectors.shared_memory import SHM_DIR

    prefix = f'tether-{namespace}-'
    return sum(1 for name in os.listdir(SHM_DIR) if name.startswith(prefix))


@contextmanager
def _progress(enabled: bool, tasks: int) -> Iterator[Callable[[str], Callable[[], None]]]:
    """Yield ``start(label) -> advance()``; a transient rich progress bar when enabled."""
    if not enabled:
        yield lambda label: lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        '[progress.description]{task.description}',
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as progress:

        def start(label: str) -> Callable[[], None]:
            task_id = progress.add_task(label, total=2 * tasks + 1)
            return lambda: progress.advance(task_id)

        yield start


def run_demo(
    *,
    size_mb: int = 32,
    tasks: int = 8,
    workers: int = 2,
    as_json: bool = False,
    progress: bool = True,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Run the pipeline by value and by proxy, print the comparison, and return it.

    Args:
        size_mb: Size of each array in MB.
        tasks: Arrays generated (and normalised) per run.
        workers: Worker processes of the pool.
        as_json: Print JSON instead of a table.
        progress: Show a progress bar while running (never with ``as_json``).
        namespace: Shared-memory namespace for the proxied arrays (default: a fresh
            one); every segment of it is removed before returning.

    Returns:
        The results printed: per run the bytes into and out of the workers and the
        seconds taken, the speed-up, whether both runs agree, the shared-memory
        namespace used and the segments of it left afterwards (always 0).
    """
    try:
        import numpy as np
    except ImportError as e:  # pragma: no cover - numpy is in the dev install
        raise click.ClickException('the demo needs NumPy: pip install "tether[numpy]"') from e

    from tether.connectors.shared_memory import SharedMemoryConnector, cleanup
    from tether.store import Store

    if size_mb < 1 or tasks < 1 or workers < 1:
        raise click.BadParameter('size-mb, tasks and workers must be at least 1')
    n = size_mb * _MB // 8
    namespace = namespace or f'demo{uuid.uuid4().hex[:12]}'
    try:
        connector = SharedMemoryConnector(namespace)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    runs: dict[str, dict[str, Any]] = {}
    finals: dict[str, Any] = {}
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context('spawn'),
        initializer=_init_worker,
    )
    try:
        with (
            Store(f'tether-demo-{namespace}', connector, register=True) as store,
            _progress(progress and not as_json, tasks) as start,
        ):
            # Start every worker before timing anything.
            list(pool.map(_ready, range(workers * 4)))
            for mode, config in (('value', None), ('proxy', store.config())):
                run = _Run(pool, config, start(f'by {mode}'))
                t0 = time.perf_counter()
                finals[mode] = run.pipeline(tasks, n)
                seconds = time.perf_counter() - t0
                runs[mode] = {
                    'bytes_to_workers': run.bytes_in,
                    'bytes_from_workers': run.bytes_out,
                    'bytes_total': run.bytes_in + run.bytes_out,
                    'seconds': seconds,
                }
    finally:
        # On Ctrl-C or an error: drop queued tasks, let running ones finish (workers
        # ignore SIGINT), then remove every segment of the demo's namespace.
        pool.shutdown(wait=True, cancel_futures=True)
        cleanup(namespace)
    identical = bool(np.array_equal(finals['value'], finals['proxy']))
    result: dict[str, Any] = {
        'size_mb': size_mb,
        'tasks': tasks,
        'workers': workers,
        'runs': runs,
        'speedup': runs['value']['seconds'] / runs['proxy']['seconds'],
        'bytes_ratio': runs['value']['bytes_total'] / runs['proxy']['bytes_total'],
        'identical': identical,
        'checksum': float(np.sum(finals['proxy'])),
        'shm_namespace': namespace,
        'shm_leftovers': _shm_segments(namespace),
    }
    _report(result, as_json)
    return result


def _human(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ('B', 'KB', 'MB', 'GB'):
        if value < 1024 or unit == 'GB':
            return f'{value:.0f} {unit}' if unit == 'B' else f'{value:.1f} {unit}'
        value /= 1024
    raise AssertionError('unreachable')  # pragma: no cover


def _report(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    runs = result['runs']
    table = Table(
        title=(
            f'{result["tasks"]} arrays of {result["size_mb"]} MB, generate -> normalise -> '
            f'average, {result["workers"]} worker processes'
        ),
    )
    table.add_column('pass arrays')
    table.add_column('bytes through the executor', justify='right')
    table.add_column('time (s)', justify='right')
    table.add_column('speed-up', justify='right')
    for mode, label in (('value', 'by value'), ('proxy', 'by proxy (shared memory)')):
        r = runs[mode]
        speedup = runs['value']['seconds'] / r['seconds']
        table.add_row(label, _human(r['bytes_total']), f'{r["seconds"]:.2f}', f'{speedup:.2f}x')
    console = Console()
    console.print(table)
    verdict = '[green]identical[/green]' if result['identical'] else '[red]DIFFERENT[/red] (bug!)'
    console.print(
        f'Results of both runs: {verdict} (checksum {result["checksum"]:.6f}). '
        f'By proxy, {result["bytes_ratio"]:,.0f}x fewer bytes went through the executor; '
        'the arrays went through /dev/shm instead '
        f'({result["shm_leftovers"]} segments left there now).',
    )


@click.command('demo')
@click.option('--size-mb', default=32, show_default=True, help='Size of each array (MB).')
@click.option('--tasks', default=8, show_default=True, help='Tasks in each stage.')
@click.option('--workers', default=2, show_default=True, help='Worker processes.')
@click.option('--json', 'as_json', is_flag=True, help='Print the results as JSON.')
@click.option(
    '--namespace',
    default=None,
    help='Shared-memory namespace (default: a fresh one); removed when the demo ends.',
)
def demo_command(
    size_mb: int,
    tasks: int,
    workers: int,
    as_json: bool,
    namespace: str | None,
) -> None:
    """Run the main demo: a process-pool pipeline, by value and by proxy."""
    run_demo(
        size_mb=size_mb,
        tasks=tasks,
        workers=workers,
        as_json=as_json,
        namespace=namespace,
    )
