"""Several hosts for real: network namespaces with their own addresses.

Each "node" is a network namespace (``ip netns``) on a private bridge, with its own
address (10.77.0.x, inside the namespaces only), its own run directory (so its own node
server) and processes started with ``ip netns exec``. Needs root (CI runs as root).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.node.conftest import wait_gone

pytestmark = pytest.mark.netns

SECRET = 'netns-cluster-secret'
NAME = 'cluster'


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


@dataclass
class Host:
    ns: str
    address: str
    run_dir: Path

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            'TETHER_NODE_RUN_DIR': str(self.run_dir),
            'TETHER_NODE_ADDRESS': self.address,
            'TETHER_NODE_SECRET': SECRET,
        }

    def popen(self, code: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ['ip', 'netns', 'exec', self.ns, sys.executable, '-c', textwrap.dedent(code), *args],
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, code: str, *args: str) -> Any:
        proc = self.popen(code, *args)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Host]]:
    """Three hosts a, b, c (10.77.0.1-3) on a bridge living in a fourth namespace."""
    if os.geteuid() != 0:
        pytest.fail('network namespace tests need root (CI runs as root)')
    tag = uuid.uuid4().hex[:6]
    hub = f'tt{tag}hub'
    hosts = {
        n: Host(f'tt{tag}{n}', f'10.77.0.{i}', tmp_path / f'run-{n}')
        for i, n in enumerate('abc', start=1)
    }
    created: list[str] = []
    try:
        sh('ip', 'netns', 'add', hub)
        created.append(hub)
        sh('ip', '-n', hub, 'link', 'add', 'br0', 'type', 'bridge')
        sh('ip', '-n', hub, 'link', 'set', 'br0', 'up')
        for n, host in hosts.items():
            sh('ip', 'netns', 'add', host.ns)
            created.append(host.ns)
            port = f'to-{n}'
            sh(
                'ip',
                '-n',
                hub,
                'link',
                'add',
                port,
                'type',
                'veth',
                'peer',
                'eth0',
                'netns',
                host.ns,
            )
            sh('ip', '-n', hub, 'link', 'set', port, 'master', 'br0')
            sh('ip', '-n', hub, 'link', 'set', port, 'up')
            sh('ip', '-n', host.ns, 'addr', 'add', f'{host.address}/24', 'dev', 'eth0')
            sh('ip', '-n', host.ns, 'link', 'set', 'eth0', 'up')
            sh('ip', '-n', host.ns, 'link', 'set', 'lo', 'up')
        yield hosts
    finally:
        for ns in created:
            pids = subprocess.run(
                ['ip', 'netns', 'pids', ns],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False)


_PRODUCE = """
    import hashlib, json, os, pickle, sys
    from tether.connectors.node import NodeConnector
    from tether.store import Store
    store = Store('prod', NodeConnector('cluster', idle_timeout=300, timeout=60))
    out = {'proxies': [], 'sha': []}
    for size in [int(s) for s in sys.argv[1].split(',')]:
        data = os.urandom(size)
        out['proxies'].append(pickle.dumps(store.proxy(data)).hex())
        out['sha'].append(hashlib.sha256(data).hexdigest())
    out['pid'] = store.connector.status().pid
    print(json.dumps(out))
"""

_CONSUME = """
    import hashlib, json, os, pickle, sys
    from tether.node import read_state
    from tether.proxy import get_factory
    proxies = [pickle.loads(bytes.fromhex(h)) for h in json.loads(sys.argv[1])]
    shas = [hashlib.sha256(bytes(p)).hexdigest() for p in proxies]
    hosts = sorted({get_factory(p).key.host for p in proxies})
    local = read_state(__import__('pathlib').Path(os.environ['TETHER_NODE_RUN_DIR']), 'cluster')
    print(json.dumps({'sha': shas, 'hosts': hosts, 'local_server': local is not None}))
"""

_STATUS = """
    import json
    from tether.connectors.node import NodeConnector
    print(json.dumps(NodeConnector('cluster').status()._asdict()))
"""


def test_consumers_fetch_directly_from_the_holder(cluster: dict[str, Host]) -> None:
    a, b, c = cluster['a'], cluster['b'], cluster['c']
    made = a.run(_PRODUCE, '1000,1000000,8000000')
    for consumer in (b, c):
        got = consumer.run(_CONSUME, json.dumps(made['proxies']))
        assert got['sha'] == made['sha']
        assert got['hosts'] == [a.address]
        # Reading never starts a server on the consumer's host.
        assert got['local_server'] is False
    # The producer has exited; its host's server served both consumers directly.
    status = a.run(_STATUS)
    assert status['pid'] == made['pid']
    assert {b.address, c.address} <= set(status['peers'])
    assert status['objects'] == 3

    # The store grows as data is produced elsewhere: b gets its own server.
    made_b = b.run(_PRODUCE, '5000')
    got = c.run(_CONSUME, json.dumps(made_b['proxies']))
    assert got['sha'] == made_b['sha']
    assert got['hosts'] == [b.address]
    assert made_b['pid'] != made['pid']


_SLOW_GET = """
    import json, pickle, sys, time
    from tether.exceptions import ConnectorError
    from tether.proxy import get_factory
    key = get_factory(pickle.loads(bytes.fromhex(sys.argv[1]))).key
    from tether.connectors.node import NodeConnector
    c = NodeConnector('cluster', timeout=60)
    print('ready', flush=True)
    try:
        c.get(key)
        result = {'error': None}
    except ConnectorError as e:
        result = {'error': type(e).__name__, 'message': str(e)}
    result['at'] = time.time()
    print(json.dumps(result))
"""


def test_holder_killed_mid_transfer(cluster: dict[str, Host]) -> None:
    a, b, c = cluster['a'], cluster['b'], cluster['c']
    made_b = b.run(_PRODUCE, '100000')
    made = a.run(_PRODUCE, '64000000')
    # Slow a's link to 100 Mbit/s: the 64 MB reply takes about 5 s to cross it.
    sh('ip', 'netns', 'exec', a.ns, 'tc', 'qdisc', 'add', 'dev', 'eth0', 'root', 'tbf',
       'rate', '100mbit', 'burst', '64kb', 'latency', '500ms')  # fmt: skip
    seen = [a.run(_STATUS)['requests']]

    def get_arrived() -> bool:
        # Each status request counts itself: one more than that is the consumer's GET.
        now = a.run(_STATUS)['requests']
        arrived = now > seen[0] + 1
        seen[0] = now
        return arrived

    consumer = c.popen(_SLOW_GET, made['proxies'][0])
    assert consumer.stdout is not None
    assert consumer.stdout.readline().strip() == 'ready'
    deadline = time.monotonic() + 60
    while not get_arrived():  # the reply then takes about 5 s to cross a's link
        assert time.monotonic() < deadline, "the consumer's GET never reached a's server"
    killed_at = time.time()
    os.kill(made['pid'], signal.SIGKILL)
    out, err = consumer.communicate(timeout=90)
    assert consumer.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result['error'] == 'ConnectorError'
    assert 'in the middle of a frame' in result['message']
    assert a.address in result['message']
    # Promptly: the error arrives when the connection drops, not at the 60 s timeout.
    assert result['at'] - killed_at < 30
    assert wait_gone(made['pid'])
    # Other servers keep serving their clients.
    got = c.run(_CONSUME, json.dumps(made_b['proxies']))
    assert got['sha'] == made_b['sha']
