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
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.faas import _tasks
from tests.faas.conftest import AMQP, AgentThread, new_endpoint, new_user, wait_for
from tether._wire._frame import PREFIX
from tether.exceptions import FaasBadRequestError
from tether.faas import Client, ServiceConfig, _frames
from tether.faas._http import ws_url
from tether.faas._payload import pack_args
from tether.faas._server import ServiceThread


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
