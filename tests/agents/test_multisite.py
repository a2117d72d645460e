"""Agents at two sites behind NATs, a client at the thinker's place, one hosted exchange.

The network-namespace topology of ``tests/endpoint/_topology.py``: site-a and site-b
behind cone NATs, the public namespace (the thinker's place) with the relay, the hosted
exchange (``tether agents exchange serve``, over TLS) and the thinker's endpoint. Large
values go by proxy through tether endpoints at each place (ep-t, ep-a, ep-b), which
peer through the relay; nothing is tunnelled by hand. The seed's figure 5.5 and 5.6
programs run unchanged under ``tests/agents/seed_programs/sites.py``, which configures
their exchange.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.endpoint._topology import PUBLIC, Topology
from tests.endpoint.conftest import Relay, Site, write_relay_config

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which('ip') is None,
        reason='agents across sites need root and ip (network namespaces)',
    ),
]

ROOT = Path(__file__).resolve().parents[2]
EXCHANGE_PORT = 8800
ENDPOINTS = 'ep-t,ep-a,ep-b'


@dataclass
class Places:
    topo: Topology
    sites: dict[str, Site]  # 't' (the thinker's place, public), 'a', 'b'
    url: str
    ca: str
    token: str

    def env(self, place: str, **extra: str) -> dict[str, str]:
        settings = {
            'TETHER_EXCHANGE_URL': self.url,
            'TETHER_EXCHANGE_TOKEN': self.token,
            'TETHER_EXCHANGE_CA': self.ca,
            'TETHER_AGENTS_ENDPOINTS': ENDPOINTS,
            'TETHER_AGENTS_HOME': str(self.sites[place].home / 'agents'),
            'PYTHONPATH': str(ROOT),
        }
        return self.sites[place].env(**{**settings, **extra})

    def runner(self, place: str, *args: str) -> list[str]:
        return self.sites[place].cmd(
            sys.executable, '-m', 'tests.agents.seed_programs.sites', *args
        )

    def run(self, place: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.runner(place, *args),
            env=self.env(place, **extra),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def start_agent(self, place: str) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            self.runner(place, 'agent'),
            env=self.env(place),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.sites[place].procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # bounded: the agent prints its id or exits
        if not line:
            raise AssertionError(f'agent at {place} did not start: {proc.communicate(10)[1]}')
        return proc, str(json.loads(line)['agent_id'])


def _serve_exchange(root: Path, ns: str) -> tuple[subprocess.Popen[str], str, str, str]:
    from tether._serve.tls import make_self_signed, write_private
    from tether.agents.exchange.hosted import add_user

    folder = root / 'exchange'
    folder.mkdir()
    cert, key = make_self_signed('exchange.test', [PUBLIC])
    (folder / 'exchange.pem').write_text(cert)
    write_private(folder / 'exchange.key', key)
    users = folder / 'users.toml'
    token = add_user(users, 'alice')
    proc = subprocess.Popen(
        ['ip', 'netns', 'exec', ns, sys.executable, '-c', 'from tether.cli import main; main()',
         'agents', 'exchange', 'serve', '--users', str(users), '--host', PUBLIC,
         '--port', str(EXCHANGE_PORT), '--cert', str(folder / 'exchange.pem'),
         '--key', str(folder / 'exchange.key')],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once listening (or EOF if it failed)
    if 'listening on' not in line:
        proc.kill()
        raise AssertionError(f'the hosted exchange did not start: {proc.communicate(10)}')
    return proc, line.split()[-1], str(folder / 'exchange.pem'), token


def _stop(agent: subprocess.Popen[str]) -> int:
    """Close the agent's standard input (it stops), and wait for it."""
    _, err = agent.communicate('', timeout=60)
    assert agent.returncode == 0, err
    return agent.returncode


@pytest.fixture(scope='module')
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Places]:
    root = tmp_path_factory.mktemp('agents-sites')
    topo = Topology(root / 'build', delay_ms=0)  # the NATs matter here, not the delay
    sites: dict[str, Site] = {}
    relay: Relay | None = None
    exchange: subprocess.Popen[str] | None = None
    try:
        topo.up()
        relay = Relay(write_relay_config(root / 'relay', PUBLIC, 8700), topo.pub).start()
        exchange, url, ca, token = _serve_exchange(root, topo.pub)
        for place, ns in (('t', topo.pub), ('a', topo.site['a']), ('b', topo.site['b'])):
            home = root / f'place-{place}' / 'home'
            home.mkdir(parents=True)
            (home.parent / 'relay.pem').write_text((root / 'relay' / 'relay.pem').read_text())
            sites[place] = Site(home, ns)
            sites[place].configure(f'ep-{place}', relay.address)
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda place: sites[place].start(f'ep-{place}'), sites))
        yield Places(topo, sites, url, ca, token)
    finally:
        for site in sites.values():
            site.close()
        if exchange is not None:
            exchange.kill()
            exchange.communicate(timeout=10)
        if relay is not None:
            relay.stop()
        topo.down()


@pytest.fixture(scope='module')
def agents(places: Places) -> Iterator[dict[str, str]]:
    """Figure 5.5's ``Example`` served at site A and at site B: ``{site: agent id}``."""
    with ThreadPoolExecutor(2) as pool:
        started = dict(zip('ab', pool.map(places.start_agent, 'ab'), strict=True))
    yield {site: agent_id for site, (_, agent_id) in started.items()}
    # Each stops when its standard input closes, and exits cleanly.
    assert [_stop(proc) for proc, _ in started.values()] == [0, 0]


def test_figure_5_6_runs_at_each_place_through_the_hosted_exchange(places: Places) -> None:
    with ThreadPoolExecutor(3) as pool:
        runs = dict(zip('abt', pool.map(lambda p: places.run(p, 'fig_5_6'), 'abt'), strict=True))
    for place, done in runs.items():
        assert done.returncode == 0, (place, done.stderr)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out == {'exchanges': ['HttpExchange']}, place


def test_agents_at_two_sites_large_values_by_proxy_across_the_nats(
    places: Places, agents: dict[str, str]
) -> None:
    # 2 MB: over the exchange's 1 MiB message limit, so it can only go by proxy.
    done = places.run('t', 'thinker', '2000000')
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(out['agents']) == sorted(agents.values())
    assert out['ok'] is True
    assert out['nbytes'] == 2_000_000
    # The first agent's result reached the thinker as an unresolved proxy, and went on
    # to the second agent as such: the second read it from the first's endpoint.
    assert out['first_by_proxy'] is True
    assert out['first_resolved_here'] is False
    peers = {
        s: {p['name']: p['path'] for p in places.sites[s].status(f'ep-{s}')['peers']} for s in 'ab'
    }
    first, second = ('a', 'b') if out['agents'][0] == agents['a'] else ('b', 'a')
    # Across the two NATs (cones): a hole punched through them, no tunnel.
    assert peers[second].get(f'ep-{first}') == 'punched', peers


def test_wrong_token_and_values_too_large_without_a_store(
    places: Places, agents: dict[str, str]
) -> None:
    refused = places.run('a', 'fig_5_6', TETHER_EXCHANGE_TOKEN='not-a-token')
    assert refused.returncode != 0
    assert 'AuthenticationError' in refused.stderr
    # Without endpoints to carry it, a 2 MB value is refused before it is sent.
    done = places.run('t', 'thinker', '2000000', TETHER_AGENTS_ENDPOINTS='')
    assert done.returncode != 0
    assert 'FrameTooLargeError' in done.stderr
