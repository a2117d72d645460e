"""Clients on an endpoint's host reach it over its Unix socket, or over TCP without one."""

from __future__ import annotations

import json
import os
import stat
import uuid
from typing import Any

import pytest

from tests.endpoint.conftest import Relay, Site
from tests.endpoint.test_endpoint import free_port
from tests.security.test_fork_safety import _check as check_process_pools
from tether.store import Store, register_store, unregister_store


def _state(site: Site, name: str) -> dict[str, object]:
    state: dict[str, object] = json.loads(
        (site.home / 'endpoints' / name / 'state.json').read_text()
    )
    return state


def test_clients_use_the_socket_and_fall_back_to_tcp(site: Site, loop_relay: Relay) -> None:
    site.configure('ux', loop_relay.address)
    site.start('ux')
    folder = site.home / 'endpoints' / 'ux'
    sock = folder / 'endpoint.sock'
    assert len(str(sock)) < 100  # else the endpoint serves TCP only (the wire tests)
    assert _state(site, 'ux')['socket'] == str(sock)
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert sock.stat().st_mode & 0o777 == 0o600
    conn = site.connector('ux')
    key = conn.put(b'over the socket')
    _, client = conn._endpoint()
    with client.connection() as c:
        assert c.unix
    # Asked not to, the connector uses TCP (as it does on other hosts of the site).
    no_socket = site.connector('ux', unix_socket=False)
    assert no_socket.get(key) == b'over the socket'
    _, client = no_socket._endpoint()
    with client.connection() as c:
        assert not c.unix
    assert no_socket.settings.unix_socket is False
    no_socket.close()
    # The socket file removed under a running endpoint: a new connector uses TCP.
    sock.unlink()
    tcp = site.connector('ux')
    assert tcp.get(key) == b'over the socket'
    _, client = tcp._endpoint()
    with client.connection() as c:
        assert not c.unix
    conn.close()
    tcp.close()
    site.stop('ux')
    assert not (folder / 'state.json').exists()


def test_channels_of_their_own_go_over_tcp(site: Site, loop_relay: Relay) -> None:
    """Local requests take the socket, requests with a channel of their own take TCP."""
    port = free_port()
    site.configure('uo-a', loop_relay.address)
    site.configure(
        'uo-b', loop_relay.address, peering={'port': port, 'advertise': [f'127.0.0.1:{port}']}
    )
    site.start('uo-a')
    site.start('uo-b')
    data = os.urandom(3_000_000)
    key = site.connector('uo-b').put(data)
    conn = site.connector('uo-a')
    assert conn.get(key) == data
    conn.set(key, b'small')
    assert conn.get(key) == b'small'
    (own,) = conn._own.values()
    with own.connection() as c:
        assert not c.unix
    local_key = conn.put(b'here')
    _, client = conn._endpoint()
    with client.connection() as c:
        assert c.unix
    assert conn.get(local_key) == b'here'
    assert site.status('uo-a')['own_channels']['opened'] >= 1
    site.stop('uo-a')
    assert not (site.home / 'endpoints' / 'uo-a' / 'endpoint.sock').exists()


@pytest.mark.parametrize('method', ['fork', 'forkserver', 'spawn'])
def test_process_pools_share_no_socket(site: Site, loop_relay: Relay, method: str) -> None:
    """Workers forked from a parent that holds pooled Unix-socket connections open their
    own (every reply answers its own request), as over TCP."""
    site.configure('uf', loop_relay.address)
    site.start('uf')
    connector = site.connector('uf')
    store: Store[Any] = Store(f'fork-uds-{uuid.uuid4().hex[:8]}', connector, cache_size=0)
    register_store(store)
    try:
        _, client = connector._endpoint()
        with client.connection() as c:
            assert c.unix
        check_process_pools(store, method)
    finally:
        unregister_store(store)
        store.close()
