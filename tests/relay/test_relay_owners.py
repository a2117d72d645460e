"""An endpoint UUID belongs to the user who first registered it, across relay restarts.

Mallory (bob's token) tries the UUID of Alice's endpoint, stopped or running: the relay
refuses with the very reply it gives a wrong token, so the refusal says nothing about
whether the UUID exists, and Alice's endpoint still registers.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.endpoint.conftest import Relay, Site, write_relay_config
from tests.relay.conftest import TOKENS, ThreadRelay, relay_config
from tether._serve import signalling as rp
from tether._wire import SyncConnection
from tether.exceptions import ConfigError
from tether.relay import RelayServer

ALICE_EP = '5b0e7f5c-0d6c-4a43-9d0e-6a8f3e1d2c11'


def register_reply(relay: ThreadRelay, token: str, uuid: str) -> tuple[int, dict[str, Any]]:
    """Send one ``REGISTER`` and return the reply's type and header."""
    conn = relay.connect()
    try:
        conn.send(rp.REGISTER, {'token': token, 'uuid': uuid, 'name': 'ep'}, request_id=1)
        frame = conn.recv()
    finally:
        conn.close()
    return frame.type, frame.header


def test_a_uuid_stays_with_its_first_user(
    make_relay: Callable[..., ThreadRelay], tmp_path: Path
) -> None:
    owners = tmp_path / 'owners.json'
    relay = make_relay(owners_file=str(owners))
    alice = relay.register('alice', ALICE_EP)
    wrong_token = register_reply(relay, 'not-a-token', 'a-fresh-uuid')
    assert wrong_token[1]['code'] == 'auth'
    # While Alice's endpoint is online: Mallory gets what a wrong token gets.
    assert register_reply(relay, TOKENS['bob'], ALICE_EP) == wrong_token
    alice.close()
    # Alice's endpoint stopped: still hers.
    assert register_reply(relay, TOKENS['bob'], ALICE_EP) == wrong_token
    status = relay.status()
    assert 'bob' not in status['users']
    # Alice's endpoint starts again.
    kind, header = register_reply(relay, TOKENS['alice'], ALICE_EP)
    assert kind == rp.OK
    assert header['user'] == 'alice'
    # Kept on disk, readable by the relay's user only.
    assert stat.S_IMODE(owners.stat().st_mode) == 0o600
    relay.close()

    # A restarted relay remembers.
    again = make_relay(owners_file=str(owners))
    assert register_reply(again, TOKENS['bob'], ALICE_EP) == wrong_token
    assert register_reply(again, TOKENS['alice'], ALICE_EP)[0] == rp.OK
    # Bob's own new endpoints register as before.
    assert register_reply(again, TOKENS['bob'], 'bobs-own-uuid')[0] == rp.OK
    assert register_reply(again, TOKENS['alice'], 'bobs-own-uuid') == wrong_token


def test_uuids_per_user_are_bounded(make_relay: Callable[..., ThreadRelay]) -> None:
    relay = make_relay(max_uuids_per_user=2)
    for uuid in ('u1', 'u2'):
        assert register_reply(relay, TOKENS['alice'], uuid)[0] == rp.OK
    _, header = register_reply(relay, TOKENS['alice'], 'u3')
    assert header['code'] == 'limit'
    assert 'max_uuids_per_user' in header['message']
    assert register_reply(relay, TOKENS['alice'], 'u1')[0] == rp.OK  # hers already


def test_an_unreadable_owners_file_stops_the_relay(tmp_path: Path) -> None:
    owners = tmp_path / 'owners.json'
    owners.write_text('{"owners": [1, 2]}')
    with pytest.raises(ConfigError, match='not a relay owners file'):
        RelayServer(relay_config(owners_file=str(owners)))
    owners.write_text('{not json')
    with pytest.raises(ConfigError, match='cannot read'):
        RelayServer(relay_config(owners_file=str(owners)))


def test_relay_toml_keeps_owners_beside_it(tmp_path: Path) -> None:
    from tether.relay import RelayConfig

    path = tmp_path / 'relay.toml'
    path.write_text('insecure = true\n')
    assert RelayConfig.read_toml(path).owners_file == str(tmp_path / 'owners.json')
    path.write_text('insecure = true\nowners_file = "/var/lib/relay/owners.json"\n')
    assert RelayConfig.read_toml(path).owners_file == '/var/lib/relay/owners.json'


def _free_pair() -> int:
    """A port p with TCP and UDP p and p + 1 free (the relay's four ports)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = int(s.getsockname()[1])
        if port >= 65534:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    for p in (port, port + 1):
                        sock = stack.enter_context(socket.socket(socket.AF_INET, kind))
                        sock.bind(('127.0.0.1', p))
        except OSError:
            continue
        return port
    raise AssertionError('no free pair of ports')


def _tls_register(relay: Relay, ca: Path, token: str, uuid: str) -> tuple[int, dict[str, Any]]:
    host, port = relay.address.rsplit(':', 1)
    context = ssl.create_default_context(cafile=str(ca))
    conn = SyncConnection(host, int(port), ssl=context, timeout=10)
    try:
        conn.send(rp.REGISTER, {'token': token, 'uuid': uuid, 'name': 'mallory'}, request_id=1)
        frame = conn.recv()
    finally:
        conn.close()
    return frame.type, frame.header


def test_alices_stopped_endpoint_starts_after_mallory_tried_its_uuid(tmp_path: Path) -> None:
    """The issue's scenario with a real endpoint and a ``tether relay`` that restarts."""
    config = write_relay_config(tmp_path, '127.0.0.1', _free_pair())
    relay = Relay(config).start()
    home = tmp_path / 'home'
    home.mkdir()
    site = Site(home)
    ca = tmp_path / 'relay.pem'
    try:
        uuid = site.configure('alice-ep', relay.address)
        site.start('alice-ep')
        wrong_token = _tls_register(relay, ca, 'a guess', 'some-uuid')
        assert _tls_register(relay, ca, TOKENS['bob'], uuid) == wrong_token
        site.stop('alice-ep')
        assert _tls_register(relay, ca, TOKENS['bob'], uuid) == wrong_token
        relay.stop()
        relay.start()  # same ports; the owners were kept beside relay.toml
        assert (tmp_path / 'owners.json').exists()
        assert _tls_register(relay, ca, TOKENS['bob'], uuid) == wrong_token
        site.start('alice-ep')  # raises if the relay refused it
        site.stop('alice-ep')
    finally:
        site.close()
        relay.stop()
