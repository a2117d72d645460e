"""The Redis agent exchange on a real Redis Cluster (three masters, three replicas).

Each mailbox's keys share one hash slot (``{id}``), so its scripts run on one shard;
agents' mailboxes spread over the shards; a master killed while an agent runs is
replaced by its replica, and the agent and its callers carry on (issue 30, section 3).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tether.agents import Manager
from tether.agents.exchange import HybridExchange, MailboxStatus, RedisExchange
from tether.agents.exchange._resp_cluster import key_slot
from tether.agents.launcher import ProcessLauncher, ThreadLauncher
from tether.exceptions import ConfigError
from tether.testing.redis_cluster import RedisClusterServers, command

pytestmark = pytest.mark.skipif(
    shutil.which('redis-server') is None or shutil.which('redis-cli') is None,
    reason='needs redis-server and redis-cli',
)


@pytest.fixture(scope='module')
def cluster() -> Iterator[RedisClusterServers]:
    with RedisClusterServers() as servers:
        yield servers


def _exchange(cluster: RedisClusterServers, **kwargs: object) -> RedisExchange:
    return RedisExchange(
        cluster.host,
        cluster.port,
        prefix=f'x-{uuid.uuid4().hex[:8]}:',
        cluster=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_key_slot_matches_the_servers(cluster: RedisClusterServers) -> None:
    for key in ['a', 'tether-agents:mb:{abc}', 'x{}y', '{}{z}', 'x{user1000}.following', '']:
        assert key_slot(key) == int(command(cluster.port, 'CLUSTER', 'KEYSLOT', key or '""')[1:])


def test_agents_answer_with_mailboxes_on_several_shards(cluster: RedisClusterServers) -> None:
    exchange = _exchange(cluster)
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            handles = [manager.launch(Echo()) for _ in range(8)]
            for i, handle in enumerate(handles):
                assert handle.echo(i).result(60) == i
            big = bytes(range(256)) * 1000  # over the threshold: through the cluster store
            assert handles[0].echo(big).result(60) == big
            transport: Any = exchange.transport()
            shards = {cluster.master_of(transport.k('mb', h.agent_id)) for h in handles}
            assert len(shards) > 1  # 8 random ids on one of 3 shards: 1 in 3**7
            for handle in handles:
                # every key of a mailbox is on its shard (the scripts ran there)
                slots = {key_slot(transport.k(kind, handle.agent_id)) for kind in ('st', 'mb')}
                assert len(slots) == 1
            assert sorted(exchange.discover(Echo)) == sorted(h.agent_id for h in handles)
            victim = handles[0]
            manager.shutdown(victim, timeout=60)
            assert exchange.status(victim.agent_id) is MailboxStatus.TERMINATED
            assert victim.agent_id not in exchange.discover(Echo)
    finally:
        exchange.close()


def test_a_cluster_exchange_refuses_other_databases_and_braces(
    cluster: RedisClusterServers,
) -> None:
    with pytest.raises(ConfigError):
        RedisExchange(cluster.host, cluster.port, cluster=True, db=1)
    with pytest.raises(ConfigError):
        RedisExchange(cluster.host, cluster.port, cluster=True, prefix='{p}:')
    with pytest.raises(ConfigError, match='HybridExchange'):
        HybridExchange(cluster.host, cluster.port, cluster=True)  # one server only
    assert _exchange(cluster).config()['cluster'] is True


def test_an_agent_carries_on_after_its_master_is_killed() -> None:
    with RedisClusterServers() as cluster:
        exchange = _exchange(cluster, timeout=60.0)
        try:
            with Manager(exchange, ProcessLauncher()) as manager:
                handle = manager.launch(Echo())
                assert handle.echo('before').result(60) == 'before'
                transport: Any = exchange.transport()
                victim = cluster.master_of(transport.k('mb', handle.agent_id))
                cluster.wait_replicated()  # what Redis would lose (async replication) is not ours
                cluster.kill(victim)
                # Sent while the replica takes over: the client waits for the new master.
                during = handle.echo('during')
                cluster.wait_failover(victim)
                assert cluster.master_of(transport.k('mb', handle.agent_id)) != victim
                assert during.result(120) == 'during'
                assert handle.echo('after').result(60) == 'after'
                assert exchange.status(handle.agent_id) is MailboxStatus.ACTIVE
                manager.shutdown(handle, timeout=60)
        finally:
            exchange.close()
