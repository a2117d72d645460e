"""A compute endpoint on a real Slurm cluster (the single-node one of scripts/services.sh).

One endpoint (Parsl engine, ``[provider] type = "slurm"``) serves the module, over the
production service (PostgreSQL and RabbitMQ). Its blocks are Slurm jobs: tasks run inside
them (the task record names the job), blocks are submitted while tasks wait and
cancelled once idle, and a block that Slurm ends under a running task (``scancel``, the
walltime) makes the task run again or fail with ``WorkerLostError``, never hang.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faas import _slurm_tasks
from tests.faas.conftest import AgentThread, new_endpoint, new_user, wait_for
from tests.metrics._scrape import scrape, value
from tether._serve.metrics import MetricsOptions
from tether.exceptions import WorkerLostError
from tether.faas import Client, EndpointConfig, Executor
from tether.faas._server import ServiceThread
from tether.faas.endpoint._parsl import ParslEngine
from tether.faas.endpoint.providers import SlurmProvider

pytestmark = pytest.mark.slow

IDLE_S = 2.0


def squeue_state(job: str) -> str:
    """The state Slurm gives job ``job`` (finished jobs stay listed for MinJobAge)."""
    out = subprocess.run(
        ['squeue', '-h', '--states=all', '-j', job, '-o', '%T'],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def endpoint_jobs(state: str) -> list[str]:
    """Ids of the endpoint's blocks (Parsl names their jobs) in ``state``."""
    out = subprocess.run(
        ['squeue', '-h', '--states', state, '-o', '%i %j'],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line.split()[0] for line in out.stdout.splitlines() if 'tether-faas' in line]


class SlurmEndpoint:
    def __init__(self, agent: AgentThread, token: str, url: str, scratch: pathlib.Path) -> None:
        self.agent, self.token, self.url, self.scratch = agent, token, url, scratch

    def executor(self) -> Executor:
        return Executor(self.agent.config.endpoint_id, service_url=self.url, token=self.token)

    def record(self, task_id: str) -> dict[str, Any]:
        with Client(self.url, self.token) as client:
            return client.get_task(task_id)


@pytest.fixture(scope='module')
def slurm(
    prod_service: ServiceThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmEndpoint]:
    if shutil.which('sinfo') is None or 'idle' not in subprocess.run(
        ['sinfo', '-h', '-o', '%t'], capture_output=True, text=True, check=False
    ).stdout.replace('mix', 'idle'):
        pytest.fail('no idle Slurm node: run `make services` (scripts/services.sh starts one)')
    user, token = new_user(prod_service)
    endpoint_id, endpoint_token = new_endpoint(prod_service, user, 'slurm')
    scratch = tmp_path_factory.mktemp('slurm')  # the jobs run on this host: they see it
    config = EndpointConfig(
        name='slurm',
        endpoint_id=endpoint_id,
        service_url=prod_service.url,
        heartbeat_s=0.5,
        metrics=MetricsOptions(port=0),
        max_workers=1,
        max_retries=1,
        idle_timeout_s=IDLE_S,
        provider=SlurmProvider(
            partition='debug',
            walltime='00:10:00',
            exclusive=False,
            max_blocks=2,  # the node's two cores: a job of one core each
            address='127.0.0.1',
            # A lost block noticed within seconds, not Parsl's minutes.
            heartbeat_period=1,
            heartbeat_threshold=3,
            strategy_period=0.5,
            status_polling_interval=0.5,
        ),
    )
    agent = AgentThread(config, endpoint_token).start()
    try:
        yield SlurmEndpoint(agent, token, prod_service.url, scratch)
    finally:
        agent.stop()
        # Nothing of the endpoint's is left queued or running.
        wait_for(lambda: not endpoint_jobs('PENDING,RUNNING'), 60, 'the blocks to end')


def test_tasks_run_inside_slurm_jobs_and_idle_blocks_are_cancelled(
    slurm: SlurmEndpoint,
) -> None:
    assert not endpoint_jobs('PENDING,RUNNING')  # init_blocks = 0: no job before a task
    engine = slurm.agent.agent.engine
    assert isinstance(engine, ParslEngine)
    assert engine.blocks() == {}
    with slurm.executor() as ex:
        future = ex.submit(_slurm_tasks.job_id)  # queued: the endpoint submits a block
        job = future.result(timeout=90)
    assert job.isdigit()
    record = slurm.record(future.task_id)
    assert record['block']['scheduler'] == 'slurm'
    assert record['block']['job_id'] == job
    assert 'block_id' in record['block']
    # The agent's metrics show the block (as Parsl last polled Slurm).
    address = slurm.agent.agent.metrics.address()
    assert address is not None
    running = lambda: value(scrape(address), 'tether_faas_blocks', state='running')  # noqa: E731
    wait_for(lambda: running() == 1, 30, 'the metrics to show the running block')
    # Idle for IDLE_S: the endpoint cancels its block (Slurm lists it as CANCELLED).
    wait_for(lambda: squeue_state(job) == 'CANCELLED', 60, f'job {job} to be cancelled')
    # The engine's view of its blocks follows (Parsl polls the scheduler).
    wait_for(lambda: 'running' not in engine.blocks(), 30, 'the engine to see it end')
    assert sum(engine.blocks().values()) == 1
    assert running() == 0


def test_blocks_slurm_ends_under_running_tasks_give_retries_or_worker_lost(
    slurm: SlurmEndpoint,
) -> None:
    """Two tasks at once, each in a block of its own: one cancels its job every time it
    runs (scancel), the other makes Slurm end its job for its walltime the first time."""
    cancelled, timed_out = slurm.scratch / 'scancel.log', slurm.scratch / 'walltime.log'
    with slurm.executor() as ex:
        doomed = ex.submit(_slurm_tasks.end_own_job, 'scancel', str(cancelled), 2)
        survivor = ex.submit(_slurm_tasks.end_own_job, 'walltime', str(timed_out), 1)
        # The walltime end comes at Slurm's next time-limit check (every 30 s).
        job = survivor.result(timeout=110)
        with pytest.raises(WorkerLostError, match=r'lost 2 times.*max_retries = 1'):
            doomed.result(timeout=90)

    # scancel: the task ran again in a new block, which was cancelled too: WorkerLostError.
    first, second = cancelled.read_text().split()
    assert first != second
    assert squeue_state(first) == squeue_state(second) == 'CANCELLED'
    record = slurm.record(doomed.task_id)
    assert record['status'] == 'failed'
    assert record['error']['type'] == 'WorkerLostError'
    assert len(record['retries']) == 2  # each loss: the first one retried
    assert all('ManagerLost' in r['reason'] for r in record['retries'])

    # walltime: Slurm ended the block (TIMEOUT); the task ran again in a new block.
    first, second = timed_out.read_text().split()
    assert job == second != first
    assert squeue_state(first) == 'TIMEOUT'
    record = slurm.record(survivor.task_id)
    assert record['status'] == 'success'
    assert record['block']['job_id'] == second
    assert len(record['retries']) == 1
