"""Steering queues on a real Redis Cluster (three masters, three replicas; issue 30).

Every key of a campaign's queues has the hash tag ``{prefix}`` (one shard, so the push
script's two keys share a slot); a master killed while tasks run is replaced by its
replica and the round trips carry on, since the replica had every message.
"""

from __future__ import annotations

import shutil
import uuid

import pytest

from tests.steer import _tasks
from tether.exceptions import ConfigError
from tether.steer import LocalTaskServer
from tether.steer.queue.redis import RedisQueues
from tether.testing.redis_cluster import RedisClusterServers
from tether.testing.steer import serving

pytestmark = pytest.mark.skipif(
    shutil.which('redis-server') is None or shutil.which('redis-cli') is None,
    reason='needs redis-server and redis-cli',
)


def _queues(cluster: RedisClusterServers) -> RedisQueues:
    return RedisQueues(
        ['sim'],
        cluster.host,
        cluster.port,
        prefix=f'steer-{uuid.uuid4().hex[:8]}',
        cluster=True,
        reconnect_timeout=120.0,
    )


def test_round_trips_survive_the_loss_of_the_queues_master() -> None:
    with RedisClusterServers() as cluster:
        queues = _queues(cluster)
        try:
            with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
                queues.send_inputs(1, method='add', input_kwargs={'y': 2}, topic='sim')
                assert queues.get_result('sim', timeout=60).value == 3
                victim = cluster.master_of(queues._key('requests'))
                assert cluster.master_of(queues._key('writers')) == victim  # one slot
                cluster.wait_replicated()  # what Redis would lose (async replication) is not ours
                cluster.kill(victim)
                # Sent while the replica takes over: the queues wait for the new master.
                queues.send_inputs(2, method='add', input_kwargs={'y': 3}, topic='sim')
                cluster.wait_failover(victim)
                assert cluster.master_of(queues._key('requests')) != victim
                result = queues.get_result('sim', timeout=120)
                assert result.success, result.failure_info
                assert result.value == 5
                queues.send_inputs(3, method='add', input_kwargs={'y': 4}, topic='sim')
                assert queues.get_result('sim', timeout=60).value == 7
        finally:
            queues.close()


def test_cluster_queues_refuse_braces_in_the_prefix() -> None:
    with pytest.raises(ConfigError):
        RedisQueues(prefix='{a}', cluster=True)
