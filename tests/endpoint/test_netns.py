"""Endpoints at three sites behind NATs, a relay in between: real processes in namespaces.

One topology per session (see ``_topology.py``): site-a and site-b behind cone NATs,
site-c behind a symmetric one, the relay in the public namespace, 5 ms of delay on each
router uplink. ep-b is reachable through a port forward of its NAT (so peerings to it
are direct), persists its objects and punches with UDP/QUIC only; ep-a and eb-nat are
not reachable (peerings between them are hole punched, with TCP first); ep-c's NAT is
symmetric (peerings with it are relayed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from tests.endpoint._topology import PUBLIC, Topology
from tests.endpoint.conftest import Relay, Site, wait_for, write_relay_config

pytestmark = pytest.mark.netns

PEER_PORT = 7500
ENDPOINTS = ['ep-a', 'ep-b', 'ep-c', 'bob-b']
# The endpoints try to register again every 0.5 s while the relay is down (default: a
# wait doubling up to 5 s), so that test_relay_killed_after_peering does not wait out
# the long waits once the relay is back.
RETRY = {'retry_max': 0.5}

_OPS = """
    import hashlib, json, os, pickle, sys
    from tether.connectors.endpoint import EndpointConnector, EndpointKey
    from tether.exceptions import TetherError
    from tether.store import Store
    sha = lambda b: None if b is None else hashlib.sha256(bytes(b)).hexdigest()
    endpoints = json.loads(sys.argv[2])
    conn = EndpointConnector(endpoints, timeout=60)
    out = []
    for op, arg in json.loads(sys.argv[1]):
        try:
            if op == 'put':
                data = os.urandom(arg)
                out.append({'key': list(conn.put(data)), 'sha': sha(data)})
            elif op == 'get':
                out.append({'sha': sha(conn.get(EndpointKey(*arg)))})
            elif op == 'proxy':
                data = os.urandom(arg)
                p = Store('netns', conn, cache_size=0).proxy(data)
                out.append({'proxy': pickle.dumps(p).hex(), 'sha': sha(data)})
            elif op == 'resolve':
                out.append({'sha': sha(pickle.loads(bytes.fromhex(arg)))})
        except TetherError as e:
            cause = type(e.__cause__).__name__ if e.__cause__ is not None else None
            out.append({'error': type(e).__name__, 'cause': cause, 'message': str(e)})
    print(json.dumps(out))
"""


@dataclass
class World:
    topo: Topology
    relay: Relay
    sites: dict[str, Site]

    def ops(self, site: str, *ops: Any, endpoints: list[str] = ENDPOINTS) -> list[Any]:
        result: list[Any] = self.sites[site].python(_OPS, json.dumps(ops), json.dumps(endpoints))
        return result

    def peers(self, site: str, name: str) -> dict[str, str]:
        return {p['name']: p['path'] for p in self.sites[site].status(name)['peers']}


@pytest.fixture(scope='session')
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if os.geteuid() != 0:
        pytest.fail('network namespace tests need root (CI runs as root)')
    root = tmp_path_factory.mktemp('nat-world')
    topo = Topology(root / 'build', delay_ms=5, forwards=(PEER_PORT,))
    sites: dict[str, Site] = {}
    relay: Relay | None = None
    try:
        topo.up()
        relay = Relay(write_relay_config(root / 'relay', PUBLIC, 8700), topo.pub).start()
        for s in 'abc':
            home = root / f'site-{s}' / 'home'
            home.mkdir(parents=True)
            (home.parent / 'relay.pem').write_text((root / 'relay' / 'relay.pem').read_text())
            sites[s] = Site(home, topo.site[s])
        sites['a'].configure('ep-a', relay.address, relay_settings=RETRY)
        sites['b'].configure(
            'ep-b',
            relay.address,
            relay_settings=RETRY,
            peering={
                'port': PEER_PORT,
                'advertise': [f'{topo.public["b"]}:{PEER_PORT}'],
                'punch': ['udp'],
            },
            storage={'persist': True},
        )
        sites['b'].configure('eb-nat', relay.address, relay_settings=RETRY)
        sites['c'].configure('ep-c', relay.address, relay_settings=RETRY)
        sites['b'].configure('bob-b', relay.address, 'bob', relay_settings=RETRY)
        starts = (('a', 'ep-a'), ('b', 'ep-b'), ('c', 'ep-c'), ('b', 'bob-b'), ('b', 'eb-nat'))
        with ThreadPoolExecutor(5) as pool:
            list(pool.map(lambda sn: sites[sn[0]].start(sn[1]), starts))
        yield World(topo, relay, sites)
    finally:
        for site in sites.values():
            site.close()
        if relay is not None:
            relay.stop()
        topo.down()


def test_nat_types_seen_through_the_relay(world: World) -> None:
    with ThreadPoolExecutor(3) as pool:
        found = pool.map(
            lambda s: world.sites[s].tether_json('endpoint', 'check-nat', f'ep-{s}'), 'abc'
        )
    nat = {s: info['nat'] for s, info in zip('abc', found, strict=True)}
    assert nat == {'a': 'cone', 'b': 'cone', 'c': 'symmetric'}


def test_put_at_one_site_resolve_at_another_over_each_path(world: World) -> None:
    (made_a,) = world.ops('a', ('proxy', 1_000_000))
    (made_b,) = world.ops('b', ('proxy', 1_000_000))
    (made_c,) = world.ops('c', ('proxy', 200_000))
    # B resolves A's proxy: A is not reachable and both NATs are cones -> hole punched.
    assert world.ops('b', ('resolve', made_a['proxy'])) == [{'sha': made_a['sha']}]
    # A resolves B's and C's: B is reachable -> direct; C's NAT is symmetric -> relayed.
    got = world.ops('a', ('resolve', made_b['proxy']), ('resolve', made_c['proxy']))
    assert got == [{'sha': made_b['sha']}, {'sha': made_c['sha']}]
    assert world.peers('b', 'ep-b') == {'ep-a': 'punched'}
    assert world.peers('a', 'ep-a') == {'ep-b': 'direct', 'ep-c': 'relayed'}


def test_punching_transports_and_endpoint_test(world: World) -> None:
    """ep-b punched to A with UDP/QUIC (its setting); eb-nat with TCP; a CLI test relayed."""
    if not world.peers('b', 'ep-b'):
        (made_a,) = world.ops('a', ('put', 1000))
        world.ops('b', ('get', made_a['key']), endpoints=['ep-b'])
    (quic,) = world.sites['b'].status('ep-b')['peers']
    assert quic['transport'] == 'quic'
    # eb-nat (at B, not reachable) reads an object of A: punched with TCP.
    (held,) = world.ops('a', ('put', 2_000_000))
    assert world.ops('b', ('get', held['key']), endpoints=['eb-nat']) == [{'sha': held['sha']}]
    (tcp,) = world.sites['b'].status('eb-nat')['peers']
    assert (tcp['name'], tcp['path'], tcp['transport']) == ('ep-a', 'punched', 'tcp')
    # `tether endpoint test` across the relayed path, from the symmetric side.
    test = world.sites['c'].tether_json('endpoint', 'test', 'ep-c', '--remote', 'ep-a')
    assert test['ok'] is True
    assert test['path'] == 'relayed'


def test_tokens_and_users(world: World) -> None:
    # A wrong relay token: the endpoint does not start, and says why.
    world.sites['c'].configure('intruder', world.relay.address, user='stolen-or-wrong')
    out = world.sites['c'].tether('endpoint', 'start', 'intruder', check=False)
    assert out.returncode != 0
    assert 'refused this token' in out.stderr
    # A wrong client token at an endpoint.
    (key,) = world.ops('a', ('put', 1000))
    token = world.sites['a'].home / 'endpoints' / 'ep-a' / 'client.token'
    real = token.read_text()
    token.write_text('f' * 64)
    try:
        (refused,) = world.ops('a', ('get', key['key']))
    finally:
        token.write_text(real)
    assert refused['error'] == 'ConnectorError'
    assert refused['cause'] == 'AuthenticationError'
    assert 'secret' in refused['message']
    # Bob's endpoint (same host as ep-b) cannot reach Alice's endpoints, by UUID or name.
    by_uuid = world.ops('b', ('get', key['key']), endpoints=['bob-b'])
    by_name = world.ops('b', ('get', [key['key'][0], 'ep-a']), endpoints=['bob-b'])
    for (result,) in (by_uuid, by_name):
        assert result['error'] == 'ConnectorError'
        assert 'of yours is online' in result['message']
    assert world.peers('b', 'bob-b') == {}


def test_endpoint_killed_mid_transfer_then_restarted(world: World) -> None:
    """ep-b dies while A reads a large object from it; after a restart A reads it again."""
    size = 40_000_000
    (held,) = world.ops('b', ('put', size))
    world.topo.shape('b', '40mbit')  # the reply takes about 8 s to cross B's uplink
    try:
        site_b = world.sites['b']
        seen = [site_b.status('ep-b')['requests']]

        def get_arrived() -> bool:
            # Each status request counts itself: one more than that is the reader's GET.
            now = site_b.status('ep-b')['requests']
            arrived = now > seen[0] + 1
            seen[0] = now
            return arrived

        reader = world.sites['a'].popen(
            _OPS, json.dumps([('get', held['key'])]), json.dumps(ENDPOINTS)
        )
        wait_for(get_arrived, what="the reader's GET to reach ep-b")  # its reply takes ~8 s
        killed_at = time.time()
        os.kill(world.sites['b'].pid('ep-b'), signal.SIGKILL)
        out, err = reader.communicate(timeout=90)
        failed_at = time.time()
    finally:
        world.topo.shape('b', world.topo.rate)
    assert reader.returncode == 0, err
    (result,) = json.loads(out.strip().splitlines()[-1])
    assert result['error'] == 'PeerChannelError'
    assert 'ep-b' in result['message']
    assert failed_at - killed_at < 30  # when the channel drops, not at a timeout
    # Restarted with persistence: the object is still there, and A re-peers on its own.
    world.sites['b'].start('ep-b')
    wait_for(lambda: world.sites['b'].status('ep-b')['relay']['connected'], what='ep-b registered')
    assert world.ops('a', ('get', held['key'])) == [{'sha': held['sha']}]
    assert world.peers('a', 'ep-a')['ep-b'] == 'direct'


def test_relay_killed_after_peering(world: World) -> None:
    """Established direct and punched channels outlive the relay; relayed ones need it."""
    (at_a,) = world.ops('a', ('put', 100_000))
    (at_b,) = world.ops('b', ('put', 100_000))
    (at_c,) = world.ops('c', ('put', 100_000))
    # The channels this test is about, opened while the relay is up (whatever tests ran
    # before): A-B direct and A-C relayed, and B-A punched.
    assert world.ops('a', ('get', at_b['key']), ('get', at_c['key'])) == [
        {'sha': at_b['sha']},
        {'sha': at_c['sha']},
    ]
    assert world.ops('b', ('get', at_a['key'])) == [{'sha': at_a['sha']}]
    assert world.peers('a', 'ep-a')['ep-b'] == 'direct'
    assert world.peers('a', 'ep-a')['ep-c'] == 'relayed'
    world.relay.stop()
    try:
        got = world.ops('a', ('get', at_b['key']), ('get', at_c['key']))
        assert got[0] == {'sha': at_b['sha']}
        # The relayed link to ep-c broke with the relay: its channel cannot be reopened,
        # nor the peering made again, and the message says it is the relay.
        assert got[1]['error'] == 'PeerChannelError'
        assert 'relay' in got[1]['message']
        assert world.ops('b', ('get', at_a['key'])) == [{'sha': at_a['sha']}]
    finally:
        world.relay.start()
    # The endpoints register again by themselves; the relayed path comes back.
    for s in 'ac':
        wait_for(
            lambda s=s: world.sites[s].status(f'ep-{s}')['relay']['connected'],
            what=f'ep-{s} registered again',
        )
    assert world.ops('a', ('get', at_c['key'])) == [{'sha': at_c['sha']}]
    assert world.peers('a', 'ep-a')['ep-c'] == 'relayed'


_PAUSED_GET = """
    import json, sys
    from tether._wire import SyncConnection
    from tether.connectors.endpoint import EndpointConnector, EndpointKey
    from tether.exceptions import TetherError
    key, size, endpoints = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    recv_into, paused = SyncConnection._recv_into, []

    def pause_after_a_megabyte(self, view):
        # The object's payload: read its first megabyte, then wait to be told to go on.
        if view.nbytes == size and not paused:
            recv_into(self, view[: 1 << 20])
            paused.append(True)
            print('mid', flush=True)
            sys.stdin.readline()
            view = view[1 << 20 :]
        recv_into(self, view)

    SyncConnection._recv_into = pause_after_a_megabyte
    conn = EndpointConnector(endpoints, timeout=60)
    try:
        conn.get(EndpointKey(*key))
        out = {'error': None}
    except TetherError as e:
        out = {'error': type(e).__name__, 'peer': getattr(e, 'peer', None), 'message': str(e)}
    print(json.dumps(out), flush=True)
"""


def test_owner_killed_mid_get_over_a_punched_tcp_path(world: World) -> None:
    """The punched TCP path (NATs needed): the reader hears of the owner's death at once."""
    size = 64 << 20
    (held,) = world.ops('b', ('put', size), endpoints=['eb-nat'])
    site_a, site_b = world.sites['a'], world.sites['b']
    reader = subprocess.Popen(
        site_a.cmd(
            sys.executable,
            '-c',
            textwrap.dedent(_PAUSED_GET),
            json.dumps(held['key']),
            str(size),
            json.dumps(ENDPOINTS),
        ),
        env=site_a.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None
        assert reader.stdin is not None
        assert reader.stdout.readline().strip() == 'mid', 'the transfer did not start'
        peer = next(p for p in site_a.status('ep-a')['peers'] if p['name'] == 'eb-nat')
        assert (peer['path'], peer['transport']) == ('punched', 'tcp')
        pid = site_b.pid('eb-nat')
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists(f'/proc/{pid}'), what='eb-nat to die')
        reader.stdin.write('go on\n')
        reader.stdin.flush()
        out, err = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.communicate(timeout=10)
    result = json.loads(out.strip().splitlines()[-1])
    assert result['error'] == 'PeerChannelError', (result, err)
    assert result['peer'] == held['key'][1]
    assert 'eb-nat' in result['message']
    # Restarted, it registers again; the reader peers with it again by itself.
    site_b.start('eb-nat')
    wait_for(lambda: site_b.status('eb-nat')['relay']['connected'], what='eb-nat registered')
    (again,) = world.ops('b', ('put', 1000), endpoints=['eb-nat'])
    assert world.ops('a', ('get', again['key'])) == [{'sha': again['sha']}]
