"""Task servers: retries, lost workers, proxies over the threshold, on a pool and on Parsl."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.parsl_env import parsl_environment
from tests.steer import _tasks
from tether.proxy import Proxy, is_resolved
from tether.steer import LocalTaskServer, ParslTaskServer, PipeQueues, RedisQueues
from tether.store.utils import get_key
from tether.testing.steer import serving

METHODS = [
    _tasks.add,
    _tasks.echo,
    _tasks.nbytes,
    _tasks.make_bytes,
    _tasks.fail_once,
    _tasks.die_once,
    _tasks.die_always,
    _tasks.is_proxy_resolving,
]


def _htex_config(run_dir: pathlib.Path) -> Any:
    from tether.plugins.parsl import local_config

    return local_config(
        workers=2,
        run_dir=str(run_dir),
        heartbeat_period=1,
        heartbeat_threshold=4,
        initialize_logging=True,
    )


@contextlib.contextmanager
def task_server(kind: str, queues: Any) -> Iterator[Any]:
    if kind == 'local':
        with serving(LocalTaskServer(queues, METHODS, num_workers=2)) as server:
            yield server
        return
    with (
        parsl_environment('tether-steer-') as run_dir,
        serving(ParslTaskServer(METHODS, queues, _htex_config(run_dir))) as server,
    ):
        yield server


KINDS = ['local', pytest.param('parsl', marks=pytest.mark.slow)]


def _check_retries(queues: Any, tmp_path: pathlib.Path) -> None:
    queues.send_inputs(str(tmp_path / 'a'), method='fail_once', max_retries=1)
    ok = queues.get_result(timeout=100)
    queues.send_inputs(str(tmp_path / 'b'), method='fail_once')
    failed = queues.get_result(timeout=100)
    queues.send_inputs(1, method='rm_rf')
    unknown = queues.get_result(timeout=100)
    assert ok.success, ok.failure_info
    assert ok.value == 'second attempt'
    assert ok.retries == 1
    assert failed.success is False
    assert failed.retries == 0
    assert 'first attempt fails' in failed.failure_info.exception
    assert unknown.success is False
    assert 'unknown method' in unknown.failure_info.exception


def _check_worker_lost(queues: Any, server: Any, tmp_path: pathlib.Path) -> None:
    queues.send_inputs(str(tmp_path / 'm'), method='die_once', max_retries=2)
    survived = queues.get_result(timeout=100)
    queues.send_inputs(method='die_always', max_retries=1)
    lost = queues.get_result(timeout=100)
    # The server still runs tasks afterwards.
    queues.send_inputs(2, 3, method='add')
    after = queues.get_result(timeout=100)
    assert server.is_alive()
    assert survived.success, survived.failure_info
    assert survived.value == 'survived'
    assert survived.retries >= 1
    assert lost.success is False
    assert lost.retries == 1
    assert lost.failure_info is not None
    assert 'Lost' in lost.failure_info.exception, lost.failure_info.exception
    assert after.value == 5


def test_failed_task_is_retried(tmp_path: pathlib.Path) -> None:
    queues = PipeQueues()
    with task_server('local', queues):
        _check_retries(queues, tmp_path)


def test_worker_killed_mid_task(tmp_path: pathlib.Path) -> None:
    queues = PipeQueues()
    with task_server('local', queues) as server:
        _check_worker_lost(queues, server, tmp_path)


def test_a_dead_worker_is_replaced_and_its_siblings_go_on(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / 'release'
    queues = PipeQueues()
    with serving(LocalTaskServer(queues, [_tasks.wait_for, _tasks.die_always, _tasks.add], 2)):
        queues.send_inputs(str(marker), method='wait_for')  # holds one worker
        queues.send_inputs(method='die_always')  # kills the other
        lost = queues.get_result(timeout=100)
        # Runs on the replacement: the first worker is still busy.
        queues.send_inputs(2, 3, method='add')
        after = queues.get_result(timeout=100)
        marker.write_text('go')
        held = queues.get_result(timeout=100)
    assert lost.method == 'die_always'
    assert not lost.success
    assert 'WorkerLost' in lost.failure_info.exception
    assert after.value == 5
    assert held.method == 'wait_for'
    assert held.success, held.failure_info
    assert held.value == 'released'


def test_tasks_wait_for_a_free_worker() -> None:
    queues = PipeQueues()
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
        for i in range(20):
            queues.send_inputs(i, 1, method='add')
        values = sorted(queues.get_result(timeout=100).value for _ in range(20))
    assert values == [i + 1 for i in range(20)]


def _running(pid: int) -> bool:
    try:
        status = pathlib.Path(f'/proc/{pid}/status').read_text()
    except FileNotFoundError:
        return False
    return 'zombie' not in status


def test_workers_exit_when_the_task_server_is_killed() -> None:
    import os
    import signal
    import time

    queues = PipeQueues()
    server = LocalTaskServer(queues, [_tasks.pid, _tasks.wait_for], num_workers=2)
    with serving(server):
        for _ in range(2):
            queues.send_inputs(method='pid')
        pids = {queues.get_result(timeout=100).value for _ in range(2)}
        assert all(_running(p) for p in pids)
        os.kill(server.pid, signal.SIGKILL)
        server.join(30)
        for _ in range(3000):
            if not any(_running(p) for p in pids):
                break
            time.sleep(0.01)
    assert not any(_running(p) for p in pids), 'orphaned workers still run'


@pytest.mark.slow
def test_parsl_retries_and_lost_workers(tmp_path: pathlib.Path) -> None:
    queues = PipeQueues()
    with task_server('parsl', queues) as server:
        _check_retries(queues, tmp_path)
        _check_worker_lost(queues, server, tmp_path)


@pytest.fixture
def redis_queues(store: Any) -> Callable[..., Any]:
    from tests.conftest import REDIS_HOST, REDIS_PORT

    made: list[Any] = []

    def make(**kwargs: Any) -> Any:
        import uuid

        q = RedisQueues(
            hostname=REDIS_HOST,
            port=REDIS_PORT,
            prefix=f'steer-test-{uuid.uuid4().hex}',
            **kwargs,
        )
        made.append(q)
        return q

    yield make
    for q in made:
        q.flush()
        q.close()


@pytest.mark.parametrize('kind', KINDS)
def test_over_threshold_travels_by_proxy(
    kind: str,
    store: Any,
    redis_queues: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tether.steer import _pack

    calls: list[int] = []
    real = _pack.serialize_parts

    def counting(obj: Any) -> Any:
        calls.append(1)
        return real(obj)

    monkeypatch.setattr(_pack, 'serialize_parts', counting)
    proxied_store_calls: list[int] = []
    real_proxy_serialized = store.proxy_serialized
    monkeypatch.setattr(
        store,
        'proxy_serialized',
        lambda *a, **k: proxied_store_calls.append(1) or real_proxy_serialized(*a, **k),
    )
    monkeypatch.setattr(store, 'serialize', _forbidden)

    big = b'b' * 1_000_000
    queues = redis_queues(
        topics=['big', 'small'],
        proxystore_name={'big': store.name, 'small': None},
        proxystore_threshold={'big': 10_000, 'small': None},
    )
    with task_server(kind, queues):
        queues.send_inputs(big, method='nbytes', topic='big')
        by_proxy = queues.get_result('big', timeout=100)
        queues.send_inputs(2_000_000, method='make_bytes', topic='big')
        value_proxy = queues.get_result('big', timeout=100)
        queues.send_inputs(b's' * 100, method='nbytes', topic='big')
        under = queues.get_result('big', timeout=100)
        queues.send_inputs(big, method='nbytes', topic='small')
        inline = queues.get_result('small', timeout=100)
        queues.send_inputs(big, method='is_proxy_resolving', topic='big')
        resolving = queues.get_result('big', timeout=100)

    # Each input and value was serialized once; the big one went to the store as is.
    assert len(calls) == 5  # the five inputs sent here (values are packed on workers)
    assert len(proxied_store_calls) == 2  # the two big inputs (big values: on workers)
    # The big input travelled by reference: the task server saw a small message.
    assert by_proxy.value == 1_000_000
    assert by_proxy.message_sizes['inputs'] < 10_000
    # Timings by proxy key, as Colmena's: stored by the Thinker, fetched by the worker.
    times = by_proxy.time.proxy[str(get_key(by_proxy.args[0]))]['times']
    assert times['store.proxy']['count'] == 1
    assert times['store.proxy']['seconds'] > 0
    assert times['resolve_async']['count'] == 1
    assert isinstance(by_proxy.args[0], Proxy)
    # A big result also came back by reference, and resolves on the Thinker.
    assert value_proxy.message_sizes['value'] < 10_000
    assert type(value_proxy.value) is not bytes
    assert not is_resolved(value_proxy.value)
    assert value_proxy.value == b'x' * 2_000_000
    # Under the threshold, or on a topic without a store: inline.
    assert under.value == 100
    assert under.message_sizes['inputs'] < 10_000
    assert inline.value == 1_000_000
    assert inline.message_sizes['inputs'] > 1_000_000
    # Proxied inputs were already resolving when the task started.
    assert resolving.value is True


def _forbidden(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError('a value was serialized a second time')


def test_a_server_that_cannot_start_stops_the_thinker(tmp_path: pathlib.Path) -> None:
    from tether.exceptions import KillSignalError
    from tether.steer import BaseThinker, Result, result_processor

    class Waits(BaseThinker):
        @result_processor
        def results(self, result: Result) -> None:
            pass

    queues = PipeQueues()
    # A Parsl config whose run directory cannot be created: the executor never starts.
    (tmp_path / 'file').write_text('')
    bad = ParslTaskServer(METHODS, queues, _htex_config(tmp_path / 'file' / 'run'))
    with serving(bad):
        bad.join(120)
        assert bad.exitcode not in (0, None)
        with pytest.raises(KillSignalError):
            queues.get_result(timeout=60)
    thinker = Waits(queues)
    queues.send_inputs(1, method='add')
    bad.queues.send_kill_to_thinker()
    thinker.run()
    assert thinker.error is None


def test_forked_task_server_after_background_resolves_in_the_parent(
    store: Any,
    redis_queues: Callable[..., Any],
) -> None:
    """The parent resolved a proxy in the background before forking the task server.

    Its resolve thread pool then had an idle thread; a forked child inherited the pool
    without the thread, never started one, and every proxied input hung on the worker
    (the hang that once kept tests/steer in a pytest process of its own).
    """
    from tether.proxy import extract, resolve_async

    warm: Proxy[int] = Proxy(lambda: 1)
    resolve_async(warm)
    assert extract(warm) == 1
    queues = redis_queues(proxystore_name=store.name, proxystore_threshold=10)
    with task_server('local', queues):
        queues.send_inputs(b'p' * 1000, method='nbytes')
        result = queues.get_result(timeout=60)
    assert result.success, result.failure_info
    assert result.value == 1000


def test_parsl_apps_get_and_return_one_pickle() -> None:
    """A request crosses Parsl as bytes, with the method bound in the app's function.

    Parsl serializes an app's arguments and return value with dill, a pure-Python
    pickler: a ``Result`` (or a method defined in ``__main__``) passed as an argument was
    walked by it on every task, each way. And its executor, logging at DEBUG (Parsl's
    default), takes the ``repr`` of every argument in full: the bytes are wrapped in an
    object whose ``repr`` is short.
    """
    import concurrent.futures
    import pickle

    from tether.steer import Result
    from tether.steer.task_server.parsl import _MethodTask

    queues = PipeQueues()
    queues.send_inputs(b'x' * 1000, method='echo')
    _, request = queues.get_task(timeout=10)
    server = ParslTaskServer(METHODS, queues, config=None)
    handed: list[tuple[Any, ...]] = []

    def app(*args: Any) -> concurrent.futures.Future[Any]:
        handed.append(args)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(_MethodTask(_tasks.echo)(*args))
        return future

    server._apps = {'echo': app}
    done: list[Result] = []
    server.submit_task(_tasks.echo, request, done.append)

    assert len(handed) == 1
    assert len(handed[0]) == 1
    (message,) = handed[0]
    assert type(message.message) is bytes
    assert pickle.loads(message.message).task_id == request.task_id
    assert len(repr(message)) < 100
    # What Parsl's dill makes of it on the way to the worker.
    assert type(pickle.loads(pickle.dumps(message)).message) is bytes
    assert len(done) == 1
    assert done[0].success, done[0].failure_info
    assert done[0].task_id == request.task_id
    queues.send_result(done[0])
    assert queues.get_result(timeout=10).value == b'x' * 1000


def test_parsl_method_task_is_named_after_its_method() -> None:
    from tether.steer.task_server.parsl import _MethodTask

    task = _MethodTask(_tasks.add)
    assert task.__name__ == 'add'
    assert task.method is _tasks.add
