"""Large values between agent processes of one host: the hybrid exchange's shared-memory
slots (reused, copied out by the receiver, refused when they name anything else)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tether._wire import Server, error_reply
from tether.agents import Manager
from tether.agents.exchange._link import open_link
from tether.agents.exchange._shm import Arena, MappedReader, identity
from tether.agents.launcher import ProcessLauncher
from tether.agents.message import ACK, AGENT_MESSAGE
from tether.exceptions import MessageRejectedError
from tether.testing.agents import raw_request

pytestmark = pytest.mark.skipif(not identity(), reason='needs memfd and /proc (Linux)')


def _wait_direct(transport: Any, agent_id: str) -> None:
    deadline = time.monotonic() + 60
    while transport._address(agent_id) is None and time.monotonic() < deadline:
        transport._addresses.pop(agent_id, None)  # not yet published
        time.sleep(0.02)


def test_large_values_cross_processes_through_reused_slots(
    make_exchange: Any, redis_client: Any
) -> None:
    import numpy as np

    exchange = make_exchange('hybrid', threshold=10_000)
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=60)
        transport = exchange.transport()
        _wait_direct(transport, handle.agent_id)
        array = np.arange(200_000, dtype=np.float64)
        arena = transport._arena

        def acknowledged() -> None:
            # A slot is reused once its message is acknowledged (acks are batched, and
            # late under load): wait for that, so the count below does not race them.
            deadline = time.monotonic() + 30
            while arena.inflight and time.monotonic() < deadline:
                time.sleep(0.01)
            assert arena.inflight == 0

        for _ in range(5):
            before = transport.shm_sends
            back = handle.echo(array).result(60)
            assert transport.shm_sends == before + 1
            assert type(back) is np.ndarray  # the value itself, copied out of the slot
            assert np.array_equal(back, array)
            back[0] = -1.0  # writable, and not the sender's memory
            assert array[0] == 0.0
            acknowledged()
            data = handle.echo(b'y' * 300_000).result(60)
            assert type(data) is bytes
            assert data == b'y' * 300_000
            acknowledged()
        # Nothing went through the store, and slots were reused, not made per message:
        # one slot of each size class, made once.
        assert not list(redis_client.scan_iter(match=f'{exchange.prefix}obj:*'))
        assert arena.made == 2


def test_a_reader_maps_only_the_slots_it_is_told_about() -> None:
    arena = Arena()
    reader = MappedReader(max_bytes=1 << 20)
    try:
        slot = arena.write(b'abc' * 1000)
        ref = arena.ref(0, slot)
        (view,) = reader.payloads([ref], [bytearray()])
        assert bytes(view) == b'abc' * 1000
        del view

        def refused(refs: Any, payloads: Any = None, match: str = 'shared-memory') -> None:
            with pytest.raises(MessageRejectedError, match=match):
                reader.payloads(refs, payloads or [bytearray()])

        refused('not a list')
        refused([[0, os.getpid(), slot.fd, arena.token, slot.serial]])  # too short
        refused([[1, *ref[1:]]])  # no such payload
        refused([ref], [b'inline data'])  # the payload is not empty
        refused([[0, *ref[1:5], slot.capacity + 1]], match='larger than its slot')
        refused([[0, *ref[1:5], 2 << 20]], match='over the limit')
        refused([[0, *ref[1:3], 'f' * 16, ref[4], 10]], match='another file')
        refused([[0, *ref[1:4], ref[4] + 1, 10]], match='another file')
        refused([[0, *ref[1:3], '../etc', ref[4], 10]], match='invalid')
        with tempfile.TemporaryFile() as f:
            f.write(b'secret')
            f.flush()
            refused([[0, os.getpid(), f.fileno(), arena.token, 1, 6]], match='another file')
        arena.release([slot])
        again = arena.write(b'xyz' * 1000)
        assert again is slot  # a free slot is reused
        arena.release([again])
        assert arena.trim(3600.0) == 0  # used just now: kept
        assert arena.trim(0.0) == slot.capacity  # unused since: closed
        assert arena.write(b'new') is not slot
    finally:
        reader.close()
        arena.close()


def test_shared_memory_references_through_redis_are_refused(make_exchange: Any) -> None:
    from tether.agents.launcher import ThreadLauncher

    exchange = make_exchange('redis')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        future = raw_request(exchange, handle.agent_id, {'m': [[0, 1, 1, 'f' * 16, 1, 1]]})
        with pytest.raises(MessageRejectedError, match='direct links'):
            future.result(30)
        assert handle.echo(2).result(30) == 2


@pytest.fixture
def refusing_server() -> Iterator[Server]:
    async def handler(conn: Any, frame: Any) -> Any:
        if 'm' in frame.header:
            return error_reply('shm', 'cannot read the shared memory')
        return (ACK, None, ())

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    srv = Server(handler, host='127.0.0.1', port=0, secret='s', name='shm test')
    asyncio.run_coroutine_threadsafe(srv.start(), loop).result(30)
    yield srv
    asyncio.run_coroutine_threadsafe(srv.close(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    loop.close()


def test_a_refused_slot_turns_slots_off_and_the_message_is_rerouted(
    refusing_server: Server,
) -> None:
    rerouted: list[Any] = []
    acked: list[Any] = []
    done = threading.Event()

    def reroute(dest: str, header: Any, payloads: Any, why: str, extra: Any) -> None:
        rerouted.append((dest, why, extra))
        done.set()

    host, port = refusing_server.address
    link = open_link(
        host, port, AGENT_MESSAGE, reroute, lambda _: None, secret='s', on_acked=acked.append
    )
    link.shm = True
    try:
        link.send('box', {'m': [[0, 1, 1, 'f' * 16, 1, 1]]}, [b''], extra='with slots')
        assert done.wait(30)
        assert rerouted == [('box', 'cannot read the shared memory', 'with slots')]
        assert not link.shm
        link.send('box', {}, [], extra='plain')
        deadline = time.monotonic() + 30
        while not acked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert acked == ['plain']
    finally:
        link.close()


def test_a_reader_keeps_a_bounded_number_of_mappings(monkeypatch: pytest.MonkeyPatch) -> None:
    arena = Arena()
    reader = MappedReader(max_bytes=1 << 20)
    try:
        slots = [arena.take(100_000) for _ in range(4)]  # 128 KiB each
        for slot in slots:
            slot.size = 10
        monkeypatch.setattr(reader.mappings.cache, 'nbytes', 3 * 128 * 1024)
        for slot in slots:
            reader.payloads([arena.ref(0, slot)], [bytearray()])
        assert len(reader.mappings.cache) == 3  # the oldest mapping was closed
        monkeypatch.setattr(reader.mappings.cache, 'entries', 1)
        reader.payloads([arena.ref(0, slots[0])], [bytearray()])
        assert len(reader.mappings.cache) == 1
        arena.release(slots)
    finally:
        reader.close()
        arena.close()


def test_a_receiver_without_slots_refuses_them_and_the_value_goes_by_the_store(
    make_exchange: Any, redis_client: Any
) -> None:
    exchange = make_exchange('hybrid', threshold=10_000)
    transport = exchange.transport()  # this process reads and sends slots
    assert transport._arena is not None
    exchange.shm = False  # the agent's process (it gets this exchange) does not
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=60)
        _wait_direct(transport, handle.agent_id)
        assert handle.echo(1).result(60) == 1  # opens the direct link
        (link,) = transport._links.values()
        assert not link.shm  # the agent's server did not offer to read slots
        link.shm = True  # as if it had: it refuses, and the message goes through Redis
        before = transport.fallback_sends
        assert handle.echo(b'z' * 50_000).result(60) == b'z' * 50_000
        assert not link.shm
        assert transport.fallback_sends == before + 1
