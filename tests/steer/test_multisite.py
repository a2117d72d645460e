"""The seed's multi-site campaign end to end (issue 28 item 3), in network namespaces.

A Thinker and its FaaSTaskServer in the public namespace; ``simulate`` runs on a faas
endpoint at site A whose workers are in a Slurm job (of a private cluster in site A's
namespace), ``train`` and ``infer`` on one at site B, each site behind its own NAT with
20 ms between them; simulation data and models travel by proxy through the
tether endpoints of the two sites, peered through the relay (see ``_multisite.py``).
Every value is checked where it is used: site B sees site A's simulations, site A sees
site B's model, and the Thinker never holds the bulk data.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.steer._multisite import CAMPAIGN, MultiSite

pytestmark = [
    pytest.mark.netns,
    # Building the world (namespaces, service, relay, four endpoints) takes most of it.
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason='network namespaces need root'),
    pytest.mark.skipif(
        shutil.which('ip') is None or shutil.which('socat') is None,
        reason='needs ip (iproute2) and socat',
    ),
]


@pytest.fixture(scope='module')
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiSite]:
    root = Path(tmp_path_factory.mktemp('multisite'))
    with MultiSite(root, delay_ms=10, workers=(2, 1), slurm=True) as w:
        yield w


def test_campaign_across_two_sites(world: MultiSite) -> None:
    report = world.run_python(
        CAMPAIGN,
        world.service_url,
        str(world.token_file),
        world.endpoint_ids['sim-a'],
        world.endpoint_ids['ml-b'],
        '2',  # rounds
        '2',  # simulations per round
        '300000',  # bytes per simulation (over the 100 kB threshold: by proxy)
        timeout=240,
    )
    # The resource counter learned each site's workers from the service.
    assert report['kinds'] == {world.endpoint_ids['sim-a']: 2, world.endpoint_ids['ml-b']: 1}
    assert report['rounds'] == [{'simulations_seen_at_b': True, 'model_seen_at_b': True}] * 2
    assert report['model_seen_at_a'] is True
    # Bulk data never went through the service: every message is a few kB.
    assert all(max(sizes.values()) < 10_000 for _, sizes in report['sizes']), report['sizes']
    # It went endpoint to endpoint, hole punched through both NATs (no tunnel, no relay).
    assert world.peers('b') == {'ep-a': 'punched'}
    assert world.peers('a') == {'ep-b': 'punched'}
    # Site A's tasks ran in Slurm jobs of the cluster in site A's namespace: every
    # simulation's record names a job of it, and a probe task sees that job, cluster,
    # namespace and address (site A's address is local there, as it is nowhere else).
    where, records = world.run_python(
        SITE_A, world.service_url, str(world.token_file), world.endpoint_ids['sim-a']
    )
    assert world.slurm is not None
    jobs = world.slurm.jobs()
    # The campaign's and the probe (and the other test's, had it run first).
    assert len(records) >= 2 * 2 + 1 + 1, records
    for record in records:
        assert record['status'] == 'success', record
        assert record['block']['scheduler'] == 'slurm', record
        assert jobs[record['block']['job_id']]['nodes'] == 'site-a', (record, jobs)
    assert jobs[where['job']]['state'] == 'RUNNING', (where, jobs)
    assert where['cluster'] == 'site-a'
    assert where['slurm_conf'] == str(world.slurm.conf)
    assert where['site_address_is_local'] is True
    site_ns = os.stat(f'/run/netns/{world.topo.site["a"]}').st_ino
    assert where['netns'] == f'net:[{site_ns}]' != os.readlink('/proc/self/ns/net')


def test_a_failing_method_and_a_spent_proxy_are_reported(world: MultiSite) -> None:
    """A task that fails at site B, and a proxy of site A whose object is gone (a result
    is evicted on its first resolve), come back as failed results with the reason."""
    report = world.run_python(
        FAILURES,
        world.service_url,
        str(world.token_file),
        world.endpoint_ids['sim-a'],
        world.endpoint_ids['ml-b'],
        timeout=180,
    )
    assert report['fails'] == [False, 'ValueError: bad input at site B']
    assert report['missing'][0] is False
    assert 'ProxyResolveMissingKeyError' in report['missing'][1], report


# argv: service URL, token file, site A's endpoint. Prints where a task there runs, and
# the records of the endpoint's tasks.
SITE_A = """
import json, sys
import httpx
from tether.faas import Client, Executor


def where(address):
    import os, socket
    with socket.socket() as s:
        try:
            s.bind((address, 0))
            local = True
        except OSError:
            local = False
    return {
        'job': os.environ.get('SLURM_JOB_ID', ''),
        'cluster': os.environ.get('SLURM_CLUSTER_NAME', ''),
        'slurm_conf': os.environ.get('SLURM_CONF', ''),
        'site_address_is_local': local,
        'netns': os.readlink('/proc/self/ns/net'),
    }


if __name__ == '__main__':
    url, token_file, endpoint = sys.argv[1:4]
    token = open(token_file).read().strip()
    with Executor(endpoint, service_url=url, token=token) as ex:
        found = ex.submit(where, '192.0.2.10').result(timeout=120)
    recent = httpx.get(f'{url}/v1/tasks', params={'limit': 1000},
                       headers={'Authorization': f'Bearer {token}'}, timeout=30)
    recent.raise_for_status()
    with Client(url, token) as client:
        records = [client.get_task(t['task_id']) for t in recent.json()['tasks']
                   if t['endpoint_id'] == endpoint]
    print(json.dumps([found, records]))
"""

FAILURES = """
import json, sys
from tether.connectors.endpoint import EndpointConnector
from tether.steer import PipeQueues
from tether.steer.task_server import FaaSTaskServer
from tether.store import Store


def make(n):
    return b'x' * n


def check(x):
    if x == 'bad':
        raise ValueError('bad input at site B')
    return len(x)


if __name__ == '__main__':
    url, token_file, sim_ep, ml_ep = sys.argv[1:5]
    store = Store('campaign', EndpointConnector(['ep-a', 'ep-b']), register=True)
    queues = PipeQueues(proxystore_name='campaign', proxystore_threshold=100_000)
    server = FaaSTaskServer({make: sim_ep, check: ml_ep}, queues, service_url=url,
                            token=open(token_file).read().strip())
    server.start()
    out = {}
    try:
        queues.send_inputs('bad', method='check')
        r = queues.get_result(timeout=120)
        out['fails'] = [r.success, r.failure_info.exception.splitlines()[-1]]
        queues.send_inputs(500_000, method='make')
        made = queues.get_result(timeout=120)
        # Resolve it once (evicted on first resolve), then send the spent proxy.
        queues.send_inputs(made.value, method='check')
        first = queues.get_result(timeout=120)
        assert first.value == 500_000, first.failure_info
        queues.send_inputs(made.value, method='check')
        r = queues.get_result(timeout=120)
        out['missing'] = [r.success, r.failure_info.exception if r.failure_info else '']
    finally:
        queues.send_kill_signal()
        server.join(60)
    print(json.dumps(out))
"""
