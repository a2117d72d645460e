"""Functions the engine conformance suite runs on workers (importable by any worker)."""

from __future__ import annotations

import os
import pathlib
import time

__all__ = ['fail', 'pid', 'square', 'wait_for_file']


def square(x: int) -> int:
    return x * x


def fail(message: str) -> None:
    raise ValueError(message)


def pid() -> int:
    return os.getpid()


def wait_for_file(started: str, marker: str) -> str:
    """Say it started, then wait (up to a minute) until ``marker`` exists."""
    pathlib.Path(started).touch()
    deadline = time.monotonic() + 60
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    return 'released'
