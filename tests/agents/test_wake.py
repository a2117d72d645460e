"""Threads waiting in ActionFuture.result() sleep on a pipe of their own (agents._wake)."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from typing import Any

import pytest

from tether.agents._wake import thread_waker
from tether.agents.handle import ActionFuture
from tether.exceptions import ActionTimeoutError


class _Mailbox:
    def __init__(self) -> None:
        self.cancelled: list[int] = []

    def _cancelled(self, future: ActionFuture[Any]) -> None:
        self.cancelled.append(future.tag)


def _future(tag: int = 1) -> ActionFuture[Any]:
    return ActionFuture(_Mailbox(), 'agent-x', tag, 'act')  # type: ignore[arg-type]


def _later(future: ActionFuture[Any], fn: Any, *args: Any, waiters: int = 1) -> threading.Thread:
    """Call ``fn(*args)`` in a thread once ``waiters`` threads wait for ``future``."""

    def run() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # Asleep in result(): on a pipe (_wakers), or the usual way (_waiters).
            if len(future._wakers) + len(future._waiters) >= waiters:
                break
            time.sleep(0.001)
        fn(*args)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize('timeout', [None, 30.0])
def test_a_result_set_by_another_thread_wakes_the_caller(timeout: float | None) -> None:
    future = _future()
    thread = _later(future, future.set_result, 42)
    assert future.result(timeout) == 42
    thread.join()
    assert future._wakers == []
    failed = _future()
    thread = _later(failed, failed.set_exception, ValueError('no'))
    with pytest.raises(ValueError, match='no'):
        failed.result(30)
    thread.join()


def test_a_cancel_from_another_thread_wakes_the_caller() -> None:
    future = _future()
    thread = _later(future, future.cancel)
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(30)
    thread.join()
    assert future._mailbox.cancelled == [1]  # type: ignore[attr-defined]


def test_an_old_wake_up_does_not_end_a_later_wait() -> None:
    thread_waker().wake()  # meant for an earlier wait of this thread
    future = _future()
    with pytest.raises(ActionTimeoutError):
        future.result(0.2)
    assert future.cancelled()
    assert future._wakers == []


def test_many_threads_wait_for_one_future_and_futures_helpers_still_work() -> None:
    future = _future()
    results: list[Any] = []
    waiters = [
        threading.Thread(target=lambda: results.append(future.result(30))) for _ in range(4)
    ]
    for waiter in waiters:
        waiter.start()
    others = [_future(n) for n in range(2, 5)]
    setter = _later(future, lambda: [f.set_result(f.tag) for f in [future, *others]], waiters=4)
    done, _ = concurrent.futures.wait(others, timeout=30)
    assert sorted(f.result() for f in done) == [2, 3, 4]
    for waiter in [*waiters, setter]:
        waiter.join()
    assert results == [1] * 4


def test_a_forked_child_waits_on_a_pipe_of_its_own() -> None:
    parent = thread_waker()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            child = thread_waker()
            ok = child is not parent and child.pid == os.getpid() != parent.pid
            os.write(w, b'1' if ok else b'0')
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b'1'
    os.close(r)
    os.waitpid(pid, 0)
    assert thread_waker() is parent


def test_without_a_free_file_descriptor_a_caller_waits_the_usual_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tether.agents._wake as wake

    def no_pipe() -> tuple[int, int]:
        raise OSError(24, 'Too many open files')

    monkeypatch.setattr(wake, '_local', threading.local())
    monkeypatch.setattr(os, 'pipe', no_pipe)
    future = _future()
    thread = _later(future, future.set_result, 'ok')
    assert future.result(30) == 'ok'
    thread.join()
    with pytest.raises(ActionTimeoutError):
        _future().result(0.05)
