"""Fixtures for the proxy-pattern tests: a Redis-backed store and real engines on loopback."""

from __future__ import annotations

import logging
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT, count_keys
from tests.parsl_env import parsl_environment

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def store(redis_client: Any, unique_prefix: str) -> Iterator[Any]:
    """A registered store over Redis whose keys all start with ``unique_prefix``."""
    from tether.connectors.redis import RedisConnector
    from tether.store import Store

    s = Store(
        f'patterns-{uuid.uuid4().hex[:8]}',
        RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix),
        register=True,
    )
    yield s
    if not s.closed:
        s.close()
    for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
        redis_client.delete(key)


@pytest.fixture
def keys(redis_client: Any, unique_prefix: str) -> Any:
    """Return a function counting this test's Redis keys."""
    return lambda: count_keys(redis_client, unique_prefix)


@pytest.fixture(scope='package')
def dask_cluster() -> Iterator[Any]:
    """A Dask LocalCluster with two process workers, shared by tests/patterns."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=':0',
        host='127.0.0.1',
    ) as cluster:
        yield cluster


@pytest.fixture
def dask_client(dask_cluster: Any) -> Iterator[Any]:
    from distributed import Client

    with Client(dask_cluster.scheduler_address) as client:
        yield client


@pytest.fixture(scope='package')
def process_pool() -> Iterator[Any]:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=2) as pool:
        yield pool


@pytest.fixture(scope='package')
def parsl_pool() -> Iterator[Any]:
    """A Parsl HighThroughputExecutor (local provider, loopback) behind a pool executor."""
    with parsl_environment() as run_dir:
        yield from _parsl_pool(run_dir)


def _parsl_pool(run_dir: pathlib.Path) -> Iterator[Any]:
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    from tether.plugins.parsl import ParslPoolExecutor

    config = Config(
        executors=[
            HighThroughputExecutor(
                label='htex',
                address='127.0.0.1',
                max_workers_per_node=2,
                provider=LocalProvider(init_blocks=1, max_blocks=1),
                encrypted=False,
            ),
        ],
        run_dir=str(run_dir),
        strategy='none',
    )
    pool = ParslPoolExecutor(config)
    yield pool
    # Parsl detaches the file handler of its run log at shutdown but never closes it.
    handlers = [
        h
        for name in ('parsl', 'concurrent.futures')
        for h in logging.getLogger(name).handlers
        if str(run_dir) in str(getattr(h, 'baseFilename', ''))
    ]
    pool.shutdown(wait=True)
    for handler in handlers:
        for name in ('parsl', 'concurrent.futures'):
            logging.getLogger(name).removeHandler(handler)
        handler.close()
