"""The service's boundary (issue 25, items 3-5): malformed input is a 400 that names the
field (never a 500, never a value accepted that cannot be published later); idle and slow
HTTP clients are dropped; one user cannot take the service's broker channels or
connections from the others (429, and the SDK paces itself)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.faas import _tasks
from tests.faas.conftest import AMQP, AgentThread, new_endpoint, new_user, wait_for
from tether._wire._frame import PREFIX
from tether.exceptions import FaasBadRequestError, FaasConnectionError, FaasRateLimitError
from tether.faas import Client, Executor, ServiceConfig, _frames
from tether.faas._http import ws_url
from tether.faas._payload import pack_args
from tether.faas._server import ServiceThread
from tether.testing import FakeClock


def http(st: ServiceThread, token: str) -> httpx.Client:
    return httpx.Client(base_url=st.url, headers={'Authorization': f'Bearer {token}'}, timeout=60)


def refused(response: httpx.Response, *words: str) -> str:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    body = response.json()
    assert body['error'] == 'bad-request'
    for word in words:
        assert word in body['message'], body['message']
    return str(body['message'])


def submit_frame(tasks: list[dict[str, Any]], group: Any = None) -> bytes:
    payloads = [pack_args((2,), {}) for _ in tasks]
    return _frames.encode(_frames.SUBMIT, {'task_group_id': group, 'tasks': tasks}, payloads)


def with_header(raw: bytes) -> bytes:
    """A SUBMIT frame without payloads whose JSON header is ``raw``, as it is."""
    fields = list(PREFIX.unpack_from(_frames.encode(_frames.SUBMIT, {})))
    fields[5] = len(raw)  # the header's length
    return bytes(PREFIX.pack(*fields)) + raw


def test_malformed_fields_are_refused_with_400(prod_service: ServiceThread) -> None:
    user, token = new_user(prod_service)
    endpoint_id, _ = new_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client, http(prod_service, token) as h:
        fid = client.register_function(_tasks.square)

        def task(**fields: Any) -> dict[str, Any]:
            return {
                'task_id': str(uuid.uuid4()),
                'function_id': fid,
                'endpoint_id': endpoint_id,
                **fields,
            }

        def post_submit(body: bytes) -> httpx.Response:
            return h.post('/v1/submit', content=body)

        # A 300 KB task id (was a 500: the database refused the row).
        refused(post_submit(submit_frame([task(task_id='x' * 300_000)])), 'tasks[0].task_id')
        # A 300-byte task group id (was accepted; its results could never be published).
        refused(post_submit(submit_frame([task()], group='g' * 300)), 'task_group_id')
        refused(post_submit(submit_frame([task(task_id=7)])), 'task_id', 'string')
        refused(post_submit(submit_frame([task(task_id='a b')])), 'not an id')
        refused(post_submit(submit_frame([task(endpoint_id=None)])), 'endpoint_id')
        refused(post_submit(submit_frame([task(data_serializer={'x': 1})])), 'data_serializer')
        refused(post_submit(submit_frame([task(result_threshold='big')])), 'result_threshold')
        refused(post_submit(submit_frame([task(t={'a': 'now'})])), '.t')
        deep: Any = {}
        for _ in range(200):
            deep = {'a': deep}
        refused(post_submit(submit_frame([task(result_store=deep)])), 'nests deeper')
        refused(post_submit(submit_frame(['not a task'])), 'tasks[0]', 'object')  # type: ignore[list-item]
        header = {'tasks': 'abc'}
        refused(post_submit(_frames.encode(_frames.SUBMIT, header, [])), '"tasks"', 'list')
        # A frame header nested past what the JSON parser can go (was a 500).
        nested = b'{"tasks": ' + b'[' * 100_000 + b']' * 100_000 + b'}'
        refused(post_submit(with_header(nested)), 'nests too deeply')

        # JSON bodies: "task_ids" must be a list of ids (a string was answered 200).
        for path in ('/v1/tasks/status', '/v1/tasks/ack'):
            refused(h.post(path, json={'task_ids': 'abc'}), '"task_ids"', 'list')
            refused(h.post(path, json={'task_ids': ['x' * 300_000]}), '"task_ids"[0]')
            refused(h.post(path, json={'task_ids': [{'a': 1}]}), '"task_ids"[0]')
            deep_json = b'{"task_ids": ' + b'[' * 100_000 + b']' * 100_000 + b'}'
            refused(h.post(path, content=deep_json), 'nests too deeply')
            refused(h.post(path, content=b'{"task_ids": [[[[' + b'[' * 40 + b']' * 44 + b'}'))
            refused(h.post(path, content=b'{"task_ids": '), 'not JSON')
            refused(h.post(path, json=['a']), 'JSON object')
        refused(h.post('/v1/endpoints', json={'name': ['x']}), '"name"')
        refused(h.post('/v1/endpoints', json={'name': 'n' * 201}), '"name"', '200')
        refused(h.get('/v1/tasks', params={'limit': 'abc'}), '"limit"')
        long_id = 'x' * 100
        for path in (
            f'/v1/tasks/{long_id}',
            f'/v1/tasks/{long_id}/result',
            f'/v1/task_groups/{long_id}',
            f'/v1/endpoints/{long_id}',
            f'/v1/functions/{long_id}',
        ):
            refused(h.get(path), 'characters')
        # The SDK raises the matching exception.
        with pytest.raises(FaasBadRequestError, match='"task_ids"'):
            client.get_batch_result(['x' * 300])


def test_a_result_stream_refuses_a_malformed_task_group_and_submission(
    prod_service: ServiceThread,
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    user, token = new_user(prod_service)
    endpoint_id, _ = new_endpoint(prod_service, user)
    headers = {'Authorization': f'Bearer {token}'}
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = client.create_task_group()

    async def scenario() -> None:
        url = ws_url(prod_service.url, f'/v1/task_groups/{"g" * 300}/results')
        async with connect(url, additional_headers=headers) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 4400
            assert 'task_group_id' in closed.value.rcvd.reason
        url = ws_url(prod_service.url, f'/v1/task_groups/{group}/results')
        async with connect(url, additional_headers=headers) as ws:
            task = {'task_id': 'x' * 1000, 'function_id': fid, 'endpoint_id': endpoint_id}
            header = {'request': 3, 'tasks': [task]}
            await ws.send(_frames.encode(_frames.SUBMIT, header, [pack_args((), {})]))
            message = await ws.recv()
            assert isinstance(message, bytes)
            reply = _frames.decode(message)
            assert reply.type == _frames.SUBMIT_FAILED
            assert (reply.header['status'], reply.header['error']) == (400, 'bad-request')
            assert 'tasks[0].task_id' in reply.header['message']

    asyncio.run(scenario())


def test_the_longest_accepted_ids_are_published_and_run(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    """Whatever the boundary accepts can be queued and its result published: a task group
    id and a task id of the longest accepted length run to the end."""
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        group = 'G' * 64
        task_id = 'T' * 28 + str(uuid.uuid4())  # 64 characters
        task = {'task_id': task_id, 'function_id': fid, 'endpoint_id': ep.config.endpoint_id}
        answer = client._http.post('/v1/submit', content=submit_frame([task], group))
        assert answer.status_code == 200, answer.text
        assert answer.json()['task_group_id'] == group
        wait_for(lambda: client.get_task(task_id)['status'] == 'success', 60, 'the task')
        assert client.get_result(task_id) == 4
        assert json.loads(json.dumps(client.task_group_tasks(group)))[0]['task_id'] == task_id


# Idle and slow HTTP clients (item 4) ---------------------------------------------------


@pytest.fixture
def make_tight(pg_url: str, queue_prefix: str) -> Iterator[Callable[..., ServiceThread]]:
    """Services over PostgreSQL and RabbitMQ with small connection limits."""
    started: list[ServiceThread] = []

    def make(**limits: Any) -> ServiceThread:
        config = ServiceConfig(
            port=0,
            database=pg_url,
            broker=AMQP,
            queue_prefix=f'{queue_prefix}-tight',
            **limits,
        )
        st = ServiceThread(config).start()
        started.append(st)
        return st

    yield make
    for st in started:
        st.stop()


def raw(st: ServiceThread) -> socket.socket:
    host, port = st.url.removeprefix('http://').rsplit(':', 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_by_peer(sock: socket.socket, timeout: float = 30.0) -> bool:
    """Wait for the service to close ``sock`` (EOF or reset), reading what it sends."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def health(sock: socket.socket) -> bytes:
    sock.sendall(b'GET /health HTTP/1.1\r\nHost: t\r\n\r\n')
    sock.settimeout(30)
    data = b''
    while b'"ok"' not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_idle_connections_are_closed(make_tight: Callable[..., ServiceThread]) -> None:
    st = make_tight(http_keep_alive_timeout_s=0.3, http_header_timeout_s=5.0)
    silent = [raw(st) for _ in range(5)]  # never send a byte
    kept = raw(st)
    assert health(kept).startswith(b'HTTP/1.1 200')  # then idle, kept alive
    for sock in [*silent, kept]:
        with sock:
            assert closed_by_peer(sock)


def test_slow_headers_and_stalled_bodies_are_closed(
    make_tight: Callable[..., ServiceThread],
) -> None:
    st = make_tight(
        http_keep_alive_timeout_s=0.3, http_header_timeout_s=1.0, http_idle_timeout_s=0.5
    )
    with raw(st) as slow:
        # A byte of header every 0.1 s: never idle for the keep-alive or idle timeouts,
        # but the head is not complete after the header timeout.
        slow.sendall(b'GET /health HTTP/1.1\r\nHost: t\r\n')
        deadline = time.monotonic() + 30
        closed = False
        while not closed and time.monotonic() < deadline:
            readable, _, _ = select.select([slow], [], [], 0.1)
            if readable:
                closed = closed_by_peer(slow)
                break
            try:
                slow.send(b'x')
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        assert closed, 'a slow-header connection stayed open'
    with raw(st) as stalled:
        stalled.sendall(
            b'POST /v1/tasks/status HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{"ta'
        )
        assert closed_by_peer(stalled)
    with raw(st) as fine:  # a client that sends its request at once is served
        assert health(fine).startswith(b'HTTP/1.1 200')


def test_open_connections_are_capped(make_tight: Callable[..., ServiceThread]) -> None:
    from websockets.sync.client import connect

    st = make_tight(max_connections=3, http_keep_alive_timeout_s=60.0)
    _user, token = new_user(st)
    with Client(st.url, token) as client:
        group = client.create_task_group()
    url = ws_url(st.url, f'/v1/task_groups/{group}/results')
    with contextlib.ExitStack() as stack:
        first, second = (stack.enter_context(raw(st)) for _ in range(2))
        with connect(url, additional_headers={'Authorization': f'Bearer {token}'}):
            assert health(first).startswith(b'HTTP/1.1 200')
            assert health(second).startswith(b'HTTP/1.1 200')
            with raw(st) as extra:  # the fourth: closed at once
                assert closed_by_peer(extra)
        # A WebSocket counts until it closes; then there is room again.

        def served() -> bool:
            with raw(st) as sock:
                try:
                    return health(sock).startswith(b'HTTP/1.1 200')
                except OSError:
                    return False

        wait_for(served, 30, 'a connection to be accepted once the WebSocket closed')


# One user cannot disrupt the others (item 3) -------------------------------------------


async def open_streams(
    st: ServiceThread, token: str, group: str, n: int
) -> tuple[list[Any], list[int]]:
    """Open ``n`` result streams of ``group`` at once: ``(open ones, close codes of the
    refused ones)``. A refused stream is accepted, then closed with ``4000 + status``."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    url = ws_url(st.url, f'/v1/task_groups/{group}/results')
    headers = {'Authorization': f'Bearer {token}'}

    async def one() -> Any:
        ws = await connect(url, additional_headers=headers, open_timeout=60)
        try:  # refused streams are closed at once; open ones stay silent
            await asyncio.wait_for(ws.recv(), 0.5)
        except TimeoutError:
            return ws
        except ConnectionClosed as e:
            return e.rcvd.code if e.rcvd is not None else 1006
        raise AssertionError('a result stream of an empty group sent something')

    opened: list[Any] = []
    refused_codes: list[int] = []
    for start in range(0, n, 200):
        for got in await asyncio.gather(*(one() for _ in range(min(200, n - start)))):
            (refused_codes if isinstance(got, int) else opened).append(got)
    return opened, refused_codes


def test_a_users_websockets_are_bounded_and_others_keep_working(
    make_tight: Callable[..., ServiceThread], start_endpoint: Callable[..., AgentThread]
) -> None:
    st = make_tight(max_websockets_per_user=4)
    _mallory, mallory_token = new_user(st)
    alice, alice_token = new_user(st)
    ep = start_endpoint(st, alice)  # one of Alice's WebSockets
    with Client(st.url, mallory_token) as mallory:
        group = mallory.create_task_group()
    with Executor(ep.config.endpoint_id, service_url=st.url, token=alice_token) as ex:
        assert ex.submit(_tasks.square, 3).result(timeout=60) == 9  # Alice's stream open

        async def flood() -> None:
            opened, codes = await open_streams(st, mallory_token, group, 10)
            assert len(opened) == 4
            assert codes == [4429] * 6
            # Alice still opens streams and runs tasks.
            mine, refused_mine = await open_streams(st, alice_token, ex.task_group_id, 2)
            assert (len(mine), refused_mine) == (2, [])
            assert await asyncio.to_thread(lambda: ex.submit(_tasks.square, 4).result(60)) == 16
            for ws in [*opened, *mine]:
                await ws.close()
            # Once Mallory's streams are closed, she may open as many again.
            again: list[Any] = []
            deadline = time.monotonic() + 30
            while len(again) < 4 and time.monotonic() < deadline:
                got, _ = await open_streams(st, mallory_token, group, 1)
                again.extend(got)
            assert len(again) == 4
            for ws in again:
                await ws.close()

        asyncio.run(flood())


def test_more_streams_than_the_channel_budget_close_no_one_elses(
    make_tight: Callable[..., ServiceThread], start_endpoint: Callable[..., AgentThread]
) -> None:
    """One user opening more result streams than the service's RabbitMQ channel budget:
    they are refused past it (4503, retried by the SDK), and the consumers other users are
    on keep working. The budget is small here (40 channels, 100 streams, not RabbitMQ's
    2047 and 2,100 streams); that a budget stays below the ``channel_max`` RabbitMQ grants,
    so that RabbitMQ never closes the shared connection, is the next test's."""
    budget = 40
    st = make_tight(
        max_websockets_per_user=5000, max_connections=6000, broker_channel_budget=budget
    )
    _mallory, mallory_token = new_user(st)
    alice, alice_token = new_user(st)
    ep = start_endpoint(st, alice)
    with Client(st.url, mallory_token) as mallory:
        group = mallory.create_task_group()
    with Executor(ep.config.endpoint_id, service_url=st.url, token=alice_token) as ex:
        assert ex.submit(_tasks.square, 3).result(timeout=60) == 9

        async def flood() -> None:
            opened, codes = await open_streams(st, mallory_token, group, 2 * budget + 20)
            # Alice's endpoint and stream kept their consumers: a new task runs and its
            # result arrives on the stream opened before the flood.
            result = await asyncio.to_thread(lambda: ex.submit(_tasks.square, 5).result(60))
            assert result == 25
            assert set(codes) == {4503}
            assert len(opened) < budget
            await asyncio.gather(*(ws.close() for ws in opened))

        asyncio.run(flood())


def test_the_channel_budget_stays_below_what_rabbitmq_grants() -> None:
    """However large the budget asked for, the consumers' channels, the publishing channel
    and the stats channels fit in the ``channel_max`` RabbitMQ negotiated (2047 by
    default): opening one more than that would close the connection, every consumer on it.
    """
    from tether.faas._amqp import _RESERVED, _STATS_CHANNELS, AmqpBroker

    async def main() -> None:
        broker = await AmqpBroker.connect(AMQP, channel_budget=10**6)
        try:
            tune = broker._connection.transport.connection.connection_tune
            assert tune.channel_max > 0
            assert broker.channel_budget == tune.channel_max - _RESERVED
        finally:
            await broker.close()

    assert _RESERVED > 1 + _STATS_CHANNELS  # the publishing channel, the stats ones, margin
    asyncio.run(main())


def test_the_sdk_waits_out_429(make_tight: Callable[..., ServiceThread]) -> None:
    """A user at their limit of requests in progress is answered 429 with Retry-After;
    the SDK waits and sends again instead of failing the call."""
    st = make_tight(max_requests_per_user=1)
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    release = threading.Event()
    refused = threading.Event()

    def slow_body() -> Iterator[bytes]:
        yield b'{"task_ids": '
        release.wait(60)
        yield b'[]}'

    with contextlib.ExitStack() as stack:
        h = stack.enter_context(http(st, token))
        client = stack.enter_context(Client(st.url, token))
        fid = client.register_function(_tasks.square)
        answers: list[httpx.Response] = []
        holder = threading.Thread(
            target=lambda: answers.append(h.post('/v1/tasks/status', content=slow_body()))
        )
        holder.start()  # holds the user's one request in progress until released

        @stack.callback
        def end_the_hold() -> None:  # whatever happens, the held request ends
            release.set()
            holder.join(60)

        with http(st, token) as probe:
            wait_for(lambda: probe.get('/v1/tasks').status_code == 429, 30, 'the hold')

        def saw(response: httpx.Response) -> None:
            if response.status_code == 429:
                assert int(response.headers['retry-after']) >= 1
                refused.set()
                release.set()

        client._http.event_hooks['response'].append(saw)
        task_id = client.run(fid, endpoint_id, 2)  # refused once, then sent again
        assert refused.is_set()
        holder.join(60)
        assert answers[0].status_code == 200
        assert client.get_task(task_id)['task_id'] == task_id
        # Without time to wait, the refusal is an exception that says what to do.
        release.clear()
        refused.clear()
        holder = threading.Thread(
            target=lambda: answers.append(h.post('/v1/tasks/status', content=slow_body()))
        )
        holder.start()
        impatient = Client(st.url, token, retry_deadline=0.0)
        try:
            with pytest.raises(FaasRateLimitError, match='max_requests_per_user') as info:
                wait_for(lambda: impatient.get_task(task_id) and False, 30, 'a refusal')
            assert info.value.retry_after >= 1
        finally:
            impatient.close()
            release.set()
            holder.join(60)


def test_an_executor_refused_its_stream_says_so(make_tight: Callable[..., ServiceThread]) -> None:
    """An Executor whose result stream the service keeps refusing (4429: the user's
    WebSockets are at their limit) fails its futures past ``retry_deadline`` saying the
    service refused the stream and which setting bounds it, not that it was unreachable."""
    st = make_tight(max_websockets_per_user=1)
    user, token = new_user(st)
    endpoint_id, _ = new_endpoint(st, user)
    with Client(st.url, token, retry_deadline=1.0) as client:
        group = client.create_task_group()

        async def hold_and_submit() -> BaseException | None:
            opened, codes = await open_streams(st, token, group, 1)  # the user's one stream
            assert (len(opened), codes) == (1, [])
            clock = FakeClock()  # the backoff and the deadline pass when the test says

            def drive(future: Any) -> BaseException | None:
                while not future.done():
                    clock.wait_for_sleepers(1)
                    clock.advance(2.0)
                return future.exception(timeout=60)  # type: ignore[no-any-return]

            try:
                with Executor(endpoint_id, client=client, clock=clock) as ex:
                    future = ex.submit(_tasks.square, 3)
                    return await asyncio.to_thread(drive, future)
            finally:
                for ws in opened:
                    await ws.close()

        error = asyncio.run(hold_and_submit())
    assert isinstance(error, FaasConnectionError), repr(error)
    message = str(error)
    assert 'unreachable' not in message, message
    assert 'refused' in message, message
    assert 'max_websockets_per_user' in message, message
