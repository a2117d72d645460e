"""Poll until a condition holds or a deadline passes (public as ``tether.testing.wait_until``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ['wait_until']

T = TypeVar('T')


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.01,
    message: str = 'condition',
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that value.

    Polls every ``interval`` seconds. When ``timeout`` seconds pass first, raises
    :class:`AssertionError` (a test failure) ``timed out after <timeout> s waiting for
    <message>``. An exception of a type in ``ignore`` raised by ``predicate`` counts as
    "not yet"; the last one is chained to the timeout error as its cause. Any other
    exception propagates at once (a predicate may raise to stop waiting on a condition
    that can no longer come, such as a child process that died).

    The predicate is always called at least once, and once more after the deadline, so a
    condition that comes true at the last moment is not reported as a timeout.
    """
    if interval <= 0:
        raise ValueError(f'interval must be positive, got {interval!r}')
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        late = time.monotonic() >= deadline
        try:
            value = predicate()
        except ignore as e:
            last = e
        else:
            if value:
                return value
        if late:
            raise AssertionError(
                f'timed out after {timeout:g} s waiting for {message}'
                + ('' if last is None else f' (last error: {last!r})')
            ) from last
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))
