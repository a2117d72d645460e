"""Functions of tests/faas/test_lifecycle.py (module level: workers import them by name)."""

from __future__ import annotations

import os
import time
from typing import Any


def record(path: str, value: Any) -> Any:
    """Append a line to ``path`` (one line per run), return ``value``."""
    with open(path, 'a') as f:
        f.write(f'{os.getpid()}\n')
    return value


def block_until(path: str, marker: str) -> int:
    """Note the worker's pid in ``path``, then wait for ``marker`` to exist."""
    with open(path, 'a') as f:
        f.write(f'{os.getpid()}\n')
    while not os.path.exists(marker):
        time.sleep(0.01)
    return os.getpid()


def sized(n: int) -> bytes:
    return b'r' * n
