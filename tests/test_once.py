"""tether._once.create_once: made once under the lock, read without it afterwards."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tether._once import create_once


class _Owner:
    def __init__(self) -> None:
        self.value: list[int] | None = None


class _CountingLock:
    """A lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> None:
        self.lock.acquire()
        self.taken += 1

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()


def test_made_once_then_read_without_the_lock() -> None:
    owner, lock = _Owner(), _CountingLock()
    made: list[list[int]] = []

    def factory() -> list[int]:
        made.append([len(made)])
        return made[-1]

    first = create_once(owner, 'value', lock, factory)
    assert first is owner.value is made[0]
    assert lock.taken == 1
    assert create_once(owner, 'value', lock, factory) is first
    assert (len(made), lock.taken) == (1, 1)  # the fast path takes no lock
    owner.value = None  # reset: the next call makes it again
    assert create_once(owner, 'value', lock, factory) is made[1]


def test_threads_racing_get_the_same_object() -> None:
    owner, lock = _Owner(), threading.Lock()
    threads_n = 8
    barrier = threading.Barrier(threads_n)
    made: list[list[int]] = []
    got: list[Any] = []

    def factory() -> list[int]:
        made.append([1])
        return made[-1]

    def run() -> None:
        barrier.wait()
        got.append(create_once(owner, 'value', lock, factory))

    threads = [threading.Thread(target=run) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    assert len(got) == threads_n
    assert all(g is made[0] for g in got)


def test_factory_error_leaves_the_attribute_unset() -> None:
    owner = _Owner()

    def failing() -> list[int]:
        raise RuntimeError('no')

    with pytest.raises(RuntimeError, match='no'):
        create_once(owner, 'value', threading.Lock(), failing)
    assert owner.value is None
    assert create_once(owner, 'value', threading.Lock(), lambda: [2]) == [2]
