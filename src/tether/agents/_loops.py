"""An agent's control loops: ``@loop``, ``@timer`` and ``@event`` methods of its behavior.

Synchronous loops run in threads of their own and ``async`` ones as tasks of the agent's
event loop. Timers wait on the agent's clock (its exchange's: a test drives a
:class:`tether.testing.FakeClock`), so that a timer's period is never slept in a test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from tether._clock import Clock
from tether.agents.behavior import Behavior, _wait_async_event, _wait_thread_event, loops_of

__all__ = ['ControlLoops']

logger = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False, repr=False)
class ControlLoops:
    """Starts, runs and joins the control loops of one agent.

    Args:
        behavior: The agent's behavior.
        agent_id: Its mailbox id (names the threads).
        clock: The clock timers wait on.
        failed: Called with the loop's name and its exception when a loop raised.
    """

    behavior: Behavior
    agent_id: str
    clock: Clock
    failed: Callable[[str, BaseException], None]
    # Threads stop when this is set; timers wait on the condition (see stop_threads).
    thread_stop: threading.Event = dataclasses.field(init=False, default_factory=threading.Event)
    _stop_cond: threading.Condition = dataclasses.field(
        init=False, default_factory=threading.Condition
    )
    _started: list[Any] = dataclasses.field(init=False, default_factory=list)

    def start(self, stop: asyncio.Event) -> None:
        """Start every loop (call from the agent's event loop); ``stop`` ends async ones."""
        for name, fn in loops_of(type(self.behavior)).items():
            bound = fn.__get__(self.behavior)
            kind = fn._tether_agent_kind  # type: ignore[attr-defined]
            if inspect.iscoroutinefunction(fn):
                coro = self._async_loop(name, kind, fn, bound, stop)
                self._started.append(asyncio.get_running_loop().create_task(coro))
            else:
                thread = threading.Thread(
                    target=self._sync_loop,
                    args=(name, kind, fn, bound),
                    name=f'agent-{self.agent_id[6:14]}-{name}',
                    daemon=True,
                )
                thread.start()
                self._started.append(thread)

    def stop_threads(self) -> None:
        """Tell the synchronous loops to stop."""
        with self._stop_cond:
            self.thread_stop.set()
            self._stop_cond.notify_all()

    async def join(self) -> None:
        """Wait (at most 10 s each) for the loops to end; cancel async ones that do not."""
        loops, self._started = self._started, []
        tasks = [t for t in loops if isinstance(t, asyncio.Task)]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=10)
            for task in pending:
                task.cancel()
        for thread in loops:
            if isinstance(thread, threading.Thread):
                await asyncio.to_thread(thread.join, 10)
                if thread.is_alive():
                    logger.warning('loop thread %s did not stop within 10 s', thread.name)

    # Synchronous loops ------------------------------------------------------------------

    def _sync_loop(self, name: str, kind: str, fn: Any, bound: Any) -> None:
        stop = self.thread_stop
        try:
            if kind == 'loop':
                bound(stop)
            elif kind == 'timer':
                while self._tick_wait(fn._tether_timer_interval):
                    bound()
            else:
                ev = getattr(self.behavior, fn._tether_event_name)
                while _wait_thread_event(ev, stop, 0.05):
                    ev.clear()
                    bound()
        except Exception as e:
            self.failed(name, e)

    def _tick_wait(self, interval: float) -> bool:
        """Wait one timer period on the clock; False once the loops must stop."""
        clock = self.clock
        deadline = clock.monotonic() + interval
        with self._stop_cond:
            while not self.thread_stop.is_set():
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return True
                clock.wait(self._stop_cond, remaining)
        return False

    # Async loops ------------------------------------------------------------------------

    async def _async_loop(
        self, name: str, kind: str, fn: Any, bound: Any, stop: asyncio.Event
    ) -> None:
        try:
            if kind == 'loop':
                await bound(stop)
            elif kind == 'timer':
                while await self._async_tick(fn._tether_timer_interval, stop):
                    await bound()
            else:
                ev = getattr(self.behavior, fn._tether_event_name)
                while await _wait_async_event(ev, stop):
                    ev.clear()
                    await bound()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.failed(name, e)

    async def _async_tick(self, interval: float, stop: asyncio.Event) -> bool:
        """Wait one timer period on the clock; False once ``stop`` is set."""
        if stop.is_set():
            return False
        sleeper = asyncio.ensure_future(self.clock.asleep(interval))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()
        return not stop.is_set()
