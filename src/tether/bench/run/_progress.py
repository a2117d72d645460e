"""The live progress display of a run (tasks submitted, waiting, running, done, failed)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tether.bench.engine import EngineStats

__all__ = ['format_stats', 'progress']


def format_stats(stats: EngineStats, elapsed: float) -> str:
    """One line: the counts of an engine and the elapsed time."""
    return (
        f'tasks: {stats.submitted} submitted, {stats.waiting} waiting, '
        f'{stats.running} running, {stats.completed} done, {stats.failed} failed '
        f'[{elapsed:.1f} s]'
    )


@contextlib.contextmanager
def progress(
    stats: Callable[[], EngineStats | None],
    *,
    enabled: bool,
    stream: Any = None,
    interval: float = 0.25,
) -> Iterator[None]:
    """Show ``stats()`` live on ``stream`` (standard error) while the block runs."""
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(file=stream or sys.stderr)
    start = time.perf_counter()
    stop = threading.Event()

    def render() -> Text:
        current = stats()
        if current is None:
            return Text(f'starting the executor [{time.perf_counter() - start:.1f} s]')
        return Text(format_stats(current, time.perf_counter() - start))

    with Live(render(), console=console, refresh_per_second=8, transient=False) as live:

        def loop() -> None:
            while not stop.wait(interval):
                live.update(render())

        thread = threading.Thread(target=loop, name='tether-bench-progress', daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            live.update(render())
