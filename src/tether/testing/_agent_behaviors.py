"""Behaviors the exchange conformance suite runs (importable by any agent process)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from tether.agents import Behavior, action, current_action

__all__ = ['CustomError', 'Echo', 'Other', 'Slow', 'SubEcho']


class CustomError(Exception):
    """An exception type a receiver that refuses pickles cannot rebuild."""


class Echo(Behavior):
    """Echoes and fails on request."""

    @action
    def echo(self, value: Any) -> Any:
        """Return the value."""
        return value

    @action
    async def aecho(self, value: Any) -> Any:
        """Return the value (async)."""
        return value

    @action
    def fail(self, message: str) -> None:
        """Raise ValueError(message)."""
        raise ValueError(message)

    @action
    def fail_custom(self) -> None:
        """Raise an exception of a type defined here."""
        raise CustomError('custom failure')


class SubEcho(Echo):
    """A subclass (discovery includes it)."""


class Other(Behavior):
    """An unrelated behavior."""

    @action
    def hello(self) -> str:
        """Say hello."""
        return 'hello'


class Slow(Behavior):
    """Records concurrency and cancellation."""

    max_concurrency = 3

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.done = 0
        self.cancelled: list[str] = []

    def on_setup(self) -> None:
        self.lock = threading.Lock()

    @action
    def work(self, seconds: float) -> int:
        """Sleep, recording how many run at once; return the peak so far."""
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(seconds)
        with self.lock:
            self.now -= 1
            self.done += 1
        return self.peak

    @action
    async def asleep(self, seconds: float) -> str:
        """Sleep (async), recording a cancellation."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.cancelled.append('async')
            raise
        return 'slept'

    @action
    def cooperative(self, seconds: float) -> str:
        """Wait for a cancellation (sync), recording it."""
        if current_action().cancel_event.wait(seconds):
            self.cancelled.append('sync')
            return 'cancelled'
        return 'finished'

    @action
    def stats(self) -> dict[str, Any]:
        """Peak concurrency, actions done, cancellations seen."""
        return {'peak': self.peak, 'done': self.done, 'cancelled': list(self.cancelled)}


class BrokenSetup(Behavior):
    """An agent whose ``on_setup`` always raises (it fails at every start)."""

    def on_setup(self) -> None:
        """Fail."""
        raise CustomError('on_setup failed on purpose')

    @action
    def echo(self, value: Any) -> Any:
        """Never reached."""
        return value
