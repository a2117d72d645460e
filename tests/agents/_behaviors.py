"""Behaviors used by the agent tests (importable by agent processes)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tether.agents import Behavior, action, event, loop, timer
from tether.testing._agent_behaviors import CustomError
from tether.testing._agent_behaviors import Echo as _ConformanceEcho

__all__ = ['BadLoop', 'Counter', 'CustomError', 'Echo', 'Looper', 'Parent', 'Stuck']


class Echo(_ConformanceEcho):
    """The conformance suite's ``Echo`` plus what the process tests ask of an agent."""

    @action
    def pid(self) -> int:
        import os

        return os.getpid()

    @action
    def nbytes(self, data: Any) -> int:
        return len(data)

    @action
    def make_bytes(self, n: int) -> bytes:
        return b'x' * n


class Counter(Behavior):
    """Persistent counter (its state survives restarts); one action at a time."""

    max_concurrency = 1

    def on_setup(self) -> None:
        self.state = self.agent_state

    @action
    def incr(self) -> int:
        self.state['n'] = self.state.get('n', 0) + 1
        self.state.checkpoint()
        return int(self.state['n'])

    @action
    def value(self) -> int:
        return int(self.state.get('n', 0))

    @action
    def pid(self) -> int:
        import os

        return os.getpid()


class Looper(Behavior):
    """Loops, timers and events, sync and async."""

    def __init__(self) -> None:
        self.sync_ticks = 0
        self.async_ticks = 0
        self.timer_ticks = 0
        self.atimer_ticks = 0
        self.event_calls = 0
        self.aevent_calls = 0
        self.setup = False
        self.trigger = threading.Event()
        self.atrigger: asyncio.Event | None = None

    async def on_setup(self) -> None:
        self.setup = True
        self.atrigger = asyncio.Event()

    @loop
    def spin(self, shutdown: threading.Event) -> None:
        while not shutdown.wait(0.01):
            self.sync_ticks += 1

    @loop
    async def aspin(self, shutdown: asyncio.Event) -> None:
        while not shutdown.is_set():
            self.async_ticks += 1
            await asyncio.sleep(0.01)

    @timer(0.02)
    def tick(self) -> None:
        self.timer_ticks += 1

    @timer(0.02)
    async def atick(self) -> None:
        self.atimer_ticks += 1

    @event('trigger')
    def on_trigger(self) -> None:
        self.event_calls += 1

    @event('atrigger')
    async def on_atrigger(self) -> None:
        self.aevent_calls += 1

    @action
    def fire(self) -> None:
        self.trigger.set()

    @action
    async def afire(self) -> None:
        assert self.atrigger is not None
        self.atrigger.set()

    @action
    def counts(self) -> dict[str, int]:
        return {
            'sync': self.sync_ticks,
            'async': self.async_ticks,
            'timer': self.timer_ticks,
            'atimer': self.atimer_ticks,
            'event': self.event_calls,
            'aevent': self.aevent_calls,
        }


class Ticker(Behavior):
    """A sync and an async timer of 5 s (tests drive them with a fake clock)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.aticks = 0

    @timer(5)
    def tick(self) -> None:
        self.ticks += 1

    @timer(5)
    async def atick(self) -> None:
        self.aticks += 1


class BadLoop(Behavior):
    @loop
    def crash(self, shutdown: threading.Event) -> None:
        raise RuntimeError('loop crashed')

    @action
    def ok(self) -> bool:
        return True


class Parent(Behavior):
    """Launches a child agent and relays to it."""

    def __init__(self) -> None:
        self.child: Any = None

    @action
    def spawn(self) -> str:
        self.child = self.agent_context.launch(Echo())
        return str(self.child.agent_id)

    @action
    def relay(self, value: Any) -> Any:
        return self.child.echo(value).result(30)


class Stuck(Behavior):
    """Holds requests until its process dies (requests in flight when an agent crashes).

    Only its first process holds: a restarted one (``marker`` exists) answers at once.
    Each request it holds creates a file ``<marker>.<n>``, so a test can see it without
    asking the agent (whose slots the held requests take).
    """

    max_concurrency = 3

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.holding = 0

    def on_setup(self) -> None:
        import os

        self.lock = threading.Lock()
        self.release = threading.Event()
        if os.path.exists(self.marker):
            self.release.set()
        else:
            open(self.marker, 'w').close()

    @action
    def hold(self) -> None:
        if self.release.is_set():
            return
        self._held()
        self.release.wait(600)

    @action
    async def ahold(self) -> None:
        if self.release.is_set():
            return
        self._held()
        await asyncio.Event().wait()  # held until cancelled

    def _held(self) -> None:
        with self.lock:
            self.holding += 1
            open(f'{self.marker}.{self.holding}', 'w').close()

    @action
    def held(self) -> int:
        return self.holding

    @action
    def pid(self) -> int:
        import os

        return os.getpid()
