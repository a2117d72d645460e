"""Small requests forwarded from the data callbacks: passed through, and every way it fails.

The forwarding endpoint is a real :class:`Endpoint` in this process; the owner is a
tether wire server standing in for a peer endpoint, which can misbehave on demand (an
owner that answers out of step, drops the channel or never answers is hard to get from
a real endpoint). The multi-process tests in ``test_endpoint.py`` cover real owners.
"""

from __future__ import annotations

import asyncio
import uuid as _uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tether._serve import codes as proto
from tether._serve.tls import pinned_client_context
from tether._wire import Connection, Frame, Reply, Server, connect, error_reply, run
from tether.endpoint import SiteConfig, _forwarding
from tether.endpoint._peers import PeerLink, _Inbound
from tether.endpoint._server import Endpoint
from tether.exceptions import RemoteError

SECRET = 'owner channel secret'


class Owner:
    """Objects in a dict, answered like an endpoint answers its peers; or misbehaving."""

    def __init__(self) -> None:
        self.uuid = str(_uuid.uuid4())
        self.objects: dict[str, bytes] = {}
        self.mode = 'normal'
        self.seen: list[tuple[int, dict[str, Any], int]] = []
        self.server = Server(self.handle, secret=SECRET, name='owner')

    async def handle(self, conn: Connection, frame: Frame) -> Reply | None:
        self.seen.append((frame.type, frame.header, frame.request_id))
        ids: list[str] = frame.header['ids']
        assert frame.header['endpoint'] == self.uuid
        mode = self.mode
        if mode == 'error':
            return error_reply('memory', 'no room for that here')
        if mode == 'out-of-step':
            conn.write(proto.OK, {'ids': ids, 'found': [True]}, [b'wrong'], request_id=999)
            return None
        if mode == 'drop':
            conn.abort()
            return None
        if mode == 'silent':
            return None
        if mode == 'stray':  # answers, then sends a frame nobody asked for
            stray = (proto.OK, {'ids': ids, 'found': [True]}, [b'stray'])
            asyncio.get_running_loop().call_soon(lambda: conn.write(*stray, request_id=0))
            self.mode = 'normal'
        if frame.type == proto.PUT:
            for oid, data in zip(ids, frame.payloads, strict=True):
                self.objects[oid] = bytes(data)
            return proto.OK, {'ids': ids}, ()
        if frame.type == proto.GET:
            found = [self.objects.get(i) for i in ids]
            return (
                proto.OK,
                {'ids': ids, 'found': [d is not None for d in found]},
                [d for d in found if d is not None],
            )
        if frame.type == proto.EXISTS:
            return proto.OK, {'ids': ids, 'exists': [i in self.objects for i in ids]}, ()
        for oid in ids:
            self.objects.pop(oid, None)
        return proto.OK, {'ids': ids}, ()


Scenario = Callable[[Endpoint, Owner, Connection], Awaitable[None]]


def _run(tmp_path: Path, scenario: Scenario) -> None:
    async def main() -> None:
        home = tmp_path / 'home'
        config = SiteConfig.create('ea', home)
        endpoint = Endpoint(config, home)
        owner = Owner()
        await owner.server.start()
        await endpoint.start()
        port = owner.server.address[1]

        async def opener() -> Connection:
            return await connect('127.0.0.1', port, secret=SECRET)

        link = PeerLink(owner.uuid, 'owner', 'direct', opener, first=await opener())
        endpoint.peers.links[owner.uuid] = link
        endpoint.peers.names['owner'] = owner.uuid
        host, client_port = endpoint.clients.address
        client = await connect(host, client_port, secret=config.client_token(home))
        try:
            await asyncio.wait_for(scenario(endpoint, owner, client), 60)
        finally:
            await client.close()
            await endpoint.close()
            await owner.server.close()

    run(main())


def _oid() -> str:
    return _uuid.uuid4().hex


def test_small_requests_pass_through_unchanged(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        head = {'ids': [oid], 'endpoint': owner.uuid}
        reply = await client.request(proto.PUT, head, [b'held at the owner'])
        assert reply.header == {'ids': [oid]}
        assert owner.objects[oid] == b'held at the owner'
        reply = await client.request(proto.GET, head)
        assert reply.header == {'ids': [oid], 'found': [True]}
        assert bytes(reply.payloads[0]) == b'held at the owner'
        reply = await client.request(proto.EXISTS, head)
        assert reply.header['exists'] == [True]
        await client.request(proto.EVICT, head)
        assert oid not in owner.objects
        # The owner saw the client's header as it was, under the channel's own ids.
        assert [s[1] for s in owner.seen] == [head] * 4
        assert [s[2] for s in owner.seen] == [1, 2, 3, 4]
        status = ep.status()
        assert (status['forwarded'], status['passed']) == (4, 4)
        assert status['peers'][0]['requests'] == 4

    _run(tmp_path, scenario)


def test_other_headers_are_re_encoded_for_the_owner(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        owner.objects[oid] = b'x'
        # An extra field, and the owner named by name: not passed on as it is.
        reply = await client.request(
            proto.GET, {'ids': [oid], 'endpoint': owner.uuid, 'note': 'extra'}
        )
        assert bytes(reply.payloads[0]) == b'x'
        reply = await client.request(proto.GET, {'ids': [oid], 'endpoint': 'owner'})
        assert bytes(reply.payloads[0]) == b'x'
        assert [s[1] for s in owner.seen] == [{'ids': [oid], 'endpoint': owner.uuid}] * 2
        assert (ep.forwarded, ep.passed) == (2, 0)

    _run(tmp_path, scenario)


def test_bad_ids_are_refused_before_anything_is_forwarded(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        for ids in (['../../etc/passwd'], 'not-a-list', [7]):
            with pytest.raises(RemoteError) as info:
                await client.request(proto.GET, {'ids': ids, 'endpoint': owner.uuid})
            assert info.value.code == 'bad-request'
        assert owner.seen == []

    _run(tmp_path, scenario)


def test_an_error_reply_reaches_the_client_and_the_channel_stays(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        head = {'ids': [oid], 'endpoint': owner.uuid}
        owner.mode = 'error'
        with pytest.raises(RemoteError, match='no room') as info:
            await client.request(proto.PUT, head, [b'data'])
        assert info.value.code == 'memory'
        owner.mode = 'normal'
        await client.request(proto.PUT, head, [b'data'])
        assert owner.objects[oid] == b'data'
        assert ep.status()['peers'][0]['channels'] == 1

    _run(tmp_path, scenario)


@pytest.mark.parametrize('mode', ['out-of-step', 'drop'])
def test_a_failed_channel_gives_a_clear_error_never_a_wrong_object(
    tmp_path: Path, mode: str
) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        owner.objects[oid] = b'right'
        owner.mode = mode
        # The channel is dropped; the one retry needs a fresh peering, which this
        # endpoint (no relay) cannot make: the client is told that the channel failed,
        # and why the peer cannot be reached again.
        with pytest.raises(RemoteError, match='no relay') as info:
            await client.request(proto.GET, {'ids': [oid], 'endpoint': owner.uuid})
        assert info.value.code == 'peer-failed'
        assert ep.status()['peers'] == []  # the broken link is gone
        # The client's connection still works.
        with pytest.raises(RemoteError, match='no relay'):
            await client.request(proto.GET, {'ids': [oid], 'endpoint': owner.uuid})

    _run(tmp_path, scenario)


def test_a_failed_channel_is_retried_over_a_fresh_peering(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        owner.objects[oid] = b'right'
        _drop_then_peer_again(ep, owner)
        reply = await client.request(proto.GET, {'ids': [oid], 'endpoint': owner.uuid})
        assert bytes(reply.payloads[0]) == b'right'
        assert len(owner.seen) == 2

    _run(tmp_path, scenario)


def test_a_frame_the_peer_sent_unasked_drops_the_channel(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        owner.objects[oid] = b'right'
        head = {'ids': [oid], 'endpoint': owner.uuid}
        owner.mode = 'stray'
        assert bytes((await client.request(proto.GET, head)).payloads[0]) == b'right'
        # Wait until the stray frame reached the idle channel (its protocol holds it).
        link = ep.peers.links[owner.uuid]
        deadline = asyncio.get_running_loop().time() + 30
        while all(c.protocol.idle for c in link._idle):
            assert asyncio.get_running_loop().time() < deadline, 'the stray frame never came'
            await asyncio.sleep(0.005)
        # The next request finds it waiting: the channel is dropped, never trusted.
        with pytest.raises(RemoteError, match='no relay') as info:
            await client.request(proto.GET, head)
        assert info.value.code == 'peer-failed'
        assert ep.status()['peers'] == []

    _run(tmp_path, scenario)


def test_an_owner_that_never_answers_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_forwarding, 'PEER_TIMEOUT', 0.3)

    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        owner.mode = 'silent'
        with pytest.raises(RemoteError) as info:
            await client.request(proto.GET, {'ids': [_oid()], 'endpoint': owner.uuid})
        assert info.value.code == 'peer-failed'

    _run(tmp_path, scenario)


def test_pipelined_requests_are_answered_in_order(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oids = [_oid() for _ in range(6)]
        for n, oid in enumerate(oids):
            owner.objects[oid] = f'value {n}'.encode()
        # Six requests written back to back: the first goes through the fast path, the
        # others wait behind it and go the general way, one channel at a time.
        rids = [
            client.write_request(proto.GET, {'ids': [oid], 'endpoint': owner.uuid}) for oid in oids
        ]
        replies = [await client.recv() for _ in oids]
        assert [r.request_id for r in replies] == rids
        assert [bytes(r.payloads[0]) for r in replies] == [f'value {n}'.encode() for n in range(6)]
        assert ep.forwarded == 6

    _run(tmp_path, scenario)


def test_a_large_reply_goes_on_to_the_client_as_it_arrives(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        owner.objects[oid] = bytes(range(256)) * 4096  # 1 MiB
        reply = await client.request(proto.GET, {'ids': [oid], 'endpoint': owner.uuid})
        assert bytes(reply.payloads[0]) == owner.objects[oid]
        assert ep.piped['get'] == 1
        assert ep.passed == 0  # the request went through unchanged, the reply did not

    _run(tmp_path, scenario)


def _drop_then_peer_again(ep: Endpoint, owner: Owner) -> None:
    """The owner drops the channel in use; peering again gives a channel to it, well again."""
    owner.mode = 'drop'
    port = owner.server.address[1]

    async def peer_again(target: str) -> PeerLink:
        # What a relay would give: a new channel to the owner.
        owner.mode = 'normal'
        conn = await connect('127.0.0.1', port, secret=SECRET)
        return PeerLink(owner.uuid, 'owner', 'direct', _no_more, first=conn)

    ep.peers._peer = peer_again  # type: ignore[method-assign]


async def _no_more() -> Connection:
    raise AssertionError('no further channel is needed')


# The owner's side: a peer's small requests answered from the parser ----------------------


def _run_owner(
    tmp_path: Path, scenario: Callable[[Endpoint, Connection], Awaitable[None]]
) -> None:
    """A real endpoint as the owner, and a peer channel to it (TLS, session secret)."""

    async def main() -> None:
        home = tmp_path / 'home'
        owner = Endpoint(SiteConfig.create('eb', home), home)
        await owner.start()
        peer = str(_uuid.uuid4())
        owner.peers._inbound[peer] = _Inbound(peer, 'session', b'session secret', '')
        channel = await connect(
            '127.0.0.1',
            owner.peer_server.address[1],
            secret=b'session secret',
            ssl=pinned_client_context(owner.cert_pem),
            client=f'peer:{peer}',
        )
        try:
            await asyncio.wait_for(scenario(owner, channel), 60)
        finally:
            await channel.close()
            await owner.close()

    run(main())


def test_the_owner_answers_a_peers_small_requests(tmp_path: Path) -> None:
    async def scenario(owner: Endpoint, channel: Connection) -> None:
        oid = _oid()
        head = {'ids': [oid], 'endpoint': owner.uuid}
        # Written back to back: answered in order.
        rids = [
            channel.write_request(proto.PUT, head, [b'stored by a peer']),
            channel.write_request(proto.GET, head),
            channel.write_request(proto.EXISTS, head),
            channel.write_request(proto.GET, {'ids': [_oid()], 'endpoint': owner.uuid}),
        ]
        replies = [await channel.recv() for _ in rids]
        assert [r.request_id for r in replies] == rids
        assert replies[0].header == {'ids': [oid]}
        assert replies[1].header == {'ids': [oid], 'found': [True]}
        assert bytes(replies[1].payloads[0]) == b'stored by a peer'
        assert replies[2].header['exists'] == [True]
        assert replies[3].header['found'] == [False]
        assert replies[3].payloads == []
        assert owner.status()['requests'] == 4

    _run_owner(tmp_path, scenario)


def test_the_owner_refuses_what_it_refuses_the_general_way(tmp_path: Path) -> None:
    async def scenario(owner: Endpoint, channel: Connection) -> None:
        oid = _oid()
        bad = [
            (proto.PUT, {'ids': [oid, _oid()], 'endpoint': owner.uuid}, [b'one']),
            (proto.PUT, {'ids': [oid], 'endpoint': owner.uuid}, [b'one', b'two']),
            (proto.GET, {'ids': ['../x'], 'endpoint': owner.uuid}, []),
            (proto.GET, {'ids': [oid], 'endpoint': str(_uuid.uuid4())}, []),
        ]
        for mtype, header, payloads in bad:
            with pytest.raises(RemoteError) as info:
                await channel.request(mtype, header, payloads)
            assert info.value.code == 'bad-request'
        assert len(owner.table) == 0

    _run_owner(tmp_path, scenario)


def test_a_failure_at_the_owner_is_an_error_reply_not_a_stuck_channel(tmp_path: Path) -> None:
    async def scenario(owner: Endpoint, channel: Connection) -> None:
        def disk_full(oid: str, data: Any) -> None:
            raise OSError(28, 'No space left on device')

        owner.table.put = disk_full  # type: ignore[method-assign]
        head = {'ids': [_oid()], 'endpoint': owner.uuid}
        with pytest.raises(RemoteError, match='No space left') as info:
            await channel.request(proto.PUT, head, [b'data'])
        assert info.value.code == 'internal'
        # The channel goes on answering.
        assert (await channel.request(proto.GET, head)).header['found'] == [False]

    _run_owner(tmp_path, scenario)


def test_a_set_retried_over_a_fresh_peering_carries_its_object(tmp_path: Path) -> None:
    async def scenario(ep: Endpoint, owner: Owner, client: Connection) -> None:
        oid = _oid()
        _drop_then_peer_again(ep, owner)
        head = {'ids': [oid], 'endpoint': owner.uuid}
        await client.request(proto.PUT, head, [b'sent twice, stored once'])
        assert owner.objects[oid] == b'sent twice, stored once'
        assert [s[0] for s in owner.seen] == [proto.PUT, proto.PUT]

    _run(tmp_path, scenario)
