"""Functions the tests run on endpoints (module level: workers import them by name)."""

from __future__ import annotations

import os
import time
from typing import Any


def square(x: int) -> int:
    return x * x


def add(a: int, b: int = 0) -> int:
    return a + b


def noop() -> None:
    return None


def sleep_then(seconds: float, value: Any) -> Any:
    time.sleep(seconds)
    return value


def fail(message: str) -> None:
    raise ValueError(message)


def pid() -> int:
    return os.getpid()


def die_unless_marked(marker: str) -> str:
    """Kill the worker the first time (no marker file yet), succeed the second time."""
    if not os.path.exists(marker):
        with open(marker, 'w') as f:
            f.write('x')
        os._exit(3)
    return 'survived'


def always_die() -> None:
    os._exit(4)


def nbytes(data: Any) -> int:
    return len(data)


def digest(data: Any) -> str:
    import hashlib

    return hashlib.sha256(bytes(data)).hexdigest()


def make_bytes(n: int) -> bytes:
    return b'x' * n


def redis_roundtrip(key: str, value: bytes) -> bytes:
    from tether.faas.endpoint import get_redis_client

    rc = get_redis_client()
    rc.set(key, value)
    got = rc.get(key)
    rc.delete(key)
    return bytes(got)


def echo(value: Any) -> Any:
    return value


def pid_b() -> int:
    return os.getpid()
