"""Fixtures of the benchmark-suite tests: one cluster of each executor per session.

Engines built on these executors must not shut them down, so each is handed over
"borrowed" (its ``shutdown`` does nothing); the session fixture shuts it down at the end.
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
def ray_session() -> Iterator[None]:
    import ray

    from tether.bench.executor.ray import start_ray

    # Ray's workers inherit this environment (they import the test modules by name); a
    # runtime_env with the same variable made the workers wait for Ray's agent instead.
    old = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    try:
        start_ray(attempts=2, num_cpus=1, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # pragma: no cover - depends on the machine's load
        if 'timed out during startup' not in str(e):
            raise
        # Ray gives its raylet a fixed 30 s to register, which a machine shared by many
        # test suites can exceed; that says nothing about tether.
        pytest.skip(f'the local Ray instance did not start on this loaded machine: {e}')
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop('PYTHONPATH', None)
    else:
        os.environ['PYTHONPATH'] = old


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
            from tether.plugins.ray import RayExecutor

            request.getfixturevalue('ray_session')
            return RayExecutor()
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
    # When Ray's local node fails to start (a loaded machine), Ray keeps Popen objects of
    # processes that start_ray killed; their collection, during whichever test runs
    # next, warns that they are "still running". Not a leak of the code under test.
    mark = pytest.mark.filterwarnings(r'ignore:subprocess \d+ is still running:ResourceWarning')
    for item in items:
        if item.path.parent == pathlib.Path(__file__).parent:
            item.add_marker(mark)
