"""Two ``tether faas serve`` replicas on one PostgreSQL and one RabbitMQ (issue 27 item 6):
a client of one replica gets the results of tasks whose endpoint is connected to the
other, and cancelling, stopping and deleting reach an endpoint whichever replica holds it.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faas import _lifecycle_tasks, _tasks
from tests.faas._replicas import Replica, replica_pair
from tests.faas.conftest import AMQP, AgentThread, new_endpoint, new_user, wait_for
from tether.exceptions import EndpointDeletedError, FaasNotFoundError
from tether.faas import Client, EndpointConfig, Executor
from tether.faas._config import pid_alive
from tether.faas._server import ServiceThread


@pytest.fixture(scope='module')
def pair(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, queue_prefix: str
) -> Iterator[tuple[Replica, Replica]]:
    with replica_pair(tmp_path_factory.mktemp('replicas'), pg_url, AMQP, queue_prefix) as p:
        yield p


def agent_on(st: ServiceThread, user: str, url: str, **options: Any) -> AgentThread:
    """An endpoint of ``user`` whose agent connects to the service at ``url``."""
    eid, token = new_endpoint(st, user)
    config = EndpointConfig(
        name='ep', endpoint_id=eid, service_url=url, heartbeat_s=0.5, **options
    )
    return AgentThread(config, token).start()


def pids(path: pathlib.Path) -> list[int]:
    return [int(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_client_of_one_replica_gets_results_of_an_endpoint_on_the_other(
    prod_service: ServiceThread, pair: tuple[Replica, Replica]
) -> None:
    a, b = pair
    user, token = new_user(prod_service)
    agent = agent_on(prod_service, user, a.url, max_workers=2)
    eid = agent.config.endpoint_id
    try:
        with Executor(eid, service_url=b.url, token=token) as ex:
            futures = [ex.submit(_tasks.square, i) for i in range(20)]
            assert [f.result(timeout=60) for f in futures] == [i * i for i in range(20)]
        with Client(b.url, token) as client:
            tid = client.run(client.register_function(_tasks.add), eid, 2, b=3)
            assert wait_for(lambda: client.get_task(tid)['status'] == 'success', 60)
            assert client.get_result(tid) == 5
            # Both replicas see the endpoint connected (the database says so).
            assert client.get_endpoint_status(eid)['status'] == 'online'
    finally:
        agent.stop()


def test_cancelling_through_one_replica_reaches_an_endpoint_on_the_other(
    prod_service: ServiceThread, pair: tuple[Replica, Replica], tmp_path: pathlib.Path
) -> None:
    a, b = pair
    user, token = new_user(prod_service)
    agent = agent_on(prod_service, user, a.url, max_workers=1, worker_prefetch=0)
    eid = agent.config.endpoint_id
    started, marker, runs = tmp_path / 'started', tmp_path / 'marker', tmp_path / 'runs'
    try:
        with Executor(eid, service_url=b.url, token=token) as ex:
            try:
                never = str(tmp_path / 'never')
                running = ex.submit(_lifecycle_tasks.block_until, str(started), never)
                # its pid written, not only the file opened
                wait_for(lambda: len(pids(started)) == 1, 60, 'the first task to start')
                (pid,) = pids(started)
                second = ex.submit(_lifecycle_tasks.block_until, str(started), str(marker))
                queued = ex.submit(_lifecycle_tasks.record, str(runs), 'cancelled one')
                after = ex.submit(_lifecycle_tasks.record, str(runs), 'after')
                # The running task is stopped on its worker, told by the replica holding
                # the endpoint (the worker is replaced and the next task starts).
                assert running.cancel()
                wait_for(lambda: not pid_alive(pid), 60, 'the worker to be stopped')
                assert running.cancelled()
                wait_for(lambda: len(pids(started)) == 2, 60, 'the second task to start')
                wait_for(
                    lambda: agent.agent.engine.stats()['pending'] == 2,
                    60,
                    'the tasks to reach the endpoint',
                )
                assert queued.cancel()
            finally:
                marker.touch()
            assert after.result(timeout=60) == 'after'
            assert second.result(timeout=60) == pids(started)[1]
            assert queued.cancelled()
            for f in (running, queued):
                assert ex.client.get_task(f.task_id)['status'] == 'cancelled'
        assert runs.read_text().count('\n') == 1  # only 'after' ran
    finally:
        agent.stop()


def test_deleting_or_stopping_through_one_replica_closes_an_endpoint_on_the_other(
    prod_service: ServiceThread, pair: tuple[Replica, Replica], tmp_path: pathlib.Path
) -> None:
    a, b = pair
    user, token = new_user(prod_service)
    deleted = agent_on(prod_service, user, a.url, max_workers=1, worker_prefetch=0)
    stopped = agent_on(prod_service, user, a.url, max_workers=1)
    started, marker = tmp_path / 'started', tmp_path / 'marker'
    try:
        with Client(b.url, token) as client:
            fid = client.register_function(_lifecycle_tasks.block_until)
            tid = client.run(fid, deleted.config.endpoint_id, str(started), str(marker))
            wait_for(started.exists, 60, 'the task to start')
            client.delete_endpoint(deleted.config.endpoint_id)
            wait_for(lambda: deleted.agent.fatal is not None, 60, 'the agent to be refused')
            assert isinstance(deleted.agent.fatal, FaasNotFoundError)
            assert 'deleted' in str(deleted.agent.fatal)
            wait_for(lambda: client.get_task(tid)['status'] == 'failed', 60)
            with pytest.raises(EndpointDeletedError):
                client.get_result(tid)

            client.stop_endpoint(stopped.config.endpoint_id)
            wait_for(lambda: stopped.agent.fatal is not None, 60, 'the agent to be stopped')
            assert 'stopped by its owner' in str(stopped.agent.fatal)
            wait_for(
                lambda: (
                    client.get_endpoint_status(stopped.config.endpoint_id)['status'] == 'offline'
                ),
                60,
                'the endpoint to be offline',
            )
    finally:
        marker.touch()
        deleted.stop()
        stopped.stop()


def test_a_function_deleted_through_one_replica_is_refused_by_the_other(
    prod_service: ServiceThread, pair: tuple[Replica, Replica]
) -> None:
    a, b = pair
    user, token = new_user(prod_service)
    agent = agent_on(prod_service, user, a.url, max_workers=1)
    eid = agent.config.endpoint_id
    try:
        with Client(a.url, token) as on_a, Client(b.url, token) as on_b:
            fid = on_a.register_function(_tasks.square)
            tid = on_a.run(fid, eid, 3)  # replica a now knows the user owns it
            assert wait_for(lambda: on_a.get_task(tid)['status'] == 'success', 60)
            on_b.delete_function(fid)
            # Told through the broker: replica a forgets what it knew.
            wait_for(lambda: _refused(on_a, fid, eid), 60, 'replica a to refuse it')
    finally:
        agent.stop()


def _refused(client: Client, fid: str, eid: str) -> bool:
    try:
        client.run(fid, eid, 4)
    except FaasNotFoundError:
        return True
    return False
