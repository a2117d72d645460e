"""The endpoint protocol's shortcuts for many endpoints (issue 27, item 7), against
PostgreSQL and RabbitMQ, with a raw endpoint that speaks the frames itself:

* a ``RESULTS`` message stands for the hand-off of its tasks (no ``ACK`` needed): the
  tasks are done, their broker messages and the session's bookkeeping released;
* tasks submitted through the replica that holds their endpoint's session are handed to
  it directly (no broker message; ``direct`` in the database): when the session ends they
  are queued in the broker for the next one, and when the replica is killed the next
  session, on another replica, queues them again from the database. Each reaches the
  endpoint once."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from tests.faas._replicas import Replica, replica_pair
from tests.faas.conftest import AMQP, new_endpoint, new_user, wait_for
from tether.faas import Client, _frames, _session
from tether.faas._http import ws_url
from tether.faas._payload import pack_result
from tether.faas._server import ServiceThread

NONE_RESULT = pack_result(None, 'tether')


def noop() -> None:
    return None


class RawEndpoint:
    """An endpoint that speaks the frames by hand: it answers only when told to."""

    def __init__(self, url: str, token: str, held: tuple[str, ...] = ()) -> None:
        self._connect = connect(
            ws_url(url, '/v1/endpoint/connect'),
            additional_headers={'Authorization': f'Bearer {token}'},
            max_size=None,
            compression=None,
            open_timeout=30,
        )
        self.ws: ClientConnection = self._connect.__enter__()
        hello = {'held': list(held), 'engine': 'raw', 'min_workers': 0, 'max_workers': 1}
        self.ws.send(_frames.encode(_frames.HELLO, hello))
        assert self._frame(30).type == _frames.WELCOME

    def _frame(self, timeout: float) -> Any:
        message = self.ws.recv(timeout=timeout)
        assert isinstance(message, bytes)
        return _frames.decode(message)

    def tasks(self, n: int, timeout: float = 60) -> list[str]:
        """The ids of the next ``n`` tasks sent (in ``TASKS`` messages)."""
        ids: list[str] = []
        deadline = time.monotonic() + timeout
        while len(ids) < n:
            frame = self._frame(max(0.1, deadline - time.monotonic()))
            if frame.type == _frames.TASKS:
                ids.extend(task.task_id for task, _ in _frames.decode_tasks(frame))
        return ids

    def answer(self, ids: list[str]) -> None:
        """Results of ``ids`` (no-op, success), with no ``ACK`` before them."""
        entries = [
            ({'task_id': t, 'status': 'success', 'result_serializer': 'tether'}, NONE_RESULT)
            for t in ids
        ]
        for message in _frames.pack(_frames.RESULTS, 'results', entries):
            self.ws.send(message)

    def serve(self, n: int, timeout: float = 90) -> list[str]:
        """Answer every task sent until ``n`` were; return their ids as they came."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while len(seen) < n:
            ids = self.tasks(1, max(0.1, deadline - time.monotonic()))
            seen.extend(ids)
            self.answer(ids)
        return seen

    def close(self) -> None:
        self._connect.__exit__(None, None, None)


def _submit(client: Client, fid: str, eid: str, n: int) -> list[str]:
    batch = client.create_batch()
    for _ in range(n):
        batch.add_call(fid, eid, (), {})
    return [str(t) for t in client.batch_run(batch)]


def _all_done(client: Client, ids: list[str]) -> bool:
    return all(client.get_task(t)['status'] == 'success' for t in ids)


def _direct(st: ServiceThread, ids: list[str]) -> dict[str, int]:
    assert st.service is not None
    rows = st.call(
        st.service.repo.db.fetch(
            'SELECT task_id, direct FROM faas_tasks WHERE task_id = ANY($1::text[])', ids
        )
    )
    return {r['task_id']: r['direct'] for r in rows}


@contextlib.contextmanager
def _twenty_submitted(
    st: ServiceThread,
) -> Iterator[tuple[Client, RawEndpoint, str, list[str]]]:
    """A new user's client, a raw endpoint connected to ``st`` and 20 no-op tasks
    submitted to it: ``(client, endpoint, endpoint_id, task_ids)``."""
    user, token = new_user(st)
    eid, ep_token = new_endpoint(st, user)
    endpoint = RawEndpoint(st.url, ep_token)
    try:
        with Client(st.url, token) as client:
            fid = client.register_function(noop)
            yield client, endpoint, eid, _submit(client, fid, eid, 20)
    finally:
        endpoint.close()


def test_a_result_stands_for_its_hand_off(prod_service: ServiceThread) -> None:
    with _twenty_submitted(prod_service) as (client, endpoint, eid, ids):
        # Handed to the session directly: this replica holds the endpoint's session.
        assert set(_direct(prod_service, ids).values()) == {1}
        got = endpoint.tasks(20)
        assert sorted(got) == sorted(ids)
        endpoint.answer(got)  # no ACK first
        assert wait_for(lambda: _all_done(client, ids), 60, 'the results stored')
        assert [client.get_result(t) for t in ids] == [None] * 20
        assert prod_service.service is not None
        session = dict.get(prod_service.service.sessions, eid)
        assert session is not None
        # Nothing left waiting for a hand-off, nothing held of the broker's.
        assert wait_for(lambda: not session._forwarded and not session._direct, 30)
        assert len(session.tracker) == 0
        queue = prod_service.service.task_queue(eid)
        assert prod_service.call(prod_service.service.broker.stats(queue))[0] == 0


def test_a_session_that_ends_queues_what_it_was_handed(prod_service: ServiceThread) -> None:
    user, token = new_user(prod_service)
    eid, ep_token = new_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(noop)
        first = RawEndpoint(prod_service.url, ep_token)
        try:
            ids = _submit(client, fid, eid, 20)
            assert sorted(first.tasks(20)) == sorted(ids)  # sent, never answered
        finally:
            first.close()
        # It forgot them (held nothing): its next session gets each of them once, through
        # the broker queue they were put in when the first session ended.
        second = RawEndpoint(prod_service.url, ep_token)
        try:
            seen = second.serve(20)
            assert sorted(seen) == sorted(ids)
            assert wait_for(lambda: _all_done(client, ids), 60, 'the results stored')
            assert set(_direct(prod_service, ids).values()) == {0}
        finally:
            second.close()


def test_a_backlog_over_its_byte_bound_goes_through_the_broker(
    prod_service: ServiceThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lower bound than the default 64 MiB, so that a small batch is over it.
    monkeypatch.setattr(_session, 'DIRECT_BYTES', 16)
    with _twenty_submitted(prod_service) as (client, endpoint, _eid, ids):
        # Not held by the replica: queued in the broker, each sent once.
        assert set(_direct(prod_service, ids).values()) == {0}
        seen = endpoint.serve(20)
        assert sorted(seen) == sorted(ids)
        assert wait_for(lambda: _all_done(client, ids), 60, 'the results stored')


@pytest.fixture
def small_pair(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, queue_prefix: str
) -> Iterator[tuple[Replica, Replica]]:
    # Two tasks sent at a time: the rest of a batch waits in the session when the
    # replica holding it is killed.
    settings = 'endpoint_prefetch = 2\n'
    folder = tmp_path_factory.mktemp('direct')
    with replica_pair(folder, pg_url, AMQP, queue_prefix, settings) as pair:
        yield pair


def test_a_killed_replica_s_hand_offs_are_recovered(
    prod_service: ServiceThread, small_pair: tuple[Replica, Replica]
) -> None:
    killed, kept = small_pair
    user, token = new_user(prod_service)
    eid, ep_token = new_endpoint(prod_service, user)
    first = RawEndpoint(killed.url, ep_token)
    with Client(killed.url, token) as client:
        fid = client.register_function(noop)
        ids = _submit(client, fid, eid, 20)
        assert len(first.tasks(2)) == 2  # the other 18 wait in the session
    assert set(_direct(prod_service, ids).values()) == {1}
    killed.kill()
    first.close()
    # The endpoint (holding nothing) reaches the other replica, whose session queues
    # them again from the database; each comes once.
    second = RawEndpoint(kept.url, ep_token)
    try:
        seen = second.serve(20)
        assert sorted(seen) == sorted(ids)
        with Client(kept.url, token) as client:
            assert wait_for(lambda: _all_done(client, ids), 60, 'the results stored')
        assert set(_direct(prod_service, ids).values()) == {0}
    finally:
        second.close()


def test_a_backlog_counts_its_payload_bytes_as_tasks_come_and_go() -> None:
    backlog = _session._Backlog()
    backlog.extend([({'task_id': 'a'}, b'xx'), ({'task_id': 'b'}, memoryview(b'yyy'))])
    backlog.extend([({'task_id': 'c'}, b'z' * 10)])
    assert backlog.nbytes == 15
    assert backlog.popleft()[0]['task_id'] == 'a'
    assert backlog.nbytes == 13
    backlog.drop({'c', 'unknown'})
    assert [h['task_id'] for h, _ in backlog] == ['b']
    assert backlog.nbytes == 3
    backlog.drop({'unknown'})
    assert backlog.nbytes == 3
