"""The threads that run synchronous actions (tether.agents._pool)."""

from __future__ import annotations

import threading

import pytest

from tether.agents._pool import Workers


def test_calls_run_in_at_most_limit_threads_and_the_rest_wait() -> None:
    workers = Workers(2, 'test-pool')
    release = threading.Event()
    lock = threading.Lock()
    running: list[int] = []
    most = [0]
    done: list[int] = []

    def call(n: int) -> None:
        with lock:
            running.append(n)
            most[0] = max(most[0], len(running))
        release.wait(10)
        with lock:
            running.remove(n)
            done.append(n)

    for n in range(6):
        workers.submit(call, n)
    for _ in range(1000):  # until both threads hold a call
        with lock:
            if len(running) == 2:
                break
        threading.Event().wait(0.01)
    release.set()
    workers.shutdown()  # waiting calls run first
    assert sorted(done) == list(range(6))
    assert most[0] == 2
    assert len(workers._threads) == 2
    with pytest.raises(RuntimeError, match='shut down'):
        workers.submit(call, 7)


def test_a_parked_thread_takes_the_next_call_and_failures_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    workers = Workers(4, 'test-pool')
    seen: list[str] = []
    finished = threading.Event()

    def fail(_: object) -> None:
        raise ValueError('boom')

    def note(_: object) -> None:
        seen.append(threading.current_thread().name)
        finished.set()

    workers.submit(fail, None)
    for _ in range(100):  # until the thread parked itself
        with workers._lock:
            if workers._parked:
                break
        threading.Event().wait(0.01)
    workers.submit(note, None)
    assert finished.wait(10)
    workers.shutdown()
    assert seen == ['test-pool_0']  # the same thread, woken through its pipe
    assert 'an action thread failed' in caplog.text
    assert not workers._parked
    assert all(not t.is_alive() for t in workers._threads)


def test_without_a_free_file_descriptor_threads_wait_on_a_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, 'Too many open files')

    monkeypatch.setattr(os, 'pipe', no_pipe)
    workers = Workers(1, 'test-pool')
    done: list[int] = []
    finished = threading.Event()

    def call(n: int) -> None:
        done.append(n)
        if n == 1:
            finished.set()

    workers.submit(call, 0)
    for _ in range(1000):  # until the thread parked itself (on its lock)
        with workers._lock:
            if workers._parked:
                break
        threading.Event().wait(0.01)
    workers.submit(call, 1)
    assert finished.wait(10)
    workers.shutdown()
    assert done == [0, 1]
    assert all(not t.is_alive() for t in workers._threads)
