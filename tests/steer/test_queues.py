"""Queues (pipe and Redis) with a process-pool task server: the task life cycle."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tests.steer import _tasks
from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerAuthenticationError,
    SteerQueueError,
    SteerTimeoutError,
)
from tether.steer import LocalTaskServer, SerializationMethod
from tether.testing.steer import serving


def test_round_trip_records_the_life_cycle(make_queues: Any) -> None:
    queues = make_queues(topics=['sim'])
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
        task_id = queues.send_inputs(1, method='add', input_kwargs={'y': 2}, topic='sim')
        assert queues.active_count == 1
        result = queues.get_result('sim', timeout=60)
    assert result.task_id == task_id
    assert result.success is True
    assert result.value == 3
    assert result.args == (1,)
    assert result.kwargs == {'y': 2}
    t = result.timestamp
    assert t.created <= t.input_received <= t.compute_started <= t.compute_ended
    assert t.input_received <= t.start_task_submission <= t.compute_started
    assert t.compute_ended <= t.task_received <= t.result_sent <= t.result_received
    assert result.time.running is not None
    assert result.time.serialize_inputs is not None
    assert result.time.deserialize_results is not None
    assert result.worker_info['pid'] > 0
    assert queues.active_count == 0
    assert queues.wait_until_done(timeout=0)


def test_topics_keep_results_apart(make_queues: Any) -> None:
    queues = make_queues(topics=['a', 'b'])
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
        queues.send_inputs(1, 1, method='add', topic='a')
        queues.send_inputs(2, 2, method='add', topic='b')
        assert queues.get_result('b', timeout=60).value == 4
        assert queues.get_result('a', timeout=60).value == 2


def test_failure_carries_the_remote_traceback(make_queues: Any) -> None:
    queues = make_queues()
    with serving(LocalTaskServer(queues, [_tasks.fail], num_workers=1)):
        queues.send_inputs('boom', method='fail')
        result = queues.get_result(timeout=60)
    assert result.success is False
    assert result.failure_info is not None
    assert result.failure_info.exception == 'ValueError: boom'
    assert 'raise ValueError(message)' in result.failure_info.traceback


def test_unknown_method_is_a_failure_not_a_crash(make_queues: Any) -> None:
    queues = make_queues()
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)) as server:
        queues.send_inputs(1, method='rm_rf')
        result = queues.get_result(timeout=60)
        assert result.success is False
        assert "unknown method 'rm_rf'" in result.failure_info.exception
        # The server keeps serving.
        queues.send_inputs(1, 1, method='add')
        assert queues.get_result(timeout=60).value == 2
        assert server.is_alive()


def test_inputs_dropped_when_not_kept(make_queues: Any) -> None:
    queues = make_queues(keep_inputs=False)
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
        queues.send_inputs(5, method='add')
        result = queues.get_result(timeout=60)
    assert result.value == 5
    assert result.args == ()


def test_timeout_and_kill_signal(make_queues: Any) -> None:
    queues = make_queues()
    with pytest.raises(SteerTimeoutError):
        queues.get_result(timeout=0.01)
    server = LocalTaskServer(queues, [_tasks.add], num_workers=1)
    with serving(server):
        queues.send_kill_signal()
        server.join(60)
        assert server.exitcode == 0
        # The server tells the Thinker it stopped.
        with pytest.raises(KillSignalError):
            queues.get_result(timeout=60)


def test_bad_input_is_a_clear_error(make_queues: Any) -> None:
    queues = make_queues(topics=['a'])
    with pytest.raises(ConfigError, match='unknown topic'):
        queues.send_inputs(1, method='add', topic='nope')
    with pytest.raises(ConfigError, match='unknown topics'):
        make_queues(topics=['a'], proxystore_threshold={'zzz': 1})
    with pytest.raises(ConfigError, match='not supported'):
        make_queues(serialization_method='yaml')
    as_json = make_queues(serialization_method=SerializationMethod.JSON)
    assert as_json.serialization_method == 'json'
    pickled = make_queues(serialization_method=SerializationMethod.PICKLE)
    assert pickled.serialization_method == 'pickle'
    with pytest.raises(ConfigError):
        make_queues(topics='a')


def test_signed_queues_refuse_unsigned_messages(make_queues: Any) -> None:
    signed = make_queues(secret='s3cret-s3cret-s3cret')
    assert signed.signed
    message = signed._encode(_tasks_result(), 'requests')
    decoded = signed._decode(message, 'requests', 'test')
    assert decoded is not None
    assert decoded.method == 'add'
    unsigned = b'TSQ1' + pickle.dumps(_tasks_result())
    with pytest.raises(SteerAuthenticationError, match='unsigned'):
        signed._decode(unsigned, 'requests', 'test')
    forged = b'TSQ2' + b'\0' * 32 + message[36:]
    with pytest.raises(SteerAuthenticationError, match='signature does not match'):
        signed._decode(forged, 'requests', 'test')
    with pytest.raises(SteerQueueError, match=r'not a tether\.steer message'):
        signed._decode(b'junk', 'requests', 'test')
    with pytest.raises(ConfigError, match='at least 16 bytes'):
        make_queues(secret='short')


def _tasks_result() -> Any:
    from tether.steer import Result

    return Result(method='add')


def test_inputs_proxied_by_the_queues_are_evicted_when_not_kept(
    make_queues: Any,
    store: Any,
) -> None:
    from tether.store import get_key

    queues = make_queues(keep_inputs=False, proxystore_name=store.name, proxystore_threshold=10)
    with serving(LocalTaskServer(queues, [_tasks.nbytes], num_workers=1)):
        keys = []
        for retries in (0, 1):
            queues.send_inputs(b'q' * 1000, method='nbytes', max_retries=retries)
            (_store, (proxy,)) = next(iter(queues._made_proxies.values()))
            key = get_key(proxy)
            keys.append(key)
            assert store.exists(key)
            result = queues.get_result(timeout=60)
            assert result.value == 1000
    # Deleted in the background once the result is read; finish_evictions waits for it.
    assert queues.finish_evictions(timeout=60)
    assert not any(store.exists(key) for key in keys)
    assert queues._made_proxies == {}


def test_a_thinker_returns_once_the_inputs_it_proxied_are_deleted(
    make_queues: Any,
    redis_connector: Any,
) -> None:
    import threading
    import uuid

    from tether.steer import BaseThinker, agent
    from tether.store import Store, get_key

    release = threading.Event()
    evicting = threading.Event()

    class SlowEvict(Store[Any]):
        def evict(self, key: Any) -> None:
            evicting.set()
            release.wait(60)
            super().evict(key)

    name = f'steer-slow-{uuid.uuid4().hex[:8]}'
    with SlowEvict(name, redis_connector, register=True) as store:
        queues = make_queues(keep_inputs=False, proxystore_name=name, proxystore_threshold=10)
        keys = []

        class OneTask(BaseThinker):
            @agent
            def run_one(self) -> None:
                self.queues.send_inputs(b'q' * 1000, method='nbytes')
                (_store, (proxy,)) = next(iter(self.queues._made_proxies.values()))
                keys.append(get_key(proxy))
                assert self.queues.get_result(timeout=60).value == 1000

        with serving(LocalTaskServer(queues, [_tasks.nbytes], num_workers=1)):
            thinker = OneTask(queues)
            thinker.start()
            assert evicting.wait(60)
            thinker.join(0.2)
            assert thinker.is_alive()  # its agent is done; the eviction is not
            assert store.exists(keys[0])
            release.set()
            thinker.join(60)
            assert not thinker.is_alive()
            assert thinker.error is None
            assert not store.exists(keys[0])


def test_an_input_that_cannot_be_evicted_is_an_error(
    make_queues: Any,
    redis_connector: Any,
) -> None:
    import uuid

    from tether.store import Store

    name = f'steer-closing-{uuid.uuid4().hex[:8]}'
    store = Store(name, redis_connector, register=True)
    queues = make_queues(keep_inputs=False, proxystore_name=name, proxystore_threshold=10)
    with serving(LocalTaskServer(queues, [_tasks.nbytes], num_workers=1)):
        queues.send_inputs(b'q' * 1000, method='nbytes')
        queues.send_inputs(b'r' * 1000, method='nbytes')
        store.close()  # the Thinker's store: it can no longer delete what it proxied
        assert queues.get_result(timeout=60).value == 1000
        with pytest.raises(SteerQueueError, match='could not delete the proxied input'):
            queues.finish_evictions(timeout=60)
        # Reported once; the next result is read (none is lost), and fails to evict too.
        assert queues.get_result(timeout=60).value == 1000
        with pytest.raises(SteerQueueError, match='could not delete'):
            queues.wait_until_done(timeout=60)


def test_a_worker_does_not_keep_the_inputs_the_thinker_proxied(
    make_queues: Any,
    store: Any,
) -> None:
    queues = make_queues(keep_inputs=False, proxystore_name=store.name, proxystore_threshold=500)
    with serving(LocalTaskServer(queues, [_tasks.nbytes, _tasks.is_cached], num_workers=1)):
        queues.send_inputs(b'q' * 1000, method='nbytes')
        (_store, (proxy,)) = next(iter(queues._made_proxies.values()))
        assert queues.get_result(timeout=60).value == 1000
        # The same worker, asked about the input it resolved (the proxy, in a list, is
        # under the threshold: it travels inline as a user's proxy, unresolved).
        queues.send_inputs([proxy], method='is_cached')
        result = queues.get_result(timeout=60)
        assert result.success, result.failure_info
        assert result.value is False
        # A proxy the user made is cached as before.
        own = store.proxy(b'u' * 1000)
        queues.send_inputs(own, method='nbytes')
        assert queues.get_result(timeout=60).value == 1000
        queues.send_inputs([own], method='is_cached')
        assert queues.get_result(timeout=60).value is True


def test_threshold_compares_the_payload_and_never_proxies_none(store: Any) -> None:
    from tether.proxy import Proxy
    from tether.steer import _pack

    def proxied(value: Any, threshold: int) -> bool:
        packed = _pack.pack_inputs((value,), {}, store, threshold)
        return isinstance(packed.items[0], Proxy)

    # "Over 100 kB": the value's own bytes, not tether's framing header in front of them.
    assert not proxied(bytes(100_000), 100_000)
    assert proxied(bytes(100_001), 100_000)
    assert not proxied('x' * 100_000, 100_000)
    # None, bools, ... travel inline whatever the threshold (a proxy is never "is None").
    for value in (None, True, False, ..., NotImplemented):
        assert not proxied(value, 0)
    assert _pack.pack_value(None, store, 0).unpack() is None
    assert proxied(0, 0)


def test_the_evicting_thread_ends_when_idle_and_starts_again(monkeypatch: Any) -> None:
    import threading
    import uuid

    from tether.connectors.local import LocalConnector
    from tether.steer.queue import _evict
    from tether.store import Store, get_key

    monkeypatch.setattr(_evict, '_IDLE', 0.01)
    evictor = _evict.Evictor()
    with Store(f'evict-{uuid.uuid4().hex[:8]}', LocalConnector()) as store:
        for round_ in range(2):
            proxies = [store.proxy(b'x' * 10) for _ in range(3)]
            evictor.submit(store, proxies[:1])
            evictor.submit(store, proxies[1:])
            assert evictor.drain(timeout=60)
            assert not any(store.exists(get_key(p)) for p in proxies), round_
            # Idle: the thread ends (no thread is left behind) ...
            for t in threading.enumerate():
                if t.name == 'tether.steer.evict':
                    t.join(60)
            assert not evictor._running
            # ... and the next submit starts another.
