"""A replica of the service killed (SIGKILL) loses nothing (issue 27 item 6): its
endpoint and its clients move to the other replica of their URL lists, tasks in flight
finish or run again, and every result reaches its client."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.faas import _lifecycle_tasks, _tasks
from tests.faas._replicas import ROOT, Replica, replica_pair
from tests.faas.conftest import AMQP, AgentThread, new_endpoint, new_user, wait_for
from tether.exceptions import ConfigError
from tether.faas import Client, EndpointConfig, Executor
from tether.faas._server import ServiceThread


@pytest.fixture(scope='module')
def pair(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, queue_prefix: str
) -> Iterator[tuple[Replica, Replica]]:
    # A killed replica's endpoints show offline 6 s after its last heartbeat (every 0.6 s)
    # instead of 20 s (every 5 s): the first test waits for it. Only these two replicas
    # judge it: the session's service (heartbeat every 5 s) is not among their endpoints'.
    folder = tmp_path_factory.mktemp('failover')
    with replica_pair(folder, pg_url, AMQP, queue_prefix, stale_s=6.0) as p:
        yield p


def test_service_urls_are_checked() -> None:
    with pytest.raises(ConfigError, match='http'):
        Client('http://a:1,ftp://b', 'token')
    with pytest.raises(ConfigError, match='empty'):
        Client([], 'token')
    with Client(['http://a:1/', ' http://b:2'], 'token') as client:
        assert client.service_urls == ['http://a:1', 'http://b:2']
        assert client.service_url == 'http://a:1'
        client.failover()
        assert client.service_url == 'http://b:2'
        client.failover()
        assert client.service_url == 'http://a:1'


def test_killing_a_replica_loses_no_task(
    prod_service: ServiceThread, pair: tuple[Replica, Replica], tmp_path: pathlib.Path
) -> None:
    killed, kept = pair
    user, token = new_user(prod_service)
    eid, ep_token = new_endpoint(prod_service, user)
    urls = f'{killed.url},{kept.url}'
    config = EndpointConfig(
        name='ep',
        endpoint_id=eid,
        service_url=urls,
        heartbeat_s=0.5,
        max_workers=2,
        worker_prefetch=0,
    )
    agent = AgentThread(config, ep_token).start()
    # An endpoint that knows only the replica killed: shown offline once it is dead.
    lone_id, lone_token = new_endpoint(prod_service, user)
    lone_config = EndpointConfig(
        name='lone', endpoint_id=lone_id, service_url=killed.url, heartbeat_s=0.5
    )
    lone = AgentThread(lone_config, lone_token).start()
    started, marker = tmp_path / 'started', tmp_path / 'marker'
    try:
        client = Client([killed.url, kept.url], token)
        with Executor(eid, client=client) as ex:
            # Two tasks running, and more queued behind them, when the replica dies.
            running = [
                ex.submit(_lifecycle_tasks.block_until, str(started), str(marker))
                for _ in range(2)
            ]
            queued = [ex.submit(_tasks.square, i) for i in range(30)]
            wait_for(
                lambda: started.exists() and len(started.read_text().splitlines()) == 2,
                60,
                'two tasks to start',
            )
            assert client.service_url == killed.url
            killed.kill()
            # The endpoint reconnects to the other replica (its next URL).
            wait_for(
                lambda: agent.agent._url == kept.url and agent.agent.connected.is_set(),
                60,
                'the endpoint to reconnect to the other replica',
            )
            marker.touch()
            assert [f.result(timeout=120) for f in queued] == [i * i for i in range(30)]
            assert sorted(f.result(timeout=120) for f in running) == sorted(
                int(p) for p in started.read_text().splitlines()
            )
            assert client.service_url == kept.url  # the Executor's stream moved too
            # A plain request of the client goes to the replica that lives.
            tid = client.run(client.register_function(_tasks.add), eid, 4, b=5)
            assert wait_for(lambda: client.get_task(tid)['status'] == 'success', 60)
            assert client.get_result(tid) == 9
            records = [client.get_task(f.task_id) for f in running + queued]
            assert {r['status'] for r in records} == {'success'}
            assert client.get_endpoint_status(eid)['status'] == 'online'
            wait_for(
                lambda: client.get_endpoint_status(lone_id)['status'] == 'offline',
                90,
                'the endpoint of the dead replica to show offline',
            )
        client.close()
    finally:
        marker.touch()
        agent.stop()
        lone.stop()


def test_the_endpoint_cli_keeps_and_tries_every_replica(
    prod_service: ServiceThread, pair: tuple[Replica, Replica], faas_home: pathlib.Path
) -> None:
    """After the kill above: ``configure`` and ``status`` pass the dead replica by."""
    killed, kept = pair
    assert killed.proc.poll() is not None  # killed by the previous test
    _user, token = new_user(prod_service)
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                '-c',
                'from tether.cli import main; main()',
                'faas',
                'endpoint',
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    urls = f'{killed.url},{kept.url}'
    out = cli('configure', 'site', '--service', urls, '--token', token, '--json')
    endpoint_id = json.loads(out)['endpoint_id']
    assert (
        f'service_url = "{urls}"' in (faas_home / 'endpoints' / 'site' / 'config.toml').read_text()
    )
    status = json.loads(cli('status', 'site', '--json'))
    assert status['endpoint_id'] == endpoint_id
    assert status['online'] is False
