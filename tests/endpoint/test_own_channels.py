"""Client connections with a peer channel of their own (``CHANNEL``), on loopback."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid as _uuid
from typing import Any

import pytest

from tests.endpoint.conftest import Relay, Site, wait_for
from tether._serve.codes import CHANNEL, GET, OK
from tether._wire import SyncConnection, encode_head
from tether.connectors.endpoint import EndpointKey
from tether.endpoint import find_config
from tether.exceptions import ConnectorError, RemoteError, WireConnectionError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def two_sites(site: Site, relay: Relay, a: str, b: str, **settings_a: object) -> None:
    port = free_port()
    site.configure(a, relay.address, **settings_a)  # type: ignore[arg-type]
    site.configure(
        b,
        relay.address,
        peering={'port': port, 'advertise': [f'127.0.0.1:{port}']},
        storage={'persist': True},
    )
    site.start(a)
    site.start(b)


def owner_holding(site: Site, relay: Relay, a: str, b: str, data: bytes) -> tuple[Any, Any]:
    """Sites ``a`` and ``b`` (reachable); a connector of ``b`` and the key of ``data`` there."""
    two_sites(site, relay, a, b)
    conn_b = site.connector(b)
    return conn_b, conn_b.put(data)


def raw_client(site: Site, name: str) -> SyncConnection:
    config = find_config(name, site.home)
    info = json.loads((config.folder(site.home) / 'state.json').read_text())
    return SyncConnection(info['host'], info['port'], secret=config.client_token(site.home))


def test_a_connector_uses_a_channel_of_its_own(site: Site, loop_relay: Relay) -> None:
    """Every request for the owner's objects goes over the connection's own channel."""
    two_sites(site, loop_relay, 'own-a', 'own-b')
    conn_a, conn_b = site.connector('own-a'), site.connector('own-b')
    keys = [conn_b.put(f'value {n}'.encode()) for n in range(10)]
    assert [bytes(conn_a.get(k)) for k in keys] == [f'value {n}'.encode() for n in range(10)]
    assert conn_a.get(EndpointKey(str(_uuid.uuid4()), keys[0].endpoint_id)) is None
    conn_a.set(keys[0], b'set from A')
    assert bytes(conn_b.get(keys[0])) == b'set from A'
    assert conn_a.exists(keys[1])
    conn_a.evict(keys[1])
    assert not conn_b.exists(keys[1])
    assert [bytes(v) for v in conn_a.get_batch(keys[2:4])] == [b'value 2', b'value 3']
    # A large object streams through both ways, whole.
    big = os.urandom(6_000_000)
    conn_a.set(keys[5], big)
    assert bytes(conn_b.get(keys[5])) == big
    assert bytes(conn_a.get(keys[5])) == big
    status = site.status('own-a')
    assert status['own_channels'] == {'open': 1, 'opened': 1}
    assert status['forwarded'] == 0  # nothing went through the shared channels
    assert status['peers'][0]['own_channels'] == 1
    conn_a.close()
    wait_for(lambda: site.status('own-a')['own_channels']['open'] == 0, what='channel closed')
    assert site.status('own-a')['peers'][0]['own_channels'] == 0
    conn_b.close()


def test_without_own_channels_requests_are_forwarded(site: Site, loop_relay: Relay) -> None:
    """Off at the connector (``own_channels=False``) or at the endpoint (``0``)."""
    two_sites(site, loop_relay, 'fw-a', 'fw-b', peering={'own_channels': 0})
    conn_b = site.connector('fw-b')
    key = conn_b.put(b'x')
    for own_channels in (False, True):
        conn_a = site.connector('fw-a', own_channels=own_channels)
        assert bytes(conn_a.get(key)) == b'x'
        conn_a.close()
    status = site.status('fw-a')
    assert status['own_channels'] == {'open': 0, 'opened': 0}
    assert status['forwarded'] == 2
    with pytest.raises(RemoteError) as err:  # not busy: the connector asks again much later
        raw_client(site, 'fw-a').request(CHANNEL, {'endpoint': key.endpoint_id})
    assert err.value.code == 'unsupported'
    conn_b.close()


def test_refusals_leave_the_connection_usable(site: Site, loop_relay: Relay) -> None:
    conn_b, key = owner_holding(site, loop_relay, 'ref-a', 'ref-b', b'kept')
    b_uuid = key.endpoint_id
    raw = raw_client(site, 'ref-a')
    a_uuid = find_config('ref-a', site.home).uuid
    for target, code in [(a_uuid, 'bad-request'), ('ref-b', 'unsupported'), (None, 'bad-request')]:
        with pytest.raises(RemoteError) as err:
            raw.request(CHANNEL, {'endpoint': target})
        assert err.value.code == code
    # Still an ordinary connection.
    reply = raw.request(GET, {'ids': [key.object_id], 'endpoint': b_uuid})
    assert bytes(reply.payloads[0]) == b'kept'
    # A frame sent behind CHANNEL, before its reply, is refused (its bytes would be lost).
    get = encode_head(GET, {'ids': [key.object_id], 'endpoint': b_uuid}, (), 11, 0)
    raw.sock.sendall(encode_head(CHANNEL, {'endpoint': b_uuid}, (), 10, 0) + get)
    first, second = raw.recv(), raw.recv()
    assert (first.request_id, first.header['code']) == (10, 'bad-request')
    assert (second.request_id, second.type) == (11, OK)
    raw.close()
    conn_b.close()


def test_a_budget_of_own_channels(site: Site, loop_relay: Relay) -> None:
    """Past ``peering.own_channels`` per peer, connections are forwarded as usual."""
    two_sites(site, loop_relay, 'bud-a', 'bud-b', peering={'own_channels': 1})
    conn_b = site.connector('bud-b')
    key = conn_b.put(b'v')
    first, second = raw_client(site, 'bud-a'), raw_client(site, 'bud-a')
    assert first.request(CHANNEL, {'endpoint': key.endpoint_id}).header == {'path': 'direct'}
    with pytest.raises(RemoteError) as err:
        second.request(CHANNEL, {'endpoint': key.endpoint_id})
    assert err.value.code == 'busy'
    # The one that has it now talks to the owner, the other goes on through the pool.
    head = {'ids': [key.object_id], 'endpoint': key.endpoint_id}
    assert bytes(first.request(GET, head).payloads[0]) == b'v'
    assert bytes(second.request(GET, head).payloads[0]) == b'v'
    # Connectors in two threads: one gets the channel... none is left, so both forward.
    conn_a = site.connector('bud-a')
    results: list[bytes] = []

    def worker() -> None:
        for _ in range(20):
            results.append(bytes(conn_a.get(key)))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [b'v'] * 40
    status = site.status('bud-a')
    assert status['own_channels']['open'] == 1  # only the raw connection's
    assert status['forwarded'] >= 40
    for c in (first, second):
        c.close()
    conn_a.close()
    conn_b.close()


def test_garbage_through_an_own_channel_drops_only_it(site: Site, loop_relay: Relay) -> None:
    """The owner checks what comes through as it checks any peer's; A goes on serving."""
    conn_b, key = owner_holding(site, loop_relay, 'bad-a', 'bad-b', b'safe')
    raw = raw_client(site, 'bad-a')
    raw.request(CHANNEL, {'endpoint': key.endpoint_id})
    # Through the channel the client speaks to the owner, which refuses what a peer may
    # not send, and closes on bytes that are no frame.
    with pytest.raises(RemoteError) as err:
        raw.request(GET, {'ids': [key.object_id], 'endpoint': 'someone-else'})
    assert err.value.code == 'bad-request'
    raw.sock.sendall(b'\xff' * 64)
    said = raw.recv(any_version=True)  # the owner's last word, then it hangs up
    assert said.header['code'] in ('protocol', 'version')
    with pytest.raises(WireConnectionError):
        raw.recv()
    raw.close()
    wait_for(lambda: site.status('bad-a')['own_channels']['open'] == 0, what='channel closed')
    conn_a = site.connector('bad-a')
    assert bytes(conn_a.get(key)) == b'safe'
    conn_a.close()
    conn_b.close()


def test_the_owner_restarts_under_an_own_channel(site: Site, loop_relay: Relay) -> None:
    """A clear error while the owner is down, then the same connector recovers."""
    two_sites(site, loop_relay, 'rs-a', 'rs-b')
    conn_a, conn_b = site.connector('rs-a'), site.connector('rs-b')
    key = conn_b.put(b'persisted')
    assert bytes(conn_a.get(key)) == b'persisted'
    assert site.status('rs-a')['own_channels']['open'] == 1
    site.stop('rs-b')
    with pytest.raises(ConnectorError):
        conn_a.get(key)
    site.start('rs-b')
    assert bytes(conn_a.get(key)) == b'persisted'
    # A channel of its own again, once the connector asks anew (after a short wait).
    wait_for(
        lambda: conn_a.get(key) is not None and site.status('rs-a')['own_channels']['open'] == 1,
        what='a new channel of its own',
    )
    conn_a.close()
    conn_b.close()


def test_a_busy_refusal_keeps_the_channels_other_threads_hold(
    site: Site, loop_relay: Relay
) -> None:
    """One connection holds the only channel; another is refused and forwards meanwhile."""
    two_sites(site, loop_relay, 'hold-a', 'hold-b', peering={'own_channels': 1})
    conn_b = site.connector('hold-b')
    key = conn_b.put(b'held')
    conn_a = site.connector('hold-a')
    assert bytes(conn_a.get(key)) == b'held'  # the connector's first connection has it
    assert site.status('hold-a')['own_channels']['open'] == 1
    # As if another thread were in a request on that connection: this one needs a second,
    # which the endpoint refuses (busy); the request is forwarded.
    with conn_a._own[key.endpoint_id].connection() as holder:
        assert bytes(conn_a.get(key)) == b'held'
        assert site.status('hold-a')['forwarded'] == 1
    # The holder's connection, and its channel, are still there and in use.
    assert holder.sock.fileno() != -1
    assert site.status('hold-a')['own_channels'] == {'open': 1, 'opened': 1}
    conn_a.close()
    conn_b.close()
