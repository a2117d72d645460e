"""RedisConnector(cluster=True) on a real Redis Cluster: 3 masters + 3 replicas on loopback.

Each module run starts its own cluster (tether.testing.redis_cluster) on free ports: tests
kill masters and move slots, which a shared server must never see. Every wait is on the
cluster's own state (never a fixed sleep).
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.redis import RedisConnector, RedisKey
from tether.exceptions import ConfigError
from tether.proxy import is_resolved
from tether.store import Store
from tether.store.batch import resolve_batch
from tether.testing.redis_cluster import RedisClusterServers, command

pytestmark = pytest.mark.skipif(
    shutil.which('redis-server') is None or shutil.which('redis-cli') is None,
    reason='needs redis-server and redis-cli',
)


@pytest.fixture(scope='module')
def cluster() -> Iterator[RedisClusterServers]:
    with RedisClusterServers() as servers:
        yield servers


@pytest.fixture
def connector(cluster: RedisClusterServers) -> Iterator[RedisConnector]:
    c = RedisConnector(cluster.host, cluster.port, cluster=True, prefix=f'c-{uuid.uuid4().hex}:')
    yield c
    c.close(clear=True)


def _round_trips(connector: RedisConnector) -> list[int]:
    sent: list[int] = []
    round_trip = connector._raw.round_trip

    def counting(pool: Any, packer: Any, read: Any, **kwargs: Any) -> Any:
        sent.append(pool.port)
        return round_trip(pool, packer, read, **kwargs)

    connector._raw.round_trip = counting  # type: ignore[method-assign]
    return sent


def _values(n: int) -> list[bytes]:
    return [b'%05d' % i * 200 for i in range(n)]


def test_keys_spread_over_every_shard_and_batches_go_once_to_each(
    cluster: RedisClusterServers, connector: RedisConnector
) -> None:
    values = _values(60)
    sent = _round_trips(connector)
    keys = connector.put_batch(values)
    assert {cluster.master_of(k.redis_key) for k in keys} == set(cluster.masters())
    assert sorted(sent) == sorted(cluster.masters())  # one request per shard
    sent.clear()
    assert [bytes(v or b'') for v in connector.get_batch(keys)] == values
    assert sorted(sent) == sorted(cluster.masters())
    assert all(connector.exists(k) for k in keys)
    connector.evict(keys[0])
    assert not connector.exists(keys[0])
    assert connector.get(keys[0]) is None
    assert connector.get_batch([keys[0], keys[1]])[0] is None


def test_values_in_chunks_and_waiting_on_a_cluster(cluster: RedisClusterServers) -> None:
    # Chunks, their temporary key and the readiness token share the key's slot.
    c = RedisConnector(
        cluster.host, cluster.port, cluster=True, prefix=f'c-{uuid.uuid4().hex}:', chunk_size=1000
    )
    try:
        big = bytes(range(256)) * 40
        keys = c.put_batch([big, b'small', big[:999]])
        assert [bytes(v or b'') for v in c.get_batch(keys)] == [big, b'small', big[:999]]
        later = c.new_key()
        assert c.wait(later, timeout=0) is False
        c.set(later, big)
        assert c.wait(later, timeout=5)
        assert bytes(c.get(later) or b'') == big
    finally:
        c.close(clear=True)
    import redis

    for port in cluster.masters():
        with redis.Redis(cluster.host, port) as node:
            assert node.keys(f'{c.prefix}*') == []  # cleared on every shard


def test_proxies_across_shards_resolve_in_one_batch(connector: RedisConnector) -> None:
    with Store(f'cl-{uuid.uuid4().hex[:8]}', connector, cache_size=0, register=True) as store:
        objs = [bytes([i]) * 50_000 for i in range(30)]
        received = [pickle.loads(pickle.dumps(p)) for p in store.proxy_batch(objs)]
        resolve_batch(received)
        assert all(is_resolved(p) for p in received)
        assert [bytes(p) for p in received] == objs


def test_config_rebuilds_a_cluster_connector(connector: RedisConnector) -> None:
    key = connector.put(b'shared')
    other = RedisConnector.from_config(connector.config())
    try:
        assert other.cluster is True
        assert bytes(other.get(key) or b'') == b'shared'
    finally:
        other.close()


def test_cluster_refuses_braces_in_the_prefix_and_other_databases(
    cluster: RedisClusterServers,
) -> None:
    with pytest.raises(ConfigError, match='hash tag'):
        RedisConnector(cluster.host, cluster.port, cluster=True, prefix='app{1}:')
    with pytest.raises(ConfigError, match='database 0'):
        RedisConnector(cluster.host, cluster.port, cluster=True, db=1)


def _node_id(port: int) -> str:
    for line in command(port, 'CLUSTER', 'NODES').splitlines():
        if 'myself' in line:
            return line.split()[0]
    raise AssertionError(f'no node id for port {port}')


def test_moved_slots_are_followed(cluster: RedisClusterServers, connector: RedisConnector) -> None:
    keys = connector.put_batch(_values(20))
    source = cluster.master_of(keys[0].redis_key)
    target = next(p for p in cluster.masters() if p != source)
    slot = command(source, 'CLUSTER', 'KEYSLOT', keys[0].redis_key).lstrip(':')
    # Move the key's slot (and its keys) to another master: the connector's slot map
    # is now stale, and the old shard answers MOVED.
    src_id, dst_id = _node_id(source), _node_id(target)
    assert command(target, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', src_id) == '+OK'
    assert command(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst_id) == '+OK'
    # Mid-migration the key is still on the source: reads work (ASK only for moved keys).
    assert bytes(connector.get(keys[0]) or b'') == _values(20)[0]
    names = [k.redis_key for k in keys if k.redis_key.endswith('}')]
    moving = [n for n in names if cluster.master_of(n) == source]
    subprocess.run(
        [
            'redis-cli',
            '-p',
            str(source),
            'MIGRATE',
            '127.0.0.1',
            str(target),
            '',
            '0',
            '5000',
            'KEYS',
            keys[0].redis_key,
        ],
        check=True,
        capture_output=True,
    )
    # Migrating: the moved key answers ASK from the source.
    assert bytes(connector.get(keys[0]) or b'') == _values(20)[0]
    for port in cluster.masters():
        assert command(port, 'CLUSTER', 'SETSLOT', slot, 'NODE', dst_id) == '+OK'
    cluster.wait_ok()
    # Done: the source answers MOVED, the connector reads its map again.
    assert [bytes(v or b'') for v in connector.get_batch(keys)] == _values(20)
    assert bytes(connector.get(keys[0]) or b'') == _values(20)[0]
    assert cluster.master_of(keys[0].redis_key) == target
    assert moving  # the batch above did cross the moved slot's shard


def test_a_killed_master_is_replaced_and_nothing_is_lost() -> None:
    with RedisClusterServers() as cluster:
        c = RedisConnector(cluster.host, cluster.port, cluster=True, prefix='failover:')
        try:
            values = _values(40)
            keys = c.put_batch(values)
            single = c.put(b'one')
            victim = cluster.master_of(single.redis_key)
            cluster.wait_replicated()  # what Redis would lose (async replication) is not ours
            cluster.kill(victim)
            cluster.wait_failover(victim)
            assert cluster.master_of(single.redis_key) != victim
            # The connector's map still names the dead master: it finds the new one.
            assert bytes(c.get(single) or b'') == b'one'
            assert [bytes(v or b'') for v in c.get_batch(keys)] == values
            more = c.put_batch(values)
            assert [bytes(v or b'') for v in c.get_batch(more)] == values
            assert c.exists(RedisKey(single.redis_key))
        finally:
            c.close(clear=True)


def test_stream_shims_on_a_cluster(cluster: RedisClusterServers) -> None:
    from tether.stream.shims.redis import (
        RedisPublisher,
        RedisQueuePublisher,
        RedisQueueSubscriber,
        RedisSubscriber,
    )

    prefix = f'cs-{uuid.uuid4().hex[:8]}:'
    topics = [f't{i}' for i in range(6)]  # streams on several shards
    publisher = RedisQueuePublisher(cluster.host, cluster.port, prefix=prefix, cluster=True)
    subscribers = [
        RedisQueueSubscriber(cluster.host, cluster.port, t, prefix=prefix, cluster=True)
        for t in topics
    ]
    try:
        for t in topics:
            publisher.send_message(t, t.encode())
        assert [next(iter(s)) for s in subscribers] == [t.encode() for t in topics]
    finally:
        publisher.close()
        for s in subscribers:
            s.close()
    pub = RedisPublisher(cluster.host, cluster.port, cluster=True)
    sub = RedisSubscriber(cluster.host, cluster.port, f'{prefix}news', cluster=True)
    try:
        pub.send_message(f'{prefix}news', b'hello')
        assert next(iter(sub)) == b'hello'
    finally:
        pub.close()
        sub.close()


def test_a_forked_child_gets_a_free_router_lock(connector: RedisConnector) -> None:
    """Fork while another thread holds the router's lock: the child still reads a batch
    across shards (its lock is a new one, its batch threads its own)."""
    keys = connector.put_batch(_values(30))
    assert len(connector._router.group([k.redis_key for k in keys])) > 1  # several shards
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with connector._router._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                ok = connector.get_batch(keys) == _values(30)
                os.write(w, b'1' if ok else b'0')
            finally:
                os._exit(0)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 60)
        answer = os.read(r, 1) if ready else b''
        os.close(r)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert answer == b'1', 'the child hung on the lock its parent held'
    finally:
        release.set()
        holder.join()
