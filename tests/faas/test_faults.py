"""Faults: the service restarted mid-run, an endpoint killed mid-task, workers dying,
RabbitMQ restarted. Nothing is lost: every task finishes or fails with a clear error."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AMQP, AgentThread, delete_queues, new_user, wait_for
from tests.stream._servers import rabbitmq
from tether.exceptions import WorkerLostError
from tether.faas import Client, Executor, ServiceConfig
from tether.faas._server import ServiceThread
from tether.testing import ServerProcess, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def own_service(pg_url: str, queue_prefix: str) -> Iterator[Callable[..., ServiceThread]]:
    """Start (and restart) services of this test's own, on one fixed port."""
    port = free_port()
    prefix = f'{queue_prefix}-{uuid.uuid4().hex[:6]}'
    started: list[ServiceThread] = []
    shared: list[bool] = []

    def start(broker: str = AMQP) -> ServiceThread:
        shared.append(broker == AMQP)
        config = ServiceConfig(port=port, database=pg_url, broker=broker, queue_prefix=prefix)
        st = ServiceThread(config).start()
        started.append(st)
        return st

    yield start
    last = started[-1] if started else None
    if last is not None and last.service is not None and last._thread.is_alive() and shared[-1]:
        delete_queues(last)
    for st in started:
        st.stop()


def test_service_restarted_mid_run(
    own_service: Callable[..., ServiceThread], start_endpoint: Callable[..., AgentThread]
) -> None:
    st = own_service()
    user, token = new_user(st)
    ep = start_endpoint(st, user, max_workers=2)
    with Executor(ep.config.endpoint_id, service_url=st.url, token=token) as ex:
        first = [ex.submit(_tasks.sleep_then, 0.2, i) for i in range(12)]
        ex.client.function_id_for(_tasks.square)  # registration itself needs the service
        wait_for(lambda: any(f.done() for f in first), what='a first result')
        st.stop()  # the service goes away with tasks queued, running and finished
        # Submitted while the service is down: retried until it is back.
        during = [ex.submit(_tasks.square, i) for i in range(3)]
        # The Executor saw its stream drop: the submissions wait for the service.
        wait_for(lambda: ex._ws is None, 60, 'the result stream to drop')
        own_service()
        assert [f.result(timeout=90) for f in first] == list(range(12))
        assert [f.result(timeout=90) for f in during] == [0, 1, 4]


def test_endpoint_killed_mid_task_then_restarted(
    prod_service: ServiceThread, faas_home: pathlib.Path
) -> None:
    _user, token = new_user(prod_service)
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                '-c',
                'from tether.cli import main; main()',
                'faas',
                'endpoint',
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=100,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    import json

    out = cli(
        'configure',
        'site',
        '--service',
        prod_service.url,
        '--token',
        token,
        '--max-workers',
        '2',
        '--json',
    )
    endpoint_id = json.loads(out)['endpoint_id']
    folder = faas_home / 'endpoints' / 'site'
    assert (folder / 'token').stat().st_mode & 0o077 == 0
    assert 'tfe_' not in (folder / 'config.toml').read_text()  # the secret is not in it
    cli('start', 'site')
    pid = int((folder / 'pid').read_text())

    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.sleep_then)
        batch = client.create_batch()
        for i in range(4):
            batch.add(1.0, i, endpoint_id=endpoint_id, function_id=fid)
        ids = client.batch_run(batch)
        wait_for(
            lambda: sum(client.get_task(t)['status'] == 'running' for t in ids) >= 2,
            what='tasks running on the endpoint',
        )
        os.killpg(pid, signal.SIGKILL)  # the agent and its workers, mid-task
        wait_for(lambda: not client.get_endpoint_status(endpoint_id)['online'], 60, 'offline')
        cli('start', 'site')
        status = json.loads(cli('status', 'site', '--json'))
        assert status['online']
        assert status['running'] is not None
        results = {}
        deadline = time.monotonic() + 90
        while len(results) < len(ids) and time.monotonic() < deadline:
            for tid, entry in client.get_batch_result(
                [t for t in ids if t not in results]
            ).items():
                if not entry['pending']:
                    results[tid] = entry.get('result', entry.get('exception'))
            time.sleep(0.1)
        assert [results[t] for t in ids] == [0, 1, 2, 3]
        assert max(client.get_task(t)['attempts'] for t in ids) >= 2  # some ran twice
    cli('stop', 'site')
    assert not json.loads(cli('list', '--json'))[0]['running']


def test_dead_workers_are_retried_up_to_the_limit(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1, max_retries=2)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        marker = str(tmp_path / 'died-once')
        assert ex.submit(_tasks.die_unless_marked, marker).result(timeout=90) == 'survived'
        doomed = ex.submit(_tasks.always_die)
        with pytest.raises(WorkerLostError, match='died 3 times'):
            doomed.result(timeout=90)
        # The endpoint still works afterwards.
        assert ex.submit(_tasks.square, 9).result(timeout=60) == 81


def test_rabbitmq_restarted(
    own_service: Callable[..., ServiceThread],
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    port = free_port()
    base = pathlib.Path(os.environ.get('TMPDIR', '/tmp')) / f'rmq-{uuid.uuid4().hex[:8]}'
    base.mkdir()
    args, env = rabbitmq(port, base)
    broker = f'amqp://guest:guest@127.0.0.1:{port}/'
    try:
        with ServerProcess(args, port, env=env) as rmq:
            st = own_service(broker)
            user, token = new_user(st)
            ep = start_endpoint(st, user, max_workers=2)
            ex = Executor(ep.config.endpoint_id, service_url=st.url, token=token)
            futures = [ex.submit(_tasks.sleep_then, 0.3, i) for i in range(10)]
            ex.client.function_id_for(_tasks.square)
            wait_for(lambda: any(f.done() for f in futures), 90, 'a first result')
            rmq.stop()
            during = ex.submit(_tasks.square, 5)  # retried until RabbitMQ is back
            with ServerProcess(args, port, env=env):
                assert [f.result(timeout=110) for f in futures] == list(range(10))
                assert during.result(timeout=110) == 25
                ex.shutdown()
                st.stop()
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
