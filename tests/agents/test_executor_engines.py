"""Agents on the executors of real engines, through ExecutorLauncher.

One module-scoped engine at a time: tether's function service (a dev-mode service and an
endpoint whose worker processes run the agents), Parsl's pool executor over a
High-Throughput Executor whose block is a job of the single-node Slurm cluster, a Dask
``LocalCluster`` client executor and Ray (local). The same test runs on each: an agent
whose worker process dies while it holds a request is restarted per the policy, the
request is answered from its crash journal, and shutdown ends it.

The exchange is Redis: the agents' worker processes (a Slurm job, a Ray worker ...) and
the test reach it at one address, and no agent needs to accept connections (the hybrid
exchange would need each agent's process to be reachable from its peers).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any

import pytest

from tests.agents._crash_once import CrashOnce
from tests.parsl_env import parsl_environment
from tether.agents import Manager
from tether.agents.launcher import ExecutorLauncher, Launcher, RestartPolicy
from tether.exceptions import AgentCrashedError
from tether.testing.agents import LauncherConformance

pytestmark = pytest.mark.slow

TIMEOUT = 120.0
ENGINES = ('faas', 'parsl-slurm', 'dask', 'ray')


def _faas() -> Iterator[Executor]:
    from tests.faas.conftest import AgentThread, new_endpoint, new_user
    from tether.faas import EndpointConfig, Executor, ServiceConfig
    from tether.faas._server import ServiceThread

    service = ServiceThread(
        ServiceConfig(port=0, database='sqlite://', broker='memory://')
    ).start()
    user, token = new_user(service)
    endpoint_id, endpoint_token = new_endpoint(service, user, 'agents')
    config = EndpointConfig(
        name='agents',
        endpoint_id=endpoint_id,
        service_url=service.url,
        heartbeat_s=0.5,
        max_workers=2,
        max_retries=0,  # a worker that dies fails the task: the launcher restarts
    )
    endpoint = AgentThread(config, endpoint_token).start()
    executor = Executor(endpoint_id, service_url=service.url, token=token)
    try:
        yield executor
    finally:
        executor.shutdown()
        endpoint.stop()
        service.stop()


def _parsl_slurm(run_dir: pathlib.Path) -> Iterator[Executor]:
    from tether.plugins.parsl import ParslPoolExecutor, htex_config, make_provider, worker_init

    if shutil.which('sinfo') is None or 'idle' not in subprocess.run(
        ['sinfo', '-h', '-o', '%t'], capture_output=True, text=True, check=False
    ).stdout.replace('mix', 'idle'):
        pytest.fail('no idle Slurm node: run `make services` (scripts/services.sh starts one)')
    provider = make_provider(
        'slurm',
        {
            'partition': 'debug',
            'walltime': '00:10:00',
            'exclusive': False,
            'init_blocks': 1,
            'min_blocks': 1,
            'max_blocks': 1,
            'worker_init': worker_init(f'export PYTHONPATH={os.environ["PYTHONPATH"]}'),
        },
        status_polling_interval=0.5,
    )
    config = htex_config(
        provider,
        label='agents-slurm',
        workers_per_node=2,
        address='127.0.0.1',
        run_dir=str(run_dir),
        heartbeat_period=1,
        heartbeat_threshold=3,
        strategy_period=0.5,
        # One block for the module: Parsl 2026.10's htex_auto_scale cancels a block with
        # more worker slots than tasks (scale_in(0) still picks an idle block) before
        # its workers connect, and submits another, again and again.
        strategy='none',
    )
    executor = ParslPoolExecutor(config)
    try:
        yield executor
    finally:
        executor.shutdown()


def _dask() -> Iterator[Executor]:
    import dask
    from distributed import Client, LocalCluster

    # A worker that dies fails its task at once (no rerun by Dask): the launcher restarts.
    with dask.config.set({'distributed.scheduler.allowed-failures': 0}):
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=1, threads_per_worker=4, processes=True, dashboard_address=':0'
        )
        client = Client(cluster)  # type: ignore[no-untyped-call]
        try:
            yield client  # type: ignore[misc]  # ExecutorLauncher takes a Client as such
        finally:
            client.close()  # type: ignore[no-untyped-call]
            cluster.close()


def _ray() -> Iterator[Executor]:
    from tether.plugins.ray import RayExecutor

    executor = RayExecutor(
        init_kwargs={'num_cpus': 2, 'include_dashboard': False, 'log_to_driver': False},
        shutdown_ray=True,
        max_retries=0,  # a worker that dies fails the task: the launcher restarts
    )
    try:
        yield executor
    finally:
        executor.shutdown()


@pytest.fixture(scope='module', params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """One engine's executor for the module's tests (workers import the tests)."""
    with parsl_environment('tether-agents-engine-') as run_dir:
        makers: dict[str, Callable[[], Iterator[Executor]]] = {
            'faas': _faas,
            'parsl-slurm': lambda: _parsl_slurm(run_dir),
            'dask': _dask,
            'ray': _ray,
        }
        yield from makers[request.param]()


def test_a_crashed_agent_is_restarted_answered_from_its_journal_and_shut_down(
    engine: Executor,
    make_exchange: Callable[..., Any],
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> None:
    launcher = ExecutorLauncher(engine, restart=RestartPolicy(max_restarts=1, backoff=0.0))
    with Manager(make_exchange('redis'), launcher) as manager:
        handle = manager.launch(CrashOnce(str(tmp_path / 'crashed')), state_dir=str(tmp_path))
        first = handle.pid().result(TIMEOUT)
        assert first != os.getpid()  # on one of the engine's workers
        if request.node.callspec.params['engine'] == 'parsl-slurm':
            assert handle.env('SLURM_JOB_ID').result(TIMEOUT)  # inside the block's job
        # The request the dying process held is answered from its journal.
        with pytest.raises(AgentCrashedError, match='died while running action'):
            handle.crash().result(TIMEOUT)
        # The policy restarts it once; the new incarnation serves.
        assert handle.crash().result(TIMEOUT) == 'survived'
        assert handle.pid().result(TIMEOUT) != first
        assert launcher.restarts(handle.agent_id) == 1
        handle.shutdown().result(TIMEOUT)
        assert launcher.wait(handle.agent_id, TIMEOUT)
        assert launcher.failure(handle.agent_id) is None
        assert handle.agent_id not in launcher.running()


class TestEngineLaunchers(LauncherConformance):
    """The launcher conformance suite on each engine (the module's engine)."""

    timeout = TIMEOUT

    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('redis')

    @pytest.fixture
    def make_launcher(self, engine: Executor) -> Callable[[RestartPolicy], Launcher]:
        return lambda restart: ExecutorLauncher(engine, restart=restart)
