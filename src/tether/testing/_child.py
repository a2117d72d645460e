"""Code that conformance tests run in a child process (kept free of pytest, so it is light)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

from tether.stream.protocols import Subscriber


def consume_and_die(make_subscriber: Callable[[], Subscriber], count: int, out: Any) -> None:
    """Read ``count`` messages into the queue ``out``, then die by SIGKILL mid-stream."""
    sub = make_subscriber()
    for _ in range(count):
        out.put(sub.next_message(10))
    out.close()
    out.join_thread()  # the messages reach the parent before the kill
    os.kill(os.getpid(), signal.SIGKILL)
