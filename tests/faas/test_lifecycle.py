"""A task's life at the service and its endpoint (issue 25): submitted once, run once,
results within the broker's limits, deleted endpoints, one id per function, cancellation
and time limits. Real PostgreSQL, RabbitMQ and endpoints."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.faas import _lifecycle_tasks, _tasks
from tests.faas.conftest import AgentThread, new_user, wait_for
from tether.exceptions import EndpointDeletedError, FaasError, FaasNotFoundError, TaskPending
from tether.faas import Client, Executor, _frames
from tether.faas._server import ServiceThread


def result_of(client: Client, task_id: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.get_result(task_id)
        except TaskPending:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# 7. One function, one id --------------------------------------------------------------


def test_client_and_executor_give_a_function_one_id(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    other_user, other_token = new_user(prod_service)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        assert client.register_function(_tasks.square) == fid
        ep = start_endpoint(prod_service, user, allowed_functions=[fid])
        # The Executor has a Client of its own: it registers the function again.
        with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
            assert ex.client.function_id_for(_tasks.square) == fid
            assert ex.submit(_tasks.square, 7).result(timeout=60) == 49
    # Another user's registration of the same function is another function.
    with Client(prod_service.url, other_token) as client:
        assert client.register_function(_tasks.square) != fid
    assert other_user != user


# 1. A task runs once per task id ------------------------------------------------------


@pytest.mark.parametrize('which', ['prod_service', 'dev_service'])
def test_a_repeated_submission_runs_its_task_once(
    which: str,
    request: pytest.FixtureRequest,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    st: ServiceThread = request.getfixturevalue(which)
    user, token = new_user(st)
    ep = start_endpoint(st, user, max_workers=1)
    runs = tmp_path / 'runs'
    with Client(st.url, token) as client:
        fid = client.register_function(_lifecycle_tasks.record)
        batch = client.create_batch()
        tid = batch.add(str(runs), 'once', endpoint_id=ep.config.endpoint_id, function_id=fid)
        frame = _frames.encode(
            _frames.SUBMIT,
            {'task_group_id': client.task_group_id, 'tasks': batch.tasks},
            batch.payloads,
        )

        def post() -> list[str]:
            response = client._http.post('/v1/submit', content=frame)
            assert response.status_code == 200, response.text
            ids: list[str] = response.json()['task_ids']
            return ids

        # What the SDK does when a POST times out and it tries again: back to back ...
        assert post() == [tid]
        assert post() == [tid]
        assert result_of(client, tid) == 'once'
        # ... and after the task finished.
        assert post() == [tid]
        # The endpoint's one worker runs its queue in order: once the next task ran,
        # anything queued before it did too.
        later = client.run(str(runs), 'later', endpoint_id=ep.config.endpoint_id, function_id=fid)
        assert result_of(client, later) == 'later'
        assert len(runs.read_text().splitlines()) == 2
        assert client.get_task(tid)['attempts'] == 1


def test_a_task_id_of_another_user_is_refused(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    other, other_token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    theirs = start_endpoint(prod_service, other)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        tid = client.run(fid, ep.config.endpoint_id, 3)
        assert result_of(client, tid) == 9
    with Client(prod_service.url, other_token) as client:
        fid = client.register_function(_tasks.square)
        batch = client.create_batch()
        batch.add(4, endpoint_id=theirs.config.endpoint_id, function_id=fid)
        batch.tasks[0]['task_id'] = tid
        with pytest.raises(FaasError, match='already in use'):
            client.batch_run(batch)


def test_a_task_run_again_after_its_worker_died_says_so_in_its_record(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.die_unless_marked)
        tid = client.run(fid, ep.config.endpoint_id, str(tmp_path / 'marker'))
        assert result_of(client, tid) == 'survived'
        record = client.get_task(tid)
        assert [r['reason'] for r in record['retries']] == ['worker lost']
        assert record['retries'][0]['exit_code'] == 3
        once = client.run(fid, ep.config.endpoint_id, str(tmp_path / 'marker'))
        assert result_of(client, once) == 'survived'
        assert 'retries' not in client.get_task(once)


# 6. Deleted endpoints ------------------------------------------------------------------


def test_tasks_of_a_deleted_endpoint_fail_and_its_connection_closes(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1, worker_prefetch=0)
    eid = ep.config.endpoint_id
    started, marker = tmp_path / 'started', tmp_path / 'marker'
    try:
        with Client(prod_service.url, token) as client:
            fid = client.register_function(_lifecycle_tasks.block_until)
            running = client.run(fid, eid, str(started), str(marker))
            with Executor(eid, client=client) as ex:
                queued = [ex.submit(_tasks.square, i) for i in range(3)]
                wait_for(started.exists, 60, 'the first task to start')
                client.delete_endpoint(eid)
                for future in queued:
                    with pytest.raises(EndpointDeletedError, match='deleted'):
                        future.result(timeout=60)
            with pytest.raises(EndpointDeletedError, match=f'endpoint {eid} was deleted'):
                result_of(client, running)
            record = client.get_task(running)
            assert record['status'] == 'failed'
            assert record['error']['type'] == 'EndpointDeletedError'
            # Its agent was told, and stopped (no reconnection loop).
            wait_for(lambda: ep.agent.fatal is not None, 60, 'the agent to be refused')
            assert isinstance(ep.agent.fatal, FaasNotFoundError)
            assert 'deleted' in str(ep.agent.fatal)
    finally:
        marker.touch()
