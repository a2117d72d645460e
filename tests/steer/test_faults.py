"""Faults of the broker: a Redis restart mid-campaign is a clear error, never silent loss."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.steer import _tasks
from tests.steer.conftest import serving
from tether.exceptions import SteerQueueError
from tether.steer import BaseThinker, LocalTaskServer, RedisQueues, Result, result_processor
from tether.testing import redis_server_fixture

private_redis = redis_server_fixture()


def _wait_for_results(server: Any, key: str, n: int) -> None:
    import redis

    client = redis.Redis('127.0.0.1', server.port)
    try:
        # Bounded by the test's timeout; BLPOP-free polling keeps the results in place.
        while client.llen(key) < n:
            client.execute_command('WAIT', 0, 10)
    finally:
        client.close()


def test_redis_restart_mid_campaign_is_a_clear_error(private_redis: Any) -> None:
    queues = RedisQueues(port=private_redis.port, prefix=f'steer-{uuid.uuid4().hex}')
    server = LocalTaskServer(queues, [_tasks.add], num_workers=1)
    with serving(server):
        queues.send_inputs(1, 1, method='add')
        assert queues.get_result(timeout=60).value == 2
        # Two results wait in Redis, unread, when it restarts (and loses them).
        queues.send_inputs(2, 2, method='add')
        queues.send_inputs(3, 3, method='add')
        _wait_for_results(private_redis, f'{queues.prefix}_result_default', 2)
        private_redis.stop()
        private_redis.start()
        with pytest.raises(SteerQueueError, match=r'restarted|lost the Redis server') as info:
            queues.get_result(timeout=60)
        assert '2 task(s)' in str(info.value)
        # Every later call says so too, rather than waiting for results that are gone.
        with pytest.raises(SteerQueueError):
            queues.send_inputs(4, 4, method='add')
        # The task server also stops with an error instead of serving an empty queue.
        server.join(60)
        assert server.exitcode not in (0, None)
    queues.close()


def test_thinker_reports_the_lost_broker(private_redis: Any) -> None:
    queues = RedisQueues(port=private_redis.port, prefix=f'steer-{uuid.uuid4().hex}')
    queues.connect()

    class Waits(BaseThinker):
        @result_processor
        def results(self, result: Result) -> None:
            pass

    thinker = Waits(queues)
    thinker.start()
    private_redis.stop()
    private_redis.start()
    thinker.join(60)
    assert not thinker.is_alive()
    assert isinstance(thinker.error, SteerQueueError)
    queues.close()


def test_unreachable_redis_is_a_clear_error() -> None:
    from tether.testing import free_port

    queues = RedisQueues(port=free_port(), prefix='steer-nothing')
    with pytest.raises(SteerQueueError, match=r'Redis server at 127\.0\.0\.1'):
        queues.send_inputs(1, method='add')
    assert queues.active_count == 0
