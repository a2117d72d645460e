"""The launcher protocol and the supervision shared by every launcher.

A launcher runs agents somewhere (threads, processes, a Parsl pool ...). Each launched
agent gets a supervisor thread in the launching process that runs it once and, when it
fails (an exception, a killed process, a lost worker), runs it again after a back-off,
up to the restart policy's limit. An agent that stops because it was asked to is not
restarted. An agent that fails for good has its mailbox terminated, so that callers get
:class:`~tether.exceptions.MailboxClosedError` instead of waiting forever.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents.behavior import mro_of
from tether.exceptions import AgentLaunchError, TetherError, UnknownMailboxError

if TYPE_CHECKING:
    from tether.agents._context import AgentSpec

__all__ = ['Launcher', 'RestartPolicy', 'Supervised']

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RestartPolicy:
    """When a failed agent is started again.

    Attributes:
        max_restarts: Restarts allowed after the first start (0: never restart).
        backoff: Seconds before the first restart; doubled for each further one.
        max_backoff: Longest wait between restarts.
    """

    max_restarts: int = 0
    backoff: float = 0.5
    max_backoff: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number ``attempt`` (from 1)."""
        return float(min(self.backoff * 2 ** max(attempt - 1, 0), self.max_backoff))


class Supervised:
    """One launched agent, as its launcher's supervisor sees it.

    Attributes:
        spec: The agent.
        restarts: How often it was restarted.
        done: Set once it stopped for good.
        error: What it failed with for good (``None`` if it did not).
        stopping: Set when it was asked to stop (a launcher's :meth:`Launcher.run_once`
            that finds it set returns without starting the agent).
    """

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.restarts = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.stopping = False
        self.thread: threading.Thread | None = None


class Launcher(ABC):
    """Runs agents and restarts them when they fail (the launcher contract).

    A launcher implements :meth:`run_once` (run one agent until it stops, in a thread, a
    process, a pool ...) and, if it can, :meth:`kill`; this base class supervises: it
    runs each launched agent in a supervisor thread, restarts it after a back-off when
    :meth:`run_once` raised, answers the requests a dead agent left, and terminates the
    mailbox of an agent that failed for good. Launchers that supervise elsewhere (the
    daemon launcher) override :meth:`launch`, :meth:`running`, :meth:`wait` and
    :meth:`close` instead. Every launcher passes
    :class:`tether.testing.agents.LauncherConformance`.

    Args:
        restart: The restart policy, or a number of restarts (default: never restart).
        clock: The clock restart back-offs are measured on.
    """

    detached = False
    """Agents of a detached launcher outlive the process (a Manager leaves them running)."""

    in_process = False
    """Agents run in this process's threads (no in-flight journal is needed: a failing
    agent answers what it holds before it stops)."""

    def __init__(
        self, *, restart: RestartPolicy | int | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.clock = clock
        if isinstance(restart, int):
            restart = RestartPolicy(max_restarts=restart)
        self.restart = restart or RestartPolicy()
        self._agents: dict[str, Supervised] = {}
        self._lock = threading.Lock()
        self.closed = False

    # To implement ---------------------------------------------------------------------

    @abstractmethod
    def run_once(self, entry: Supervised) -> None:
        """Run the agent of ``entry.spec`` until it stops (called in its supervisor thread).

        Return if it stopped cleanly (it was asked to); raise if it failed (an exception,
        a killed process, a lost worker): the supervisor then restarts it or gives up.
        """

    def kill(self, entry: Supervised) -> None:  # noqa: B027 - optional for subclasses
        """Stop a running agent at once (used by :meth:`close` after asking nicely)."""

    # API --------------------------------------------------------------------------------

    def launch(self, spec: AgentSpec) -> None:
        """Start the agent of ``spec`` (its mailbox must already be registered)."""
        if self.closed:
            raise AgentLaunchError(f'{type(self).__name__} is closed')
        if not self.in_process and spec.journal is None:
            from tether.agents.state import agents_home

            base = spec.state_dir or str(agents_home() / 'state')
            spec.journal = os.path.join(base, f'{spec.agent_id}.inflight')
        entry = Supervised(spec)
        with self._lock:
            if spec.agent_id in self._agents and not self._agents[spec.agent_id].done.is_set():
                raise AgentLaunchError(f'agent {spec.agent_id} is already running here')
            self._agents[spec.agent_id] = entry
        entry.thread = threading.Thread(
            target=self._supervise,
            args=(entry,),
            name=f'tether-supervise-{spec.agent_id[6:14]}',
            daemon=True,
        )
        entry.thread.start()

    def _supervise(self, entry: Supervised) -> None:
        agent_id = entry.spec.agent_id
        try:
            while True:
                try:
                    self.run_once(entry)
                    return
                except BaseException as e:
                    self._answer_lost(entry, e)
                    if entry.stopping or self.closed:
                        return
                    if entry.restarts >= self.restart.max_restarts:
                        entry.error = e
                        logger.error('agent %s failed for good: %r', agent_id, e)
                        self._give_up(entry)
                        return
                    entry.restarts += 1
                    delay = self.restart.delay(entry.restarts)
                    logger.warning(
                        'agent %s failed (%r); restart %d of %d in %.2f s',
                        agent_id,
                        e,
                        entry.restarts,
                        self.restart.max_restarts,
                        delay,
                    )
                    self.clock.sleep(delay)
        finally:
            entry.done.set()

    def _answer_lost(self, entry: Supervised, error: BaseException) -> None:
        """Answer the requests a dead agent process accepted and never answered."""
        if entry.spec.journal is None:
            return
        from tether.agents._journal import answer_lost

        try:
            answer_lost(entry.spec.exchange, entry.spec.agent_id, entry.spec.journal, repr(error))
        except Exception:
            logger.exception('could not answer the lost requests of %s', entry.spec.agent_id)

    def _give_up(self, entry: Supervised) -> None:
        from tether.agents._journal import forget

        forget(entry.spec.journal)
        try:
            entry.spec.exchange.terminate(
                entry.spec.agent_id, reason=f'its agent failed for good: {entry.error}'
            )
        except TetherError:
            logger.debug('could not terminate %s', entry.spec.agent_id, exc_info=True)

    def running(self) -> list[str]:
        """Ids of the agents this launcher runs now."""
        with self._lock:
            return [aid for aid, e in self._agents.items() if not e.done.is_set()]

    def restarts(self, agent_id: str) -> int:
        """How often the agent was restarted."""
        return self._entry(agent_id).restarts

    def failure(self, agent_id: str) -> BaseException | None:
        """The error an agent failed with for good (``None`` if it did not)."""
        return self._entry(agent_id).error

    def _entry(self, agent_id: str) -> Supervised:
        with self._lock:
            entry = self._agents.get(agent_id)
        if entry is None:
            raise AgentLaunchError(f'agent {agent_id} was not launched by this launcher')
        return entry

    def wait(self, agent_id: str, timeout: float | None = None) -> bool:
        """Wait until the agent stopped for good; False if ``timeout`` passed first."""
        return self._entry(agent_id).done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Stop every agent still running (asking them first) and release resources."""
        self.closed = True
        with self._lock:
            entries = list(self._agents.values())
        for entry in entries:
            if not entry.done.is_set():
                entry.stopping = True
                self._ask_to_stop(entry)
        for entry in entries:
            if not entry.done.wait(timeout):
                self.kill(entry)
                entry.done.wait(5)

    @staticmethod
    def _ask_to_stop(entry: Supervised) -> None:
        spec = entry.spec
        handle = spec.exchange.get_handle(spec.agent_id)
        try:
            handle.shutdown()
        except UnknownMailboxError:
            # The exchange lost the mailbox (Redis restarted without its data); the agent
            # still listens on it, so make it again and ask there.
            with contextlib.suppress(TetherError):
                spec.exchange.transport().restore(spec.agent_id, mro_of(type(spec.behavior)))
                handle.shutdown()
        except TetherError as e:
            logger.debug('could not ask agent %s to stop: %s', spec.agent_id, e)

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
