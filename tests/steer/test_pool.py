"""The local task server's worker pool on its own: hand-offs, lost workers, no workers."""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import queue
from collections.abc import Iterator
from typing import Any

from tests.steer import _tasks
from tether.steer.models import Result
from tether.steer.task_server._pool import WorkerPool

METHODS = {'add': _tasks.add, 'die_always': _tasks.die_always}


def _task(*args: Any) -> Result:
    return Result(inputs=(args, {}))


@contextlib.contextmanager
def _pool(size: int) -> Iterator[WorkerPool]:
    pool = WorkerPool(size, METHODS)
    try:
        yield pool
    finally:
        pool.shutdown()


def _run(pool: WorkerPool, name: str, *args: Any) -> Result:
    done: queue.Queue[Result] = queue.Queue()
    pool.submit(name, _task(*args), done.put)
    return done.get(timeout=60)


def test_a_failing_hand_off_does_not_stop_the_worker() -> None:
    def broken(result: Result) -> None:
        raise RuntimeError('the caller failed')

    with _pool(1) as pool:
        pool.submit('add', _task(1, 2), broken)
        # The one worker and its reader carry on.
        assert _run(pool, 'add', 2, 3).value.unpack() == 5


def test_no_worker_left_fails_tasks_instead_of_queueing_them() -> None:
    def cannot_fork() -> None:
        raise OSError('fork failed')

    with _pool(1) as pool:
        pool._start_worker = cannot_fork  # type: ignore[method-assign]
        lost = _run(pool, 'die_always')
        after = _run(pool, 'add', 2, 3)
    assert not lost.success
    assert 'WorkerLost' in lost.failure_info.exception
    assert not after.success
    assert 'no worker to run on' in after.failure_info.exception


def _shutdown_exit_codes() -> tuple[int, list[int | None]]:
    """Run a task on a fresh pool, shut it down; the task's value and each exit code."""
    pool = WorkerPool(2, METHODS)
    processes = [w.process for w in pool._workers]
    value = _run(pool, 'add', 1, 1).value.unpack()
    pool.shutdown()
    return value, [p.exitcode for p in processes]


def test_shutdown_stops_every_worker() -> None:
    # In a fresh interpreter, as a task server builds its pool in a new process: forked
    # straight from this one, with the threads earlier tests left, a worker could inherit
    # a lock (of stderr, say) that a thread held at that instant.
    ctx = multiprocessing.get_context('spawn')
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as runner:
        value, codes = runner.submit(_shutdown_exit_codes).result(timeout=120)
    assert value == 2
    assert codes == [0, 0]


def test_a_task_the_worker_cannot_read_fails_with_the_reason() -> None:
    with _pool(1) as pool:
        # A method the worker does not have (the task server checks names first; the
        # worker still answers rather than dying).
        unknown = _run(pool, 'rm_rf')
        after = _run(pool, 'add', 2, 3)
    assert not unknown.success
    assert 'could not read its task' in unknown.failure_info.exception
    assert "KeyError('rm_rf')" in unknown.failure_info.exception
    assert after.value.unpack() == 5
