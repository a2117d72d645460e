"""Fixtures of the benchmark-suite tests: one cluster of each executor for tests/bench.

Engines built on these executors must not shut them down, so each is handed over
"borrowed" (its ``shutdown`` does nothing); the package fixture shuts it down when
tests/bench ends (no cluster's threads outlive it into later tests that fork).
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXECUTORS = ('thread-pool', 'process-pool', 'dask', 'parsl', 'ray', 'faas')
# Seconds the local Ray node may take to start; the first test on Ray waits for it.
RAY_START_TIMEOUT = 600


class Borrowed(concurrent.futures.Executor):
    """An executor whose shutdown is left to its owner (the session fixture)."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.native_dataflow = getattr(executor, 'native_dataflow', False)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


@pytest.fixture(scope='package')
def process_pool() -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    with concurrent.futures.ProcessPoolExecutor(
        2,
        mp_context=multiprocessing.get_context('spawn'),
    ) as pool:
        yield pool


@pytest.fixture(scope='package')
def dask_client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address='127.0.0.1:0',
            host='127.0.0.1',
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope='package')
def parsl_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tether.bench.executor.parsl import ParslLocalConfig

    old = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    executor = ParslLocalConfig(
        workers=1,
        run_dir=str(tmp_path_factory.mktemp('parsl')),
    ).get_executor()
    yield executor
    executor.shutdown()
    if old is None:
        os.environ.pop('PYTHONPATH', None)
    else:
        os.environ['PYTHONPATH'] = old


@pytest.fixture(scope='package')
def ray_executor() -> Iterator[concurrent.futures.Executor]:
    """The ``ray`` plugin's executor: a local Ray node of 1 CPU of its own."""
    from tether.bench.executor.ray import RayConfig

    # Ray's workers inherit the node's environment (they import the test modules by
    # name); a runtime_env with the same variable made the workers wait for Ray's agent.
    old = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    try:
        # The node is started again until it registers (up to RAY_START_TIMEOUT on a
        # loaded machine); one that never does fails the tests that need it.
        executor = RayConfig(num_cpus=1, start_timeout=RAY_START_TIMEOUT).get_executor()
    finally:
        if old is None:
            os.environ.pop('PYTHONPATH', None)
        else:
            os.environ['PYTHONPATH'] = old
    yield executor
    executor.shutdown()  # stops the node


@pytest.fixture(scope='package')
def faas_local() -> Iterator[Any]:
    """Tether's function service and one endpoint of 1 worker, in this process."""
    from tether.bench.executor.faas import InProcessFaas

    # The endpoint's workers get this process's sys.path (they import the test modules).
    local = InProcessFaas(1)
    yield local
    local.stop()


@pytest.fixture(scope='package')
def bench_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """A running tether endpoint named 'bench' (no relay); yields its home folder."""
    from tether.endpoint import EndpointConfig, start_endpoint, stop_endpoint

    home = tmp_path_factory.mktemp('endpoint-home')
    EndpointConfig.create('bench', home, storage={'memory': '256MB'})
    start_endpoint('bench', home)
    yield home
    stop_endpoint('bench', home)


@pytest.fixture
def make_executor(request: pytest.FixtureRequest) -> Callable[[str], concurrent.futures.Executor]:
    """Return a function giving a borrowed session executor by name."""

    def make(name: str) -> concurrent.futures.Executor:
        if name == 'thread-pool':
            return concurrent.futures.ThreadPoolExecutor(2)
        if name == 'process-pool':
            return Borrowed(request.getfixturevalue('process_pool'))
        if name == 'dask':
            from tether.bench.executor.dask import DaskDistributedExecutor

            client = request.getfixturevalue('dask_client')
            return DaskDistributedExecutor(client, close_client=False)
        if name == 'parsl':
            return Borrowed(request.getfixturevalue('parsl_executor'))
        if name == 'ray':
            return Borrowed(request.getfixturevalue('ray_executor'))
        if name == 'faas':
            from tether.bench.executor.faas import FaasExecutor
            from tether.faas import Executor

            local = request.getfixturevalue('faas_local')
            return FaasExecutor(
                Executor(local.endpoint_id, service_url=local.url, token=local.token),
            )
        raise ValueError(name)

    return make


@pytest.fixture
def redis_store_options(redis_client: Any) -> Iterator[dict[str, Any]]:
    """Options of a RedisConnector under a unique prefix; checks that nothing is left."""
    prefix = f'tether-test-bench-{uuid.uuid4().hex[:8]}:'
    yield {'hostname': REDIS_HOST, 'port': REDIS_PORT, 'prefix': prefix}
    leftover = list(redis_client.scan_iter(match=f'{prefix}*'))
    for key in leftover:
        redis_client.delete(key)
    assert leftover == [], f'the store transformer left {len(leftover)} keys in Redis'


@pytest.fixture(autouse=True)
def _quiet_parsl() -> Iterator[None]:
    yield
    logging.getLogger('parsl').setLevel(logging.WARNING)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The first test on Ray starts the node, which may take RAY_START_TIMEOUT.
    mark = pytest.mark.timeout(RAY_START_TIMEOUT + 120)
    here = pathlib.Path(__file__).parent
    for item in items:
        if item.path.parent != here:
            continue
        params = getattr(item, 'callspec', None)
        on_ray = params is not None and 'ray' in params.params.values()
        if on_ray or 'ray_executor' in getattr(item, 'fixturenames', ()):
            item.add_marker(mark)
