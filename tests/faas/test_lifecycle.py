"""A task's life at the service and its endpoint (issue 25): submitted once, run once,
results within the broker's limits, deleted endpoints, one id per function, cancellation
and time limits. Real PostgreSQL, RabbitMQ and endpoints."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import pathlib
import threading
import uuid
from collections.abc import Callable

import pytest

from tests.faas import _lifecycle_tasks, _tasks
from tests.faas.conftest import (
    AMQP,
    AgentThread,
    delete_queues,
    new_endpoint,
    new_user,
    result_of,
    wait_for,
)
from tether.exceptions import (
    ConfigError,
    EndpointDeletedError,
    FaasBadRequestError,
    FaasNotFoundError,
    TaskCancelledError,
    TaskExecutionFailed,
    TaskTimeoutError,
)
from tether.faas import Client, EndpointConfig, Executor, ServiceConfig, _frames
from tether.faas._config import pid_alive
from tether.faas._payload import pack_result
from tether.faas._server import ServiceThread
from tether.testing import free_port


def _binary(message: str | bytes) -> bytes:
    assert isinstance(message, bytes), message
    return message


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
        with pytest.raises(FaasBadRequestError, match='already in use'):
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
                wait_for(lambda: _pids(started), 60, 'the first task to start')
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


# 2. A large result never jams an endpoint -----------------------------------------------


def test_a_result_over_the_limit_fails_its_task_and_others_arrive(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        small = ex.submit(_lifecycle_tasks.sized, 1000)
        big = ex.submit(_lifecycle_tasks.sized, 10 * 2**20 + 1)
        after = ex.submit(_lifecycle_tasks.sized, 2000)
        with pytest.raises(TaskExecutionFailed) as info:
            big.result(timeout=60)
        assert info.value.remote_type == 'tether.exceptions.FaasPayloadTooLargeError'
        assert 'result_store' in str(info.value)
        assert 'max_result_bytes' in str(info.value)
        assert small.result(timeout=60) == b'r' * 1000
        assert after.result(timeout=60) == b'r' * 2000


def test_a_result_over_the_service_limit_never_reaches_the_broker(
    prod_service: ServiceThread,
) -> None:
    """An endpoint that sends a result larger than RabbitMQ accepts (128 MiB): the
    service fails that task, and the results sent after it still arrive."""
    from websockets.sync.client import connect

    user, token = new_user(prod_service)
    eid, ep_token = new_endpoint(prod_service, user)
    url = prod_service.url.replace('http://', 'ws://') + '/v1/endpoint/connect'
    with (
        Client(prod_service.url, token) as client,
        connect(
            url,
            additional_headers={'Authorization': f'Bearer {ep_token}'},
            max_size=None,
            open_timeout=30,
        ) as ws,
    ):
        ws.send(_frames.encode(_frames.HELLO, {'held': []}))
        assert _frames.decode(_binary(ws.recv(timeout=60))).type == _frames.WELCOME
        fid = client.register_function(_tasks.echo)
        ids = [client.run(fid, eid, i) for i in range(2)]
        got: list[str] = []
        while len(got) < 2:
            frame = _frames.decode(_binary(ws.recv(timeout=60)))
            assert frame.type == _frames.TASKS
            got.extend(h['task_id'] for h in frame.header['tasks'])
        assert sorted(got) == sorted(ids)
        ws.send(_frames.encode(_frames.ACK, {'task_ids': ids}))

        def result(task_id: str, value: bytes) -> bytes:
            header = {'task_id': task_id, 'status': 'success', 'result_serializer': 'tether'}
            return _frames.encode(_frames.RESULTS, {'results': [header]}, [value])

        ws.send(result(ids[0], b'x' * (130 * 2**20)))
        ws.send(result(ids[1], pack_result('small')))
        confirmed: set[str] = set()
        while len(confirmed) < 2:
            frame = _frames.decode(_binary(ws.recv(timeout=60)))
            if frame.type == _frames.RESULTS_OK:
                confirmed.update(frame.header['task_ids'])
        with pytest.raises(TaskExecutionFailed, match='result_store') as info:
            result_of(client, ids[0], timeout=30)
        assert 'max_payload_bytes' in str(info.value)
        assert result_of(client, ids[1], timeout=30) == 'small'


def test_a_payload_limit_the_broker_cannot_carry_is_refused_at_start(
    pg_url: str, queue_prefix: str
) -> None:
    config = ServiceConfig(
        port=0,
        database=pg_url,
        broker=AMQP,
        queue_prefix=queue_prefix,
        max_payload_bytes=200 * 2**20,
        max_request_bytes=512 * 2**20,
    )
    with pytest.raises(ConfigError, match='max_payload_bytes'):
        ServiceThread(config).start()


# 8. Cancellation and time limits act on the worker ---------------------------------------


def _pids(path: pathlib.Path) -> list[int]:
    """The pids a task wrote to ``path``, whole lines only (a line being written is not
    one yet)."""
    text = path.read_text() if path.exists() else ''
    return [int(line) for line in text[: text.rfind('\n') + 1].splitlines()]


def test_cancelling_a_running_task_stops_its_worker(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1, worker_prefetch=0)
    started = tmp_path / 'started'
    never = tmp_path / 'never'
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        future = ex.submit(_lifecycle_tasks.block_until, str(started), str(never))
        wait_for(lambda: _pids(started), 60, 'the task to start')
        (pid,) = _pids(started)
        assert future.cancel()
        assert future.cancelled()
        assert future in concurrent.futures.wait([future], timeout=60).done
        wait_for(lambda: not pid_alive(pid), 60, 'the worker to be stopped')
        # The worker was replaced: the next task runs.
        assert ex.submit(_tasks.square, 5).result(timeout=60) == 25
        assert ex.client.get_task(future.task_id)['status'] == 'cancelled'
        assert not future.cancel() or future.cancelled()
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_lifecycle_tasks.block_until)
        tid = client.run(fid, ep.config.endpoint_id, str(started), str(never))
        wait_for(lambda: len(_pids(started)) == 2, 60, 'the task to start')
        assert client.cancel(tid)
        with pytest.raises(TaskCancelledError):
            result_of(client, tid)
        done = client.run(client.register_function(_tasks.square), ep.config.endpoint_id, 3)
        assert result_of(client, done) == 9
        assert not client.cancel(done)  # finished: nothing to cancel


def test_cancelling_a_queued_task_removes_it(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1, worker_prefetch=0)
    started, marker, runs = tmp_path / 'started', tmp_path / 'marker', tmp_path / 'runs'
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        try:
            first = ex.submit(_lifecycle_tasks.block_until, str(started), str(marker))
            wait_for(lambda: _pids(started), 60, 'the first task to start')
            queued = ex.submit(_lifecycle_tasks.record, str(runs), 'cancelled one')
            after = ex.submit(_lifecycle_tasks.record, str(runs), 'after')
            # Sent, and waiting at the endpoint behind the first task.
            wait_for(
                lambda: ep.agent.engine.stats()['pending'] == 2,
                60,
                'the tasks to reach the endpoint',
            )
            assert queued.cancel()
        finally:
            marker.touch()
        assert after.result(timeout=60) == 'after'
        assert first.result(timeout=60) == _pids(started)[0]
        assert queued.cancelled()
    assert runs.read_text().count('\n') == 1  # only 'after' ran


def test_a_task_cancelled_in_its_broker_queue_never_reaches_the_endpoint(
    prod_service: ServiceThread, tmp_path: pathlib.Path
) -> None:
    user, token = new_user(prod_service)
    eid, ep_token = new_endpoint(prod_service, user)
    runs = tmp_path / 'runs'
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_lifecycle_tasks.record)
        dropped = client.run(str(runs), 'dropped', endpoint_id=eid, function_id=fid)
        kept = client.run(str(runs), 'kept', endpoint_id=eid, function_id=fid)
        assert client.batch_cancel([dropped]) == {dropped: 'cancelled'}
        config = EndpointConfig(
            name='ep', endpoint_id=eid, service_url=prod_service.url, max_workers=1
        )
        agent = AgentThread(config, ep_token).start()
        try:
            assert result_of(client, kept) == 'kept'
        finally:
            agent.stop()
        assert len(runs.read_text().splitlines()) == 1
        with pytest.raises(TaskCancelledError):
            client.get_result(dropped)


def test_a_task_past_its_time_limit_fails_and_frees_its_worker(
    prod_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, max_workers=1)
    started, never = tmp_path / 'started', tmp_path / 'never'
    with Executor(
        ep.config.endpoint_id, service_url=prod_service.url, token=token, task_timeout=0.5
    ) as ex:
        slow = ex.submit(_lifecycle_tasks.block_until, str(started), str(never))
        quick = ex.submit(_tasks.square, 4)  # prefetched behind it: runs after
        with pytest.raises(TaskTimeoutError, match=r'time limit of 0\.5 s'):
            slow.result(timeout=60)
        assert quick.result(timeout=60) == 16
        wait_for(lambda: not pid_alive(_pids(started)[0]), 60, 'the worker to be stopped')
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_lifecycle_tasks.block_until)
        tid = client.run(fid, ep.config.endpoint_id, str(started), str(never), task_timeout=0.5)
        with pytest.raises(TaskTimeoutError):
            result_of(client, tid)
        with pytest.raises(ValueError, match='task_timeout'):
            client.run(fid, ep.config.endpoint_id, 1, 2, task_timeout=-1)


def test_a_prefetched_task_cancelled_is_skipped_by_its_worker(tmp_path: pathlib.Path) -> None:
    from tests.faas.test_engine import Collector, engine_config, task
    from tether.faas.endpoint._pool import ProcessPoolEngine

    c = Collector()
    engine = ProcessPoolEngine(
        engine_config(max_workers=1, worker_prefetch=1), c.handoff, c.result
    )
    engine.start()
    started, marker, runs = tmp_path / 'started', tmp_path / 'marker', tmp_path / 'runs'
    try:
        first = task(_lifecycle_tasks.block_until, str(started), str(marker))
        second = task(_lifecycle_tasks.record, str(runs), 'skipped')
        third = task(_lifecycle_tasks.record, str(runs), 'ran')
        engine.submit([first, second])
        wait_for(lambda: c.handed == [first.task_id, second.task_id], 60, 'both handed')
        engine.cancel([second.task_id])
        header, _ = c.results.get(timeout=60)  # reported at once, while the first runs
        assert (header['task_id'], header['status']) == (second.task_id, 'cancelled')
        marker.touch()
        engine.submit([third])
        assert c.take(2) == {first.task_id: _pids(started)[0], third.task_id: 'ran'}
        assert runs.read_text().count('\n') == 1  # the cancelled one never ran
        assert c.results.empty()
    finally:
        marker.touch()
        engine.stop()


def test_a_task_cancelled_in_its_queue_stays_dropped_after_the_service_restarts(
    pg_url: str, queue_prefix: str, tmp_path: pathlib.Path
) -> None:
    config = ServiceConfig(
        port=free_port(),
        database=pg_url,
        broker=AMQP,
        queue_prefix=f'{queue_prefix}-{uuid.uuid4().hex[:6]}',
    )
    st = ServiceThread(config).start()
    runs = tmp_path / 'runs'
    try:
        user, token = new_user(st)
        eid, ep_token = new_endpoint(st, user)
        with Client(st.url, token, retry_deadline=60) as client:
            fid = client.register_function(_lifecycle_tasks.record)
            dropped = client.run(str(runs), 'dropped', endpoint_id=eid, function_id=fid)
            assert client.cancel(dropped)
            st.stop()  # the service forgets what it held in memory
            st = ServiceThread(config).start()
            kept = client.run(str(runs), 'kept', endpoint_id=eid, function_id=fid)
            agent = AgentThread(
                EndpointConfig(name='ep', endpoint_id=eid, service_url=st.url, max_workers=1),
                ep_token,
            ).start()
            try:
                assert result_of(client, kept) == 'kept'
            finally:
                agent.stop()
        assert runs.read_text().count('\n') == 1
    finally:
        delete_queues(st)
        st.stop()


def test_the_parsl_engine_interrupts_a_task_past_its_time_limit(
    dev_service: ServiceThread,
    start_endpoint: Callable[..., AgentThread],
    tmp_path: pathlib.Path,
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user, engine='parsl', max_workers=1, max_retries=0)
    started, never = tmp_path / 'started', tmp_path / 'never'
    with Executor(
        ep.config.endpoint_id, service_url=dev_service.url, token=token, task_timeout=0.5
    ) as ex:
        slow = ex.submit(_lifecycle_tasks.block_until, str(started), str(never))
        with pytest.raises(TaskTimeoutError, match='time limit'):
            slow.result(timeout=90)
        # Its one worker is free again.
        assert ex.submit(_tasks.square, 6).result(timeout=60) == 36


class _TableLock:
    """``LOCK TABLE faas_tasks`` held in a transaction of its own, until released: a
    submission then waits at its insert, after it found its endpoint."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.locked = threading.Event()
        self.release = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._hold()), daemon=True)

    async def _hold(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            async with conn.transaction():
                await conn.execute('LOCK TABLE faas_tasks IN SHARE MODE')
                self.locked.set()
                await asyncio.to_thread(self.release.wait, 60)
        finally:
            await conn.close()

    def __enter__(self) -> _TableLock:
        self._thread.start()
        assert self.locked.wait(60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._thread.join(60)


def _inserts_waiting(url: str) -> int:
    async def count() -> int:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            return int(
                await conn.fetchval(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE 'INSERT INTO faas_tasks%'"
                )
            )
        finally:
            await conn.close()

    return asyncio.run(count())


def _queue_exists(name: str) -> bool:
    async def check() -> bool:
        import aio_pika
        import aiormq

        conn = await aio_pika.connect(AMQP)
        try:
            channel = await conn.channel()
            try:
                await channel.declare_queue(name, passive=True)
            except (aio_pika.exceptions.ChannelNotFoundEntity, aiormq.ChannelNotFoundEntity):
                return False
            return True
        finally:
            await conn.close()

    return asyncio.run(check())


def test_an_endpoint_deleted_during_a_submission_strands_no_task(
    prod_service: ServiceThread, pg_url: str
) -> None:
    """A submission under way when its endpoint is deleted: its task is failed like the
    endpoint's other tasks (never left waiting), and the endpoint's queue is not made
    again. Deleting waits for the submissions under way; later ones are refused."""
    st = prod_service
    assert st.service is not None
    user, token = new_user(st)
    eid, _ = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        batch = client.create_batch()
        task_id = batch.add(3, endpoint_id=eid, function_id=fid)
        with contextlib.ExitStack() as stack, concurrent.futures.ThreadPoolExecutor(2) as pool:
            lock = stack.enter_context(_TableLock(pg_url))
            submitted = pool.submit(client.batch_run, batch)
            wait_for(
                lambda: _inserts_waiting(pg_url) > 0, 60, 'the submission to reach its insert'
            )
            deleted = pool.submit(client.delete_endpoint, eid)
            service = st.service
            wait_for(
                lambda: deleted.done() or eid in getattr(service, '_deleting', ()),
                60,
                'the deletion to start',
            )
            lock.release.set()  # the submission goes on
            assert submitted.result(60) == [task_id]
            deleted.result(60)
        record = wait_for(
            lambda: (r := client.get_task(task_id))['status'] != 'waiting-for-ep' and r,
            60,
            'the task to end',
        )
        assert record['status'] == 'failed'
        assert record['error']['type'] == 'EndpointDeletedError'
        assert not _queue_exists(st.service.task_queue(eid))
        with pytest.raises(FaasNotFoundError):
            client.run(3, endpoint_id=eid, function_id=fid)
