"""The engine: task futures, dependencies (also across engines), records, failures."""

from __future__ import annotations

import concurrent.futures
import operator
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.bench._helpers import check_records
from tether.bench.engine import Engine, TaskFuture, as_completed, wait
from tether.bench.executor.future_dependency import FutureDependencyExecutor, find_futures
from tether.bench.record import JSONRecordLogger, read_records
from tether.exceptions import TaskDependencyError, TaskExecutionFailed


def add(*values: int) -> int:
    return sum(values)


def total(items: list[int], extra: dict[str, int]) -> int:
    return sum(items) + sum(extra.values())


def fail(message: str) -> None:
    raise ValueError(message)


def test_submit_map_and_dependencies(tmp_path: pathlib.Path) -> None:
    records = tmp_path / 'tasks.jsonl'
    with Engine(
        concurrent.futures.ThreadPoolExecutor(2),
        record_logger=JSONRecordLogger(records),
    ) as engine:
        a = engine.submit(add, 1, 2)
        b = engine.submit(add, a, 10)
        c = engine.submit(total, [a, b, 5], {'x': b})
        futures = engine.map_futures(add, [1, 2, 3], [10, 20, 30])
        assert all(isinstance(f, TaskFuture) for f in futures)
        assert [f.result() for f in futures] == [11, 22, 33]
        assert c.result() == 3 + 13 + 5 + 13
        assert set(c.parent_task_ids) == {a.task_id, b.task_id}
        assert b.parent_task_ids == [a.task_id]
        assert engine.stats().completed == 6
    rows = check_records(records)
    assert len(rows) == 6
    assert {r['function_name'] for r in rows} == {'add', 'total'}


def test_process_pool_executor_is_wrapped(process_pool: Any, tmp_path: pathlib.Path) -> None:
    from tests.bench.conftest import Borrowed

    records = tmp_path / 'tasks.jsonl'
    with Engine(Borrowed(process_pool), record_logger=JSONRecordLogger(records)) as engine:
        a = engine.submit(add, 1, 2)
        assert engine.submit(operator.mul, a, a).result() == 9
    rows = check_records(records)
    assert len({r['execution']['pid'] for r in rows} - {0}) >= 1


def test_as_completed_wait_and_dependencies_across_engines(process_pool: Any) -> None:
    from tests.bench.conftest import Borrowed

    with (
        Engine(concurrent.futures.ThreadPoolExecutor(2)) as threads,
        Engine(Borrowed(process_pool)) as processes,
    ):
        a = threads.submit(add, 1, 1)
        b = processes.submit(add, 2, 2)
        c = processes.submit(add, a, b)  # a thread-pool future into the process pool
        d = threads.submit(add, [c][0], 1)
        assert sorted(f.result() for f in as_completed([a, b, c, d], timeout=60)) == [2, 4, 6, 7]
        done, not_done = wait([a, b, c, d], timeout=60)
        assert len(done) == 4
        assert not not_done
        assert set(c.parent_task_ids) == {a.task_id, b.task_id}


def test_failed_task_record_carries_exception(tmp_path: pathlib.Path) -> None:
    records = tmp_path / 'tasks.jsonl'
    with Engine(
        concurrent.futures.ThreadPoolExecutor(2),
        record_logger=JSONRecordLogger(records),
    ) as engine:
        bad = engine.submit(fail, 'broken on purpose')
        child = engine.submit(add, bad, 1)
        with pytest.raises(ValueError, match='broken on purpose'):
            bad.result()
        with pytest.raises(TaskDependencyError, match='broken on purpose') as info:
            child.result()
        assert info.value.task_id == bad.task_id
        assert isinstance(info.value.__cause__, ValueError)
        assert 'broken on purpose' in (bad.exception_traceback() or '')
    rows = {r['task_id']: r for r in read_records(records)}
    failed = rows[bad.task_id]
    assert failed['success'] is False
    assert failed['exception']['type'] == 'ValueError'
    assert 'raise ValueError(message)' in failed['exception']['traceback']
    assert failed['execution']['execution_start_time'] > 0
    dependent = rows[child.task_id]
    assert dependent['success'] is False
    assert dependent['exception']['type'] == 'TaskDependencyError'
    assert dependent['execution'] is None  # it never ran


def test_dependency_resolution_does_not_block_the_client() -> None:
    gate = threading.Event()
    with Engine(concurrent.futures.ThreadPoolExecutor(2)) as engine:
        slow = engine.submit(gate.wait, 30)
        start = time.perf_counter()
        child = engine.submit(lambda ok: ok, slow)
        submitted_in = time.perf_counter() - start
        assert not child.done()
        assert engine.stats().waiting == 1
        gate.set()
        assert child.result(timeout=30) is True
    # Not a timing assertion on performance: submit returned while the parent still ran.
    assert submitted_in < 25


def test_cancel_a_waiting_task() -> None:
    gate = threading.Event()
    with Engine(concurrent.futures.ThreadPoolExecutor(1)) as engine:
        slow = engine.submit(gate.wait, 30)
        child = engine.submit(add, slow, 1)
        assert child.cancel()
        gate.set()
        done, _ = wait([child, slow], timeout=30)
        assert child in done
        assert child.cancelled()


def test_shutdown_and_bad_arguments() -> None:
    engine = Engine(concurrent.futures.ThreadPoolExecutor(1))
    engine.shutdown()
    with pytest.raises(RuntimeError, match='shut down'):
        engine.submit(add, 1)
    with pytest.raises(ValueError, match='needs a transformer'):
        Engine(concurrent.futures.ThreadPoolExecutor(1), filter_=lambda obj: True)


def test_future_dependency_executor_alone() -> None:
    with FutureDependencyExecutor(concurrent.futures.ThreadPoolExecutor(2)) as executor:
        a = executor.submit(add, 1, 2)
        b = executor.submit(add, a, {'k': a}['k'])
        assert b.result(timeout=30) == 6
        assert find_futures(([a], {'x': (b,)})) == [a, b]
        bad = executor.submit(fail, 'x')
        with pytest.raises(TaskDependencyError):
            executor.submit(add, bad).result(timeout=30)
    with pytest.raises(RuntimeError):
        executor.submit(add, 1)


class WeakFutures(concurrent.futures.Executor):
    """Completes the futures it returns through weak references (as Ray's executor does)."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        import weakref

        outer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        outer.set_running_or_notify_cancel()
        ref = weakref.ref(outer)

        def done(inner: concurrent.futures.Future[Any]) -> None:
            future = ref()
            if future is not None:
                future.set_result(inner.result())

        self.pool.submit(fn, *args, **kwargs).add_done_callback(done)
        return outer

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait=wait)


def wait_for(event: threading.Event, value: int) -> int:
    assert event.wait(60)
    return value


def test_weakly_held_executor_futures_complete_dependent_tasks() -> None:
    # The futures of dependent tasks were held only by the executor's weak reference, so
    # they were collected before the task finished and the task never completed.
    import gc

    release = threading.Event()
    with Engine(WeakFutures()) as engine:
        a = engine.submit(add, 1, 2)
        assert a.result(timeout=60) == 3
        b = engine.submit(wait_for, release, a)
        c = engine.submit(add, b, 1)
        while engine.stats().waiting > 1:  # b was handed to the executor
            time.sleep(0.01)
        gc.collect()
        release.set()
        assert c.result(timeout=60) == 4


@pytest.mark.parametrize('name', ['thread-pool', 'process-pool', 'dask', 'parsl', 'ray', 'faas'])
def test_dependencies_on_each_executor(
    name: str,
    make_executor: Callable[[str], concurrent.futures.Executor],
    tmp_path: pathlib.Path,
) -> None:
    records = tmp_path / 'tasks.jsonl'
    with Engine(make_executor(name), record_logger=JSONRecordLogger(records)) as engine:
        a = engine.submit(add, 1, 2)
        b = engine.submit(add, a, 3)
        c = engine.submit(add, *[a, b])
        bad = engine.submit(operator.truediv, 1, 0)
        after_bad = engine.submit(add, bad, 1)
        assert c.result(timeout=60) == 9
        # The function service sends remote exceptions as text (TaskExecutionFailed).
        error = TaskExecutionFailed if name == 'faas' else ZeroDivisionError
        with pytest.raises(error, match='division'):
            bad.result(timeout=60)
        # Dask passes the parent's own error on; the others raise TaskDependencyError.
        with pytest.raises((TaskDependencyError, ZeroDivisionError)):
            after_bad.result(timeout=60)
    rows = {r['task_id']: r for r in read_records(records)}
    # Ray names its wrapper of the error 'RayTaskError(ZeroDivisionError)'.
    assert error.__name__ in rows[bad.task_id]['exception']['type']
    assert 'ZeroDivisionError' in rows[bad.task_id]['exception']['traceback']
    ok = [r for r in rows.values() if r['success']]
    assert len(ok) == 3
    assert rows[c.task_id]['parent_task_ids'] == [a.task_id, b.task_id]
    assert (
        rows[a.task_id]['execution']['execution_end_time']
        <= rows[b.task_id]['execution']['execution_start_time']
    )
