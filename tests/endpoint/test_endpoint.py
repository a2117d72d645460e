"""Endpoints and the relay on loopback: CLI, paths, authentication, isolation, persistence."""

from __future__ import annotations

import json
import os
import socket
import uuid as _uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.endpoint.conftest import Relay, Site, wait_for, write_relay_config
from tether.cli import cli
from tether.connectors.endpoint import EndpointKey
from tether.exceptions import ConnectorError, EndpointError, RemoteError
from tether.proxy import get_factory
from tether.relay import hash_token
from tether.store import Store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def test_help_everywhere() -> None:
    runner = CliRunner()
    for args in (
        ['endpoint'],
        *([['endpoint', c] for c in ('configure', 'start', 'stop', 'list', 'remove')]),
        ['endpoint', 'check-nat'],
        ['endpoint', 'test'],
        ['relay'],
    ):
        out = runner.invoke(cli, [*args, '--help'])
        assert out.exit_code == 0, out.output
        assert 'Usage:' in out.output


def run_cli(site: Site, *args: str, ok: bool = True) -> str:
    """Run the ``tether`` command line in this process (the entry point has its own test)."""
    out = CliRunner().invoke(cli, list(args), env={'TETHER_HOME': str(site.home)})
    assert (out.exit_code == 0) is ok, out.output
    return out.output


def test_configure_start_list_remove_cli(site: Site) -> None:
    info = json.loads(run_cli(site, 'endpoint', 'configure', 'lone', '--memory', '64MB', '--json'))
    folder = site.home / 'endpoints' / 'lone'
    assert (folder / 'endpoint.toml').is_file()
    assert (folder / 'client.token').stat().st_mode & 0o777 == 0o600
    assert (folder / 'peer.key').stat().st_mode & 0o777 == 0o600
    assert 'token' not in (folder / 'endpoint.toml').read_text()
    assert json.loads(run_cli(site, 'endpoint', 'list', '--json')) == [
        {'name': 'lone', 'uuid': info['uuid'], 'running': False}
    ]
    assert 'already configured' in run_cli(site, 'endpoint', 'configure', 'lone', ok=False)
    assert 'endpoint name' in run_cli(site, 'endpoint', 'configure', 'no/slash', ok=False)
    assert 'started' in run_cli(site, 'endpoint', 'start', 'lone')
    # The real entry point, in its own process.
    (row,) = site.tether_json('endpoint', 'list')
    assert row['running'] is True
    assert row['memory_limit'] == 64_000_000
    assert (folder / 'endpoint.pid').read_text().strip() == str(row['pid'])
    assert 'running (pid' in run_cli(site, 'endpoint', 'list')
    assert 'already runs' in run_cli(site, 'endpoint', 'start', 'lone', ok=False)
    assert 'stop it first' in run_cli(site, 'endpoint', 'remove', 'lone', ok=False)
    run_cli(site, 'endpoint', 'stop', 'lone')
    assert not (folder / 'endpoint.pid').exists()
    run_cli(site, 'endpoint', 'remove', 'lone')
    assert json.loads(run_cli(site, 'endpoint', 'list', '--json')) == []
    assert 'no endpoint' in run_cli(site, 'endpoint', 'stop', 'lone', ok=False)


def test_three_paths_and_relay_limit(site: Site, loop_relay: Relay) -> None:
    """A advertises its peer port (direct), B does not (punched), C only relays."""
    relay = loop_relay.address
    port = free_port()
    # A punches with UDP and QUIC only (the netns tests punch with TCP too).
    site.configure(
        'ep-a',
        relay,
        peering={'port': port, 'advertise': [f'127.0.0.1:{port}'], 'punch': ['udp']},
    )
    site.configure('ep-b', relay)
    site.configure('ep-c', relay, peering={'paths': ['relayed']})
    for name in ('ep-a', 'ep-b', 'ep-c'):
        site.start(name)
    # A proxy made at A resolves unchanged in a process that uses B's endpoint.
    store_a = Store('ep-paths-a', site.connector('ep-a', 'ep-b'), cache_size=0, register=True)
    data_a = os.urandom(300_000)
    proxy = store_a.proxy(data_a)
    store_a.close()
    conn_b = site.connector('ep-b')
    key_a = get_factory(proxy).key
    assert site.status('ep-b')['peers'] == []
    raw_b = conn_b.get(key_a)
    assert raw_b is not None
    conn_c = site.connector('ep-c')
    assert bytes(conn_c.get(key_a)) == bytes(raw_b)
    key_b = conn_b.put(b'held at B')
    conn_a = site.connector('ep-a')
    assert bytes(conn_a.get(key_b)) == b'held at B'
    # Writes and evictions go to the owner too.
    conn_a.set(key_b, b'rewritten from A')
    assert bytes(conn_b.get(key_b)) == b'rewritten from A'
    conn_c.evict(key_a)
    assert not conn_b.exists(key_a)
    paths = {
        name: {p['name']: p['path'] for p in site.status(name)['peers']}
        for name in ('ep-a', 'ep-b', 'ep-c')
    }
    assert site.status('ep-a')['peers'][0]['transport'] == 'quic'
    # The direct and punched channels carried their warm-up (4 MiB each way) before
    # their first request; relayed ones do not (the relay's bandwidth is shared).
    for name in ('ep-a', 'ep-b'):
        rate = site.status(name)['peers'][0]['warm_up_mbps']
        assert isinstance(rate, float)
        assert rate > 0
    assert site.status('ep-c')['peers'][0]['warm_up_mbps'] is None
    assert paths == {
        'ep-a': {'ep-b': 'punched'},
        'ep-b': {'ep-a': 'direct'},
        'ep-c': {'ep-a': 'relayed'},
    }
    assert json.loads(run_cli(site, 'endpoint', 'check-nat', 'ep-b', '--json'))['nat'] == 'open'
    test = json.loads(
        run_cli(site, 'endpoint', 'test', 'ep-c', '--remote', 'ep-b', '--size', '2MB', '--json')
    )
    assert test['ok'] is True
    assert test['path'] == 'relayed'
    for c in (conn_a, conn_b, conn_c):
        c.close()
    # This relay allows three endpoints per user: a fourth is refused at registration.
    site.configure('ep-d', relay)
    with pytest.raises(EndpointError, match='limit'):
        site.start('ep-d')


def test_wrong_tokens(site: Site, loop_relay: Relay) -> None:
    site.configure('intruder', loop_relay.address, user='not-a-token')
    with pytest.raises(EndpointError, match='refused this token'):
        site.start('intruder')
    site.configure('mine', None)
    site.start('mine')
    conn = site.connector('mine')
    key = conn.put(b'secret data')
    conn.close()
    # A client that has the configuration but not the endpoint's token is refused.
    (site.home / 'endpoints' / 'mine' / 'client.token').write_text('0' * 64)
    thief = site.connector('mine')
    with pytest.raises(ConnectorError, match='secret'):
        thief.get(key)
    thief.close()


def test_users_see_only_their_endpoints(site: Site, loop_relay: Relay) -> None:
    alice = site.configure('alice-ep', loop_relay.address, 'alice')
    site.configure('bob-ep', loop_relay.address, 'bob')
    site.start('alice-ep')
    site.start('bob-ep')
    conn = site.connector('alice-ep')
    key = conn.put(b'alice only')
    conn.close()
    bob = site.connector('bob-ep')
    for target in (alice, 'alice-ep'):
        with pytest.raises(ConnectorError, match='of yours is online'):
            bob.get(EndpointKey(key.object_id, target))
    bob.close()
    from tether.endpoint import endpoint_status

    listed = endpoint_status('bob-ep', site.home, relay=True)['endpoints']
    assert [e['name'] for e in listed] == ['bob-ep']


def test_persistence_across_restart(site: Site) -> None:
    site.configure('keeper', None, storage={'persist': True, 'memory': '1MB'})
    site.configure('forgetful', None)
    for name in ('keeper', 'forgetful'):
        site.start(name)
    kept, lost = site.connector('keeper'), site.connector('forgetful')
    small, big = kept.put(b'small'), kept.put(os.urandom(3_000_000))  # big: past the budget
    gone = lost.put(b'lost on restart')
    big_data = bytes(kept.get(big))
    kept.evict(small)
    again = kept.put(b'again')
    for name in ('keeper', 'forgetful'):
        site.stop(name)
    with pytest.raises(ConnectorError, match='runs on this host'):
        kept.get(again)
    for name in ('keeper', 'forgetful'):
        site.start(name)
    assert bytes(kept.get(again)) == b'again'
    assert bytes(kept.get(big)) == big_data
    assert kept.get(small) is None
    assert lost.get(gone) is None
    assert site.status('keeper')['objects'] == 2
    kept.close()
    lost.close()


def test_connector_errors(site: Site) -> None:
    with pytest.raises(ConnectorError, match='list of endpoint'):
        site.connector()
    nowhere = site.connector(str(_uuid.uuid4()))
    with pytest.raises(ConnectorError, match='is configured on this host'):
        nowhere.put(b'x')
    site.configure('idle', None)
    stopped = site.connector('idle')
    with pytest.raises(ConnectorError, match='runs on this host'):
        stopped.put(b'x')
    site.start('idle')
    lonely = site.connector('idle')
    with pytest.raises(ConnectorError, match='no relay configured'):
        lonely.get(EndpointKey('abc', str(_uuid.uuid4())))
    lonely.close()
    with pytest.raises(ConnectorError, match='closed'):
        lonely.put(b'x')


def test_relay_forwarded_bytes_limit(tmp_path: Path) -> None:
    """A relay that may forward 3 MB per user cuts a relayed transfer past that."""
    relay = Relay(
        write_relay_config(tmp_path, '127.0.0.1', 0, max_forwarded_bytes_per_user=3_000_000)
    ).start()
    home = tmp_path / 'home'
    home.mkdir()
    site = Site(home)
    try:
        site.configure('owner', relay.address)
        site.configure('reader', relay.address, peering={'paths': ['relayed']})
        site.start('owner')
        site.start('reader')
        owner, reader = site.connector('owner'), site.connector('reader')
        small, big = owner.put(b's' * 1_000_000), owner.put(b'b' * 4_000_000)
        assert bytes(reader.get(small)) == b's' * 1_000_000
        with pytest.raises(ConnectorError, match=r'limit|failed'):
            reader.get(big)
        with pytest.raises(ConnectorError, match='limit'):
            reader.get(small)
        owner.close()
        reader.close()
    finally:
        from tether.endpoint import stop_endpoint

        for name in ('owner', 'reader'):
            stop_endpoint(name, home)
        relay.stop()


def test_relay_config_errors(tmp_path: Path) -> None:
    from tether.exceptions import ConfigError
    from tether.relay import RelayConfig

    path = tmp_path / 'relay.toml'
    path.write_text('port = 8700\n')
    with pytest.raises(ConfigError, match='tls_cert'):
        RelayConfig.read_toml(path)
    path.write_text('port = "eight"\ninsecure = true\n')
    with pytest.raises(ConfigError, match='port'):
        RelayConfig.read_toml(path)
    path.write_text('insecure = true\n[[users]]\nname = "a"\ntoken_sha256 = "nothex"\n')
    with pytest.raises(ConfigError, match='token_sha256'):
        RelayConfig.read_toml(path)
    with pytest.raises(ConfigError, match='cannot read'):
        RelayConfig.read_toml(tmp_path / 'missing.toml')
    out = CliRunner().invoke(cli, ['relay', '--config', str(tmp_path / 'missing.toml')])
    assert out.exit_code != 0
    assert 'cannot read' in out.output
    made = CliRunner().invoke(cli, ['relay', '--new-user', 'carol'])
    assert made.exit_code == 0
    assert 'name = "carol"' in made.output
    token = made.output.split(': ', 1)[1].split()[0]
    config = RelayConfig.model_validate(
        {'insecure': True, 'users': [{'name': 'carol', 'token_sha256': hash_token(token)}]}
    )
    assert config.user_of(token) == 'carol'
    assert config.user_of('wrong') is None
    assert config.user_of(None) is None


def test_large_objects_pass_through_as_they_arrive(site: Site, loop_relay: Relay) -> None:
    """A large PUT or GET for another endpoint is piped on, not received whole first."""
    from tether._serve.codes import PUT
    from tether._wire import SyncConnection, encode_head
    from tether.endpoint import find_config

    relay = loop_relay.address
    port = free_port()
    site.configure('pipe-a', relay)
    site.configure('pipe-b', relay, peering={'port': port, 'advertise': [f'127.0.0.1:{port}']})
    site.start('pipe-a')
    site.start('pipe-b')
    # The forwarding path (a connector with channels of its own has its own test).
    conn_a = site.connector('pipe-a', own_channels=False)
    conn_b = site.connector('pipe-b')
    key = conn_b.put(b'small')
    assert bytes(conn_a.get(key)) == b'small'  # peers A with B; the channel is now idle
    assert site.status('pipe-a')['piped'] == {'put': 0, 'get': 0}
    big = os.urandom(5_000_000)
    conn_a.set(key, big)
    assert bytes(conn_b.get(key)) == big
    assert bytes(conn_a.get(key)) == big
    assert site.status('pipe-a')['piped'] == {'put': 1, 'get': 1}
    assert site.status('pipe-b')['piped'] == {'put': 0, 'get': 0}  # B answered itself
    # Replies to a GET pass through from 64 KiB up (a PUT only from 1 MiB); smaller
    # ones are received whole and sent on.
    mid, small = os.urandom(200_000), os.urandom(60_000)
    mid_key, small_key = conn_b.put(mid), conn_b.put(small)
    assert bytes(conn_a.get(mid_key)) == mid
    assert bytes(conn_a.get(small_key)) == small
    assert site.status('pipe-a')['piped'] == {'put': 1, 'get': 2}
    conn_b.evict(mid_key)
    conn_b.evict(small_key)

    # A client that dies in the middle of a piped PUT: A drops that channel (B discards
    # the partial object and keeps the old one) and goes on serving.
    config = find_config('pipe-a', site.home)
    state = json.loads((config.folder(site.home) / 'state.json').read_text())
    raw = SyncConnection(state['host'], state['port'], secret=config.client_token(site.home))
    head = {'ids': [key.object_id], 'endpoint': key.endpoint_id}
    raw.sock.sendall(encode_head(PUT, head, [50_000_000], 7, 0) + os.urandom(2_000_000))
    wait_for(lambda: site.status('pipe-a')['piped']['put'] == 2, what='the PUT routed')
    raw.close()
    wait_for(
        lambda: all(p['channels'] <= 1 for p in site.status('pipe-a')['peers']),
        what='the half-sent channel dropped',
    )
    assert bytes(conn_b.get(key)) == big
    assert conn_a.exists(key)  # opens a fresh channel to B, idle afterwards
    conn_a.set(key, big[::-1])
    assert bytes(conn_a.get(key)) == big[::-1]
    assert site.status('pipe-a')['piped'] == {'put': 3, 'get': 3}
    for c in (conn_a, conn_b):
        c.close()


def test_small_requests_forwarded_from_the_data_callback_survive_a_peer_restart(
    site: Site, loop_relay: Relay
) -> None:
    """Small requests go over an idle channel at once; a dead channel means one re-peering."""
    relay = loop_relay.address
    port = free_port()
    site.configure('fast-a', relay)
    site.configure(
        'fast-b',
        relay,
        peering={'port': port, 'advertise': [f'127.0.0.1:{port}']},
        storage={'persist': True},
    )
    site.start('fast-a')
    site.start('fast-b')
    conn_a = site.connector('fast-a', own_channels=False)
    conn_b = site.connector('fast-b')
    keys = [conn_b.put(f'value {n}'.encode()) for n in range(20)]
    # In order on one connection: every reply answers its own request.
    assert [bytes(conn_a.get(k)) for k in keys] == [f'value {n}'.encode() for n in range(20)]
    missing = EndpointKey(str(_uuid.uuid4()), keys[0].endpoint_id)
    assert conn_a.get(missing) is None
    conn_a.set(keys[0], b'changed from A')
    assert bytes(conn_b.get(keys[0])) == b'changed from A'
    before = site.status('fast-a')
    assert before['forwarded'] == 22
    assert before['peers'][0]['alive']
    # B restarts: A's idle channel is dead; the next request finds out, peers again once
    # and is answered (B keeps its objects across the restart).
    site.stop('fast-b')
    site.start('fast-b')
    assert bytes(conn_a.get(keys[1])) == b'value 1'
    assert [p['alive'] for p in site.status('fast-a')['peers']] == [True]
    conn_a.close()
    conn_b.close()


def test_warm_up_settings_and_refusals(site: Site, loop_relay: Relay, tmp_path: Path) -> None:
    """``warm_up = 0`` turns it off; clients may not ask for one; sizes are bounded."""
    from tether._serve.codes import OK, WARM_UP, WARM_UP_MAX
    from tether._wire import ERROR, Frame, SyncConnection
    from tether.endpoint import SiteConfig, find_config
    from tether.endpoint._server import Endpoint
    from tether.exceptions import ConfigError

    relay = loop_relay.address
    port = free_port()
    site.configure('cold-a', relay, peering={'warm_up': 0})
    site.configure('cold-b', relay, peering={'port': port, 'advertise': [f'127.0.0.1:{port}']})
    site.start('cold-a')
    site.start('cold-b')
    conn_a, conn_b = site.connector('cold-a'), site.connector('cold-b')
    key = conn_b.put(b'no warm-up')
    assert bytes(conn_a.get(key)) == b'no warm-up'
    peer = site.status('cold-a')['peers'][0]
    assert peer['path'] == 'direct'
    assert peer['warm_up_mbps'] is None
    conn_a.close()
    conn_b.close()

    # A client of the endpoint (not a peer) cannot make it send bytes.
    config = find_config('cold-b', site.home)
    state = json.loads((config.folder(site.home) / 'state.json').read_text())
    raw = SyncConnection(state['host'], state['port'], secret=config.client_token(site.home))
    with pytest.raises(RemoteError, match='unknown message type'):
        raw.request(WARM_UP, {'size': 1000})
    raw.close()

    # The peer side answers with as many zero bytes as it received, within bounds
    # (whatever the header claims: no amplification).
    endpoint = Endpoint(config, site.home)
    sent = Frame(WARM_UP, {'size': 10**9}, [bytearray(1000)], 1)
    reply = endpoint._handle_peer(None, sent)  # type: ignore[arg-type]
    assert reply is not None
    assert reply[0] == OK
    assert [bytes(p) for p in reply[2]] == [bytes(1000)]
    too_big = Frame(WARM_UP, {}, [bytearray(WARM_UP_MAX), bytearray(1)], 1)
    refused = endpoint._handle_peer(None, too_big)  # type: ignore[arg-type]
    assert refused is not None
    assert refused[0] == ERROR

    with pytest.raises(ConfigError, match='warm_up'):
        SiteConfig.create('too-warm', tmp_path, peering={'warm_up': '65MiB'})
