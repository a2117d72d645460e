"""tether.testing.wait_until: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import threading

import pytest

from tether.testing import wait_until


def test_returns_the_first_truthy_value() -> None:
    values = iter([0, None, '', [], 'ready', 'later'])
    assert wait_until(lambda: next(values), timeout=30, interval=0.001) == 'ready'


def test_a_condition_another_thread_brings() -> None:
    done = threading.Event()
    threading.Thread(target=done.set).start()
    assert wait_until(done.is_set, message='the thread') is True


def test_timeout_fails_with_the_message() -> None:
    calls = []

    def never() -> bool:
        calls.append(1)
        return False

    with pytest.raises(AssertionError, match=r'timed out after 0\.05 s waiting for the moon'):
        wait_until(never, timeout=0.05, interval=0.001, message='the moon')
    assert len(calls) >= 2  # polled, and called once more at the deadline


def test_zero_timeout_calls_the_predicate_once() -> None:
    assert wait_until(lambda: 7, timeout=0) == 7
    with pytest.raises(AssertionError, match='waiting for condition'):
        wait_until(lambda: False, timeout=0)


def test_ignored_errors_mean_not_yet_and_the_last_is_the_cause() -> None:
    attempts = iter([KeyError('a'), KeyError('b'), 'ok'])

    def flaky() -> str:
        value = next(attempts)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_until(flaky, interval=0.001, ignore=(KeyError,)) == 'ok'

    def missing() -> bool:
        raise KeyError('gone')

    with pytest.raises(AssertionError, match='last error: KeyError') as info:
        wait_until(missing, timeout=0.02, interval=0.001, ignore=(KeyError,))
    assert isinstance(info.value.__cause__, KeyError)


def test_other_errors_stop_the_wait_at_once() -> None:
    def dead() -> bool:
        raise RuntimeError('the child died')

    with pytest.raises(RuntimeError, match='the child died'):
        wait_until(dead, timeout=30, ignore=(KeyError,))


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match='interval'):
        wait_until(lambda: True, interval=0)
