"""Faults of the broker: a Redis restart mid-campaign.

A server that kept its data (append-only file) is reconnected to and the campaign
carries on, nothing lost and nothing run twice; one that lost it is a clear error naming
the tasks lost, never silent loss.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.steer import _tasks
from tether.exceptions import SteerQueueError
from tether.steer import BaseThinker, LocalTaskServer, RedisQueues, Result, result_processor
from tether.testing import RedisServer, redis_server_fixture
from tether.testing.steer import serving

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
        lost = [queues.send_inputs(n, n, method='add') for n in (2, 3)]
        _wait_for_results(private_redis, f'{queues.prefix}_result_default', 2)
        private_redis.stop()
        private_redis.start()
        with pytest.raises(SteerQueueError, match=r'restarted|lost the Redis server') as info:
            queues.get_result(timeout=60)
        assert '2 task(s)' in str(info.value)
        assert 'came back without their data' in str(info.value)
        assert all(task_id in str(info.value) for task_id in lost)
        # Every later call says so too, rather than waiting for results that are gone.
        with pytest.raises(SteerQueueError):
            queues.send_inputs(4, 4, method='add')
        # The task server also stops with an error instead of serving an empty queue.
        server.join(60)
        assert server.exitcode not in (0, None)
    queues.close()


def _wait_for_file(path: Path) -> None:
    while not path.exists():  # bounded by the test's timeout
        time.sleep(0.01)


@pytest.mark.parametrize('restart', ['crash appendfsync=always', 'shutdown appendfsync=everysec'])
def test_campaign_survives_a_restart_of_a_redis_that_keeps_its_data(
    tmp_path: Path, restart: str
) -> None:
    fsync = restart.rsplit('=', maxsplit=1)[-1]
    server_process = RedisServer(
        args=['--appendonly', 'yes', '--appendfsync', fsync], directory=tmp_path
    )
    server_process.start()
    try:
        queues = RedisQueues(port=server_process.port, prefix=f'steer-{uuid.uuid4().hex}')
        server = LocalTaskServer(queues, [_tasks.log_run], num_workers=1)
        log, gate = tmp_path / 'runs.log', tmp_path / 'gate'
        with serving(server):
            # Two results wait in Redis, unread; a third task runs when Redis restarts,
            # and a fourth waits behind it.
            sent = [queues.send_inputs(str(log), tag, method='log_run') for tag in 'ab']
            _wait_for_results(server_process, f'{queues.prefix}_result_default', 2)
            sent.append(queues.send_inputs(str(log), 'c', str(gate), method='log_run'))
            _wait_for_file(Path(f'{gate}.started'))
            sent.append(queues.send_inputs(str(log), 'd', method='log_run'))
            if restart.startswith('shutdown'):
                redis.Redis('127.0.0.1', server_process.port).shutdown()
            server_process.stop()
            server_process.start()
            gate.write_text('open')
            sent.append(queues.send_inputs(str(log), 'e', method='log_run'))
            results = [queues.get_result(timeout=60) for _ in sent]
            assert all(r.success for r in results), [r.failure_info for r in results]
            assert sorted(r.task_id for r in results) == sorted(sent)
            assert sorted(r.value for r in results) == list('abcde')
            queues.send_kill_signal()
            server.join(60)
            assert server.exitcode == 0
        assert sorted(log.read_text().split()) == list('abcde')  # each ran once
        queues.close()
    finally:
        server_process.stop()


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


def test_a_message_taken_as_the_connection_died_is_read_again(private_redis: Any) -> None:
    queues = RedisQueues(port=private_redis.port, prefix=f'steer-{uuid.uuid4().hex}')
    task_id = queues.send_inputs(1, 1, method='add')
    client = redis.Redis('127.0.0.1', private_redis.port)
    # What BLMOVE does for the reader; then its reply is lost with the connection.
    inflight = f'{queues.prefix}_requests_inflight_{queues._writer}'
    client.lmove(f'{queues.prefix}_requests', inflight, 'LEFT', 'LEFT')
    taken: list[Any] = []
    reader = threading.Thread(target=lambda: taken.append(queues.get_task(timeout=60)))
    reader.start()
    while not any(c.get('cmd') == 'blmove' for c in client.client_list()):
        time.sleep(0.01)  # bounded by the test's timeout
    client.client_kill_filter(_type='normal', skipme=True)
    reader.join(60)
    assert [r.task_id for _, r in taken] == [task_id]
    assert client.exists(inflight)
    queues.flush()  # the in-flight lists go with the queues
    assert client.keys(f'{queues.prefix}*') == [f'{queues.prefix}_writers'.encode()]
    client.close()
    queues.close()


def test_reconnection_wait_runs_on_the_queues_clock(private_redis: Any) -> None:
    """A server gone for good is reported after ``reconnect_timeout`` of the given clock."""
    from tether.testing import FakeClock

    clock = FakeClock()
    queues = RedisQueues(
        port=private_redis.port,
        prefix=f'steer-{uuid.uuid4().hex}',
        reconnect_timeout=60.0,
        clock=clock,
    )
    queues.connect()
    private_redis.stop()
    errors: list[BaseException] = []

    def send() -> None:
        try:
            queues.send_inputs(1, 1, method='add')
        except BaseException as e:
            errors.append(e)

    sender = threading.Thread(target=send)
    sender.start()
    clock.wait_for_sleepers(1)  # retrying, on the fake clock
    assert not errors
    clock.advance(61.0)
    sender.join(60)
    assert not sender.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], SteerQueueError)
    assert 'lost the Redis server' in str(errors[0])
    private_redis.start()
    queues.close()
