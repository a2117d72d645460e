"""Waiting for a forked child of a shared-memory test (one that may hang on a lock)."""

from __future__ import annotations

import os
import signal
import threading

import pytest


def child_exit_code(pid: int, hung: str, timeout: float = 60.0) -> int:
    """The exit code of the forked child ``pid``; kill it and fail with ``hung`` if it has
    not ended within ``timeout`` seconds (a child stuck on a lock never ends)."""
    polls = int(timeout / 0.05)
    for _ in range(polls):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        threading.Event().wait(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(hung)
