"""Task functions the engines' workers import (they must live in an importable module)."""

from __future__ import annotations

import os
import time
from typing import Any


def set_later(future: Any, value: Any, delay: float = 0.0) -> int:
    """Producer: sleep, then set the future's result; return this worker's pid."""
    time.sleep(delay)
    future.set_result(value)
    return os.getpid()


def consume(data: Any) -> Any:
    """Consumer: use the (proxied) input, return a plain copy and when it arrived."""
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
    time.sleep(3600)
    future.set_result('never')
