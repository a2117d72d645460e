"""tether.testing.threads: hammer code from many threads and report what failed."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest

from tether.exceptions import HammerError, HarnessError, TetherError
from tether.testing import HammerReport, hammer, hammer_object


def test_every_call_runs_once() -> None:
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(thread: int, call: int) -> None:
        with lock:
            seen.append((thread, call))

    report = hammer(work, threads=5, calls=7)
    assert report.ok
    assert report.completed == 35
    assert sorted(seen) == [(t, c) for t in range(5) for c in range(7)]
    assert '0 of 35 calls' in str(report)


def test_threads_really_run_at_once() -> None:
    # Every thread must be inside its first call at the same moment to pass this barrier.
    inside = threading.Barrier(6)

    def work(thread: int, call: int) -> None:
        if call == 0:
            inside.wait(timeout=20)

    hammer(work, threads=6, calls=2)


def test_failures_are_reported_with_thread_call_and_traceback() -> None:
    def work(thread: int, call: int) -> None:
        if thread == 2 and call in (3, 4):
            raise KeyError(f'boom {call}')

    with pytest.raises(HammerError, match=r'2 of 40 calls from 4 threads failed') as info:
        hammer(work, threads=4, calls=10)
    error = info.value
    assert isinstance(error, AssertionError)  # pytest shows it as a failed assertion
    assert isinstance(error, HarnessError)
    assert isinstance(error, TetherError)
    assert isinstance(error.__cause__, KeyError)
    report = error.report
    assert isinstance(report, HammerReport)
    assert not report.ok
    assert report.completed == 40  # a thread goes on after a failure
    assert [(f.thread, f.call) for f in report.failures] == [(2, 3), (2, 4)]
    assert 'boom 3' in report.failures[0].traceback
    assert 'thread 2, call 3' in str(error)


def test_check_false_returns_the_report() -> None:
    def work(thread: int, call: int) -> None:
        raise ValueError('always')

    report = hammer(work, threads=2, calls=20, check=False)
    assert len(report.failures) == 40
    assert '... and 37 more failures' in str(report)
    with pytest.raises(HammerError):
        report.check()


def test_a_hung_thread_is_reported_not_waited_for() -> None:
    release = threading.Event()

    def work(thread: int, call: int) -> None:
        if thread == 1:
            release.wait(30)

    try:
        # The other threads' 4 calls take microseconds: 2 s is ample, and the test
        # waits that long (not 5 s).
        report = hammer(work, threads=3, calls=4, timeout=2, check=False)
    finally:
        release.set()
    assert report.hung == [1]
    assert not report.ok
    assert 'hung' in str(report)
    assert report.seconds < 30  # returned at the timeout, not when the thread finished


def test_hammer_object_mixes_operations() -> None:
    counts = {'a': 0, 'b': 0, 'c': 0}
    lock = threading.Lock()

    def op(name: str) -> Any:
        def run(target: dict[str, int]) -> None:
            with lock:
                target[name] += 1

        return run

    report = hammer_object(counts, [op('a'), op('b'), op('c')], threads=3, calls=6)
    assert report.ok
    assert counts == {'a': 6, 'b': 6, 'c': 6}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match='at least one thread'):
        hammer(lambda t, c: None, threads=0)
    with pytest.raises(ValueError, match='at least one thread'):
        hammer(lambda t, c: None, calls=0)
    with pytest.raises(TypeError, match='callable'):
        hammer(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='at least one operation'):
        hammer_object(object(), [])


def test_error_pickles_with_its_report() -> None:
    report = hammer(lambda t, c: 1 / 0, threads=1, calls=1, check=False)
    error = pickle.loads(pickle.dumps(HammerError(report)))
    assert isinstance(error.report, HammerReport)
    assert str(error) == str(report)
