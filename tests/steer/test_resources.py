from __future__ import annotations

import threading

import pytest

from tether.exceptions import ConfigError
from tether.steer import ResourceCounter


def test_slots_start_unallocated_and_move() -> None:
    rec = ResourceCounter(4, ['sim', 'ml'])
    assert rec.unallocated_slots == 4
    assert rec.reallocate(None, 'sim', 3)
    assert rec.allocated_slots('sim') == 3
    assert rec.available_slots('sim') == 3
    assert rec.unallocated_slots == 1
    assert rec.acquire('sim', 2)
    assert rec.active_slots('sim') == 2
    assert rec.available_slots('sim') == 1
    rec.release('sim', 2)
    assert rec.available_slots('sim') == 3
    assert rec.reallocate('sim', 'ml', 'all')
    assert rec.allocated_slots('ml') == 3
    assert rec.task_types == ['sim', 'ml']


def test_acquire_times_out_and_cancels_without_taking() -> None:
    rec = ResourceCounter(1, ['sim'])
    assert not rec.acquire('sim', 1, timeout=0.01)
    cancel = threading.Event()
    cancel.set()
    assert not rec.acquire('sim', 1, cancel_if=cancel)
    assert not rec.acquire('sim', 1, cancel_if=lambda: True)
    assert rec.available_slots('sim') == 0


def test_blocked_acquire_wakes_on_release() -> None:
    rec = ResourceCounter(1, ['sim'])
    rec.reallocate(None, 'sim', 1)
    assert rec.acquire('sim', 1)
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(rec.acquire('sim', 1)))
    t.start()
    rec.release('sim', 1)
    t.join(30)
    assert got == [True]


def test_reallocate_waits_for_running_tasks() -> None:
    rec = ResourceCounter(2, ['sim', 'ml'])
    rec.reallocate(None, 'sim', 2)
    rec.acquire('sim', 2)
    assert not rec.reallocate('sim', 'ml', 1, timeout=0.01)
    rec.release('sim', 1)
    assert rec.reallocate('sim', 'ml', 1)
    assert (rec.allocated_slots('sim'), rec.allocated_slots('ml')) == (1, 1)


def test_bad_use_is_a_clear_error() -> None:
    rec = ResourceCounter(2, ['sim'])
    with pytest.raises(ConfigError, match='unknown task pool'):
        rec.acquire('nope', 1)
    with pytest.raises(ConfigError, match='exceeds its allocation'):
        rec.release('sim', 1)
    with pytest.raises(ConfigError, match='cannot move'):
        rec.reallocate(None, 'sim', 5)
    with pytest.raises(ConfigError):
        ResourceCounter(2, 'sim')
