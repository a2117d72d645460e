"""Batches on the production path: a submission is one broker message per endpoint, a
batch of results one message per task group, and such a message leaves its queue only
when everything in it is done; what the broker delivers again is filtered.

An endpoint and a result stream are spoken by hand here (real WebSockets to a real
service, over PostgreSQL and RabbitMQ and over SQLite and in-process queues), to see
exactly what the service sends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AMQP, delete_queues, new_endpoint, new_user, wait_for
from tether.exceptions import FaasNotFoundError
from tether.faas import Client, Executor, ServiceConfig, _frames
from tether.faas._payload import pack_args, pack_result
from tether.faas._queues import Tracker as _Tracker
from tether.faas._server import ServiceThread


@pytest.fixture(params=['postgresql+rabbitmq', 'sqlite+memory'])
def make_service(
    request: pytest.FixtureRequest, pg_url: str, queue_prefix: str
) -> Iterator[Callable[..., ServiceThread]]:
    """Services of this test, on either stack, with the configuration it asks for."""
    started: list[ServiceThread] = []
    prod = request.param == 'postgresql+rabbitmq'

    def start(**options: Any) -> ServiceThread:
        if prod:
            prefix = f'{queue_prefix}-{uuid.uuid4().hex[:6]}'
            config = ServiceConfig(
                port=0, database=pg_url, broker=AMQP, queue_prefix=prefix, **options
            )
        else:
            config = ServiceConfig(port=0, database='sqlite://', broker='memory://', **options)
        st = ServiceThread(config).start()
        started.append(st)
        return st

    yield start
    for st in started:
        if prod:
            delete_queues(st)
        st.stop()


class Peer:
    """A WebSocket to the service that sends and receives frames by hand."""

    def __init__(self, st: ServiceThread, path: str, token: str) -> None:
        self.url = st.url.replace('http://', 'ws://') + path
        self.token = token
        self.ws: Any = None

    async def __aenter__(self) -> Peer:
        from websockets.asyncio.client import connect

        self.ws = await connect(
            self.url, additional_headers={'Authorization': f'Bearer {self.token}'}
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def send(self, mtype: int, header: dict[str, Any], payloads: Sequence[Any] = ()) -> None:
        await self.ws.send(_frames.encode(mtype, header, payloads))

    async def expect(self, mtype: int) -> Any:
        """The next frame of type ``mtype`` (others are skipped)."""
        while True:
            frame = _frames.decode(await asyncio.wait_for(self.ws.recv(), 60))
            if frame.type == mtype:
                return frame


def endpoint(st: ServiceThread, token: str) -> Peer:
    return Peer(st, '/v1/endpoint/connect', token)


def results(st: ServiceThread, token: str, group: str) -> Peer:
    return Peer(st, f'/v1/task_groups/{group}/results', token)


async def hello(peer: Peer, held: Sequence[str] = ()) -> None:
    await peer.send(_frames.HELLO, {'held': list(held), 'engine': 'by-hand'})


async def send_results(peer: Peer, values: dict[str, Any]) -> None:
    headers = [
        {'task_id': t, 'status': 'success', 'result_serializer': 'tether', 't': {}} for t in values
    ]
    await peer.send(
        _frames.RESULTS, {'results': headers}, [pack_result(v) for v in values.values()]
    )


def ids_of(frame: Any, key: str) -> list[str]:
    return [str(h['task_id']) for h in frame.header[key]]


def stats(st: ServiceThread, queue: str) -> tuple[int, int]:
    assert st.service is not None
    result: tuple[int, int] = st.call(st.service.broker.stats(queue))
    return result


def submit(client: Client, endpoint_id: str, fid: str, n: int, group: str) -> list[str]:
    batch = client.create_batch()
    for i in range(n):
        batch.add(i, endpoint_id=endpoint_id, function_id=fid)
    return client.batch_run(batch, task_group_id=group)


def test_tracker_completes_a_delivery_when_all_its_ids_are_done() -> None:
    tracker = _Tracker()
    assert tracker.hold('a', ['1', '2', '3'])
    assert tracker.hold('b', ['3', '4'])
    assert not tracker.hold('c', [])  # nothing to wait for: acknowledge at once
    assert tracker.done(['1', '3']) == []
    assert tracker.done(['4', 'unknown']) == ['b']
    assert tracker.done(['2']) == ['a']
    assert len(tracker) == 0


def test_tasks_of_a_batch_share_one_message_acknowledged_once_all_are_handed(
    make_service: Callable[..., ServiceThread],
) -> None:
    st = make_service()
    assert st.service is not None
    user, token = new_user(st)
    endpoint_id, endpoint_token = new_endpoint(st, user)
    queue = st.service.task_queue(endpoint_id)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()
        ids = submit(client, endpoint_id, fid, 4, group)  # the endpoint is offline
        assert stats(st, queue) == (1, 0)  # one message for the four tasks

        async def scenario() -> None:
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep)
                assert ids_of(await ep.expect(_frames.TASKS), 'tasks') == ids
                await ep.send(_frames.ACK, {'task_ids': ids[:2]})  # two with workers
                wait_for(
                    lambda: [client.get_task(t)['status'] for t in ids[:2]] == ['running'] * 2
                )
            # Gone before handing the other two: the message comes again, with only those
            # two (the endpoint still holds the first two, which are running).
            wait_for(lambda: stats(st, queue) == (1, 0), what='the message back in its queue')
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep, held=ids[:2])
                assert ids_of(await ep.expect(_frames.TASKS), 'tasks') == ids[2:]
                await ep.send(_frames.ACK, {'task_ids': ids[2:]})
                await send_results(ep, {t: i * i for i, t in enumerate(ids)})
                done = await ep.expect(_frames.RESULTS_OK)
                assert sorted(done.header['task_ids']) == sorted(ids)
            wait_for(lambda: stats(st, queue)[1] == 0, what='the session to end')
            assert stats(st, queue) == (0, 0)  # acknowledged: nothing comes again

        asyncio.run(scenario())
        result = client.get_batch_result(ids)
        assert [result[t]['result'] for t in ids] == [0, 1, 4, 9]


def test_an_endpoint_is_sent_at_most_endpoint_prefetch_tasks_not_yet_handed(
    make_service: Callable[..., ServiceThread],
) -> None:
    st = make_service(endpoint_prefetch=2)
    user, token = new_user(st)
    endpoint_id, endpoint_token = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        ids = submit(client, endpoint_id, fid, 5, client.create_task_group())

        async def scenario() -> None:
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep)
                sent = ids_of(await ep.expect(_frames.TASKS), 'tasks')
                assert sent == ids[:2]  # the message has five; two are sent
                await ep.send(_frames.ACK, {'task_ids': ids[:1]})
                sent += ids_of(await ep.expect(_frames.TASKS), 'tasks')
                assert sent == ids[:3]  # one handed: room for one more
                await ep.send(_frames.ACK, {'task_ids': ids[1:3]})
                sent += ids_of(await ep.expect(_frames.TASKS), 'tasks')
                assert sent == ids

        asyncio.run(scenario())


def test_results_of_a_batch_share_one_message_and_only_unacknowledged_come_again(
    make_service: Callable[..., ServiceThread],
) -> None:
    st = make_service()
    assert st.service is not None
    user, token = new_user(st)
    endpoint_id, endpoint_token = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()
        queue = st.service.result_queue(group)
        ids = submit(client, endpoint_id, fid, 4, group)

        async def scenario() -> None:
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep)
                assert ids_of(await ep.expect(_frames.TASKS), 'tasks') == ids
                await ep.send(_frames.ACK, {'task_ids': ids})
                await send_results(ep, {t: i * i for i, t in enumerate(ids)})
                await ep.expect(_frames.RESULTS_OK)
            assert stats(st, queue) == (1, 0)  # one message for the four results
            async with results(st, token, group) as stream:
                assert ids_of(await stream.expect(_frames.RESULTS), 'results') == ids
                await stream.send(_frames.ACK, {'task_ids': ids[:2]})
                wait_for(lambda: all(client.get_task(t)['acknowledged'] for t in ids[:2]))
            wait_for(lambda: stats(st, queue) == (1, 0), what='the message back in its queue')
            async with results(st, token, group) as stream:
                frame = await stream.expect(_frames.RESULTS)
                assert ids_of(frame, 'results') == ids[2:]  # the taken two are not resent
                await stream.send(_frames.ACK, {'task_ids': ids[2:]})
                wait_for(lambda: all(client.get_task(t)['acknowledged'] for t in ids))
            wait_for(lambda: stats(st, queue)[1] == 0, what='the stream to end')
            assert stats(st, queue) == (0, 0)

        asyncio.run(scenario())


def test_a_message_queued_by_an_earlier_version_still_runs(
    make_service: Callable[..., ServiceThread],
) -> None:
    """Task queues are durable: single-task messages written before batching remain."""
    st = make_service()
    service = st.service
    assert service is not None
    user, token = new_user(st)
    endpoint_id, endpoint_token = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()
        (task_id,) = submit(client, endpoint_id, fid, 1, group)
        queue = service.task_queue(endpoint_id)

        async def requeue_as_before() -> None:
            # Replace the queued message by one in the earlier format (one task, its own
            # header at the top).
            await service.broker.delete(queue)
            header = {'task_id': task_id, 'function_id': fid, 'task_group_id': group, 't': {}}
            await service.broker.publish(queue, [_frames.encode(_frames.TASKS, header, [b'x'])])

        st.call(requeue_as_before())

        async def scenario() -> None:
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep)
                assert ids_of(await ep.expect(_frames.TASKS), 'tasks') == [task_id]
                await ep.send(_frames.ACK, {'task_ids': [task_id]})
                await send_results(ep, {task_id: 'done'})
                await ep.expect(_frames.RESULTS_OK)
            wait_for(lambda: stats(st, queue)[1] == 0, what='the session to end')
            assert stats(st, queue) == (0, 0)

        asyncio.run(scenario())
        assert client.get_result(task_id) == 'done'


def test_a_result_taken_from_the_stream_before_it_is_stored_stays_acknowledged(
    make_service: Callable[..., ServiceThread],
) -> None:
    """Results are stored and published at once: a client may take one first."""
    st = make_service()
    repo = st.service.repo if st.service is not None else None
    assert repo is not None
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()
        (task_id,) = submit(client, endpoint_id, fid, 1, group)
        st.call(repo.acknowledge(user, [task_id], delivered=True))
        stored = st.call(repo.store_results(endpoint_id, [(task_id, 'success', '{}', b'42')]))
        assert stored == {task_id: group}
        row = st.call(repo.result(user, task_id))
        assert row['status'] == 'success'
        assert row['acknowledged']
        assert row['result'] is None  # not kept: the client has it
        assert client.get_task(task_id)['acknowledged']


def test_submissions_on_a_result_stream_go_to_its_task_group(
    make_service: Callable[..., ServiceThread],
) -> None:
    """The Executor submits on its result stream: answered per request, never to
    another task group than the stream's."""
    st = make_service()
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group, other = client.create_task_group(), client.create_task_group()
        task_id = str(uuid.uuid4())

        def task(function_id: str, tid: str) -> dict[str, Any]:
            return {'task_id': tid, 'function_id': function_id, 'endpoint_id': endpoint_id}

        async def scenario() -> None:
            async with results(st, token, group) as stream:
                header = {'request': 7, 'task_group_id': other, 'tasks': [task(fid, task_id)]}
                await stream.send(_frames.SUBMIT, header, [pack_args((3,), {})])
                assert (await stream.expect(_frames.SUBMITTED)).header == {'request': 7}
                missing = str(uuid.uuid4())
                header = {'request': 8, 'tasks': [task(missing, str(uuid.uuid4()))]}
                await stream.send(_frames.SUBMIT, header, [pack_args((), {})])
                refused = (await stream.expect(_frames.SUBMIT_FAILED)).header
                assert refused['request'] == 8
                assert (refused['status'], refused['error']) == (404, 'not-found')
                assert missing in refused['message']

        asyncio.run(scenario())
        assert client.get_task(task_id)['task_group_id'] == group


def test_executor_fails_the_futures_of_a_refused_submission(
    make_service: Callable[..., ServiceThread],
) -> None:
    st = make_service()
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    with Executor(endpoint_id, service_url=st.url, token=token) as ex:
        future = ex.submit_to_registered_function(str(uuid.uuid4()), (1,))
        with pytest.raises(FaasNotFoundError, match='not found'):
            future.result(timeout=60)


def test_what_the_result_stream_left_running_is_cancelled_when_the_executor_closes(
    make_service: Callable[..., ServiceThread],
) -> None:
    """A coroutine still pending on the stream's loop at shutdown (an acknowledgement
    sync the service did not answer in time) is cancelled, not destroyed pending."""
    st = make_service()
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    with Executor(endpoint_id, service_url=st.url, token=token) as ex:
        with pytest.raises(FaasNotFoundError):
            ex.submit_to_registered_function(str(uuid.uuid4()), (1,)).result(timeout=60)
        assert ex._loop is not None
        left = asyncio.run_coroutine_threadsafe(asyncio.Event().wait(), ex._loop)
    assert left.cancelled()


def test_a_malformed_acknowledgement_closes_the_stream_with_a_clear_code(
    make_service: Callable[..., ServiceThread],
) -> None:
    from websockets.exceptions import ConnectionClosed

    st = make_service()
    _user, token = new_user(st)
    with Client(st.url, token) as client:
        group = client.create_task_group()

        async def scenario() -> None:
            async with results(st, token, group) as stream:
                await stream.send(_frames.ACK, {'task_ids': 5})
                with pytest.raises(ConnectionClosed) as closed:
                    await stream.expect(_frames.RESULTS)
                assert closed.value.rcvd is not None
                assert closed.value.rcvd.code == 4400
                assert 'task_ids' in closed.value.rcvd.reason

        asyncio.run(scenario())


def test_results_whose_headers_outgrow_one_message_all_reach_the_client(
    make_service: Callable[..., ServiceThread],
) -> None:
    """A batch of results is split by the length of its JSON header, not only by its
    payloads: the service adds fields to every result it queues, and a message whose
    header grew past the receivers' 1 MiB limit used to be dropped as malformed."""
    st = make_service(endpoint_prefetch=4000)
    user, token = new_user(st)
    endpoint_id, endpoint_token = new_endpoint(st, user)
    n = 2000
    with Client(st.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()
        ids = submit(client, endpoint_id, fid, n, group)

        async def scenario() -> None:
            async with endpoint(st, endpoint_token) as ep:
                await hello(ep)
                got: list[str] = []
                while len(got) < n:
                    frame = await ep.expect(_frames.TASKS)
                    assert _frames.header_length(frame_bytes(frame)) <= _frames.HEADER_BUDGET
                    got += ids_of(frame, 'tasks')
                await ep.send(_frames.ACK, {'task_ids': got})
                # One frame of results whose header (about 0.9 MiB) the service accepts.
                error = {'type': 'ValueError', 'message': 'x' * 300, 'traceback': ''}
                headers = [
                    {'task_id': t, 'status': 'failed', 'error': error, 't': {}} for t in ids
                ]
                message = _frames.encode(_frames.RESULTS, {'results': headers}, [b''] * n)
                assert 2**19 < _frames.header_length(message) < 2**20
                await ep.ws.send(message)
                await ep.expect(_frames.RESULTS_OK)
            seen: list[str] = []
            async with results(st, token, group) as stream:
                while len(seen) < n:
                    frame = await stream.expect(_frames.RESULTS)
                    seen += ids_of(frame, 'results')
                await stream.send(_frames.ACK, {'task_ids': seen})
            assert sorted(seen) == sorted(ids)

        asyncio.run(scenario())


def frame_bytes(frame: Any) -> bytes:
    """A decoded frame encoded again (to measure its header)."""
    return _frames.encode(frame.type, frame.header, frame.payloads)


def test_pack_splits_by_header_length_count_and_payload_bytes() -> None:
    from tether.exceptions import ProtocolError
    from tether.faas._frames import HEADER_BUDGET, MESSAGE_BYTES, MESSAGE_ENTRIES

    big = [({'task_id': str(i), 'pad': 'p' * 1000}, b'r') for i in range(1500)]
    messages = _frames.pack(_frames.RESULTS, 'results', big)
    assert len(messages) > 1
    decoded = [_frames.decode(m) for m in messages]  # each within the default Limits
    assert [h['task_id'] for f in decoded for h in f.header['results']] == [
        str(i) for i in range(1500)
    ]
    assert all(_frames.header_length(m) <= HEADER_BUDGET for m in messages)
    small = [({'task_id': str(i)}, b'') for i in range(MESSAGE_ENTRIES + 1)]
    counts = [len(_frames.decode(m).header['results']) for m in _frames.pack(43, 'results', small)]
    assert counts == [MESSAGE_ENTRIES, 1]
    heavy = [({'task_id': str(i)}, bytes(MESSAGE_BYTES // 2 + 1)) for i in range(3)]
    assert len(_frames.pack(43, 'results', heavy)) == 3
    with pytest.raises(ProtocolError, match='header of'):
        _frames.pack(43, 'results', [({'task_id': '1', 'pad': 'p' * HEADER_BUDGET}, b'')])


def test_a_worker_cuts_long_error_texts() -> None:
    from tether.faas.endpoint._worker import _clip

    assert _clip('short', head=True) == 'short'
    long = 'a' * 100_000 + 'END'
    cut = _clip(long, head=False)
    assert cut.endswith('END')
    assert 'characters cut' in cut
    assert len(cut) < 70_000
    assert _clip(long, head=True).startswith('aaa')
