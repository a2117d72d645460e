"""Shared helpers of the proxy-pattern benchmarks (private Redis, Dask cluster, output)."""

from __future__ import annotations

import json
import pathlib
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

RESULTS = pathlib.Path(__file__).parent / 'results'


@contextmanager
def private_redis() -> Iterator[tuple[int, int]]:
    """Start a Redis server of our own on a free loopback port; yield (port, pid)."""
    from tether.testing import RedisServer

    with RedisServer() as server:
        yield server.port, server.pid


@contextmanager
def dask_cluster(n_workers: int) -> Iterator[Any]:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=':0',
        host='127.0.0.1',
        memory_limit=0,
    ) as cluster:
        yield cluster


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def write_json(name: str, payload: dict[str, Any]) -> pathlib.Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f'{name}.json'
    path.write_text(json.dumps(payload, indent=2))
    return path


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for h in header:
        table.add_column(h, justify='right')
    for row in rows:
        table.add_row(*(f'{v:.3f}' if isinstance(v, float) else str(v) for v in row))
    Console().print(table)


def _warm(store_config: Any) -> None:
    from tether.store import get_or_create_store

    store = get_or_create_store(store_config)
    key = store.put(b'warm-up')
    store.get(key)
    store.evict(key)


def warm_workers(client: Any, store: Any) -> None:
    """Build the store (imports, connection pool) in every worker before measuring."""
    client.run(_warm, store.config())
