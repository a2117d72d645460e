"""The replaceable clock: the system clock, and the fake clock tests drive by hand."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tether._clock import SYSTEM_CLOCK, Clock, SystemClock
from tether.testing import FakeClock


def test_both_clocks_implement_the_protocol() -> None:
    assert isinstance(SYSTEM_CLOCK, Clock)
    assert isinstance(FakeClock(), Clock)
    assert isinstance(SYSTEM_CLOCK, SystemClock)


def test_system_clock_wait_times_out() -> None:
    cond = threading.Condition()
    with cond:
        assert SYSTEM_CLOCK.wait(cond, 0) is False


def test_fake_clock_moves_only_when_advanced() -> None:
    clock = FakeClock(start=10.0, epoch=1000.0)
    assert clock.monotonic() == 10.0
    assert clock.time() == 1000.0
    clock.advance(2.5)
    assert clock.monotonic() == 12.5
    assert clock.time() == 1002.5
    with pytest.raises(ValueError, match='does not go back'):
        clock.advance(-1)


def test_fake_sleep_wakes_at_its_deadline() -> None:
    clock = FakeClock()
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep(5)
        woke.set()

    t = threading.Thread(target=sleeper)
    t.start()
    clock.wait_for_sleepers(1)
    clock.advance(4.9)
    clock.wait_for_sleepers(1)  # still asleep: its deadline has not come
    assert not woke.is_set()
    clock.advance(0.1)
    t.join(30)
    assert woke.is_set()


def test_fake_wait_reports_timeout_and_notify() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    results: list[bool] = []

    def waiter() -> None:
        with cond:
            results.append(clock.wait(cond, 1.0))

    t = threading.Thread(target=waiter)
    t.start()
    clock.wait_for_sleepers(1)
    clock.advance(1.0)
    t.join(30)
    assert results == [False]

    t = threading.Thread(target=waiter)
    t.start()
    clock.wait_for_sleepers(1)
    with cond:
        cond.notify_all()
    t.join(30)
    assert results == [False, True]


def test_fake_asleep_wakes_at_its_deadline() -> None:
    clock = FakeClock()
    done = threading.Event()

    async def main() -> None:
        await clock.asleep(3)
        done.set()

    t = threading.Thread(target=asyncio.run, args=(main(),))
    t.start()
    clock.wait_for_sleepers(1)
    clock.advance(1)
    clock.wait_for_sleepers(1)
    assert not done.is_set()
    clock.advance(2)
    t.join(30)
    assert done.is_set()


def test_wait_for_sleepers_times_out() -> None:
    with pytest.raises(TimeoutError, match='expected 1'):
        FakeClock().wait_for_sleepers(1, timeout=0)
