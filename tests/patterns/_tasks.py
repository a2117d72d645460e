"""Task functions the engines' workers import (they must live in an importable module)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any


def set_later(future: Any, value: Any, after: Any = None) -> int:
    """Producer: set the future's result (once the future ``after``, if given, is set);
    return this worker's pid."""
    if after is not None:
        after.result(timeout=60)
    future.set_result(value)
    return os.getpid()


def consume(data: Any, started: Any = None) -> Any:
    """Consumer: say it started (sets the future ``started``, if given), use the
    (proxied) input, return a plain copy and when it arrived."""
    if started is not None:
        started.set_result(time.time())
    return (list(data) if isinstance(data, list) else data), time.time()


def wait_result(future: Any, timeout: float) -> Any:
    """Consumer of a future (not a proxy)."""
    return future.result(timeout=timeout)


def length(data: Any) -> int:
    return len(data)


def make_bytes(n: int) -> bytes:
    return b'x' * n


def make_list(n: int) -> list[int]:
    return list(range(n))


def type_name(obj: Any) -> str:
    return str(obj.__class__.__name__)


def append_and_update(ref: Any, value: Any) -> None:
    """Mutate through a mutable borrow and push the change to the store."""
    from tether.store.ref import update

    ref.append(value)
    update(ref)


def keep_owned(owned: Any) -> int:
    """Receive ownership, use it; the object is evicted when the task drops it."""
    return len(owned)


def sleep_forever_then_set(future: Any) -> None:
    threading.Event().wait()  # until killed
    future.set_result('never')
