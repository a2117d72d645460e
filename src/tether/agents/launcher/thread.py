"""ThreadLauncher: each agent runs in a thread of this process."""

from __future__ import annotations

from typing import Any

from tether.agents._runtime import AgentRuntime
from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised

__all__ = ['ThreadLauncher']


class ThreadLauncher(Launcher):
    """Runs each agent in a thread of this process (development, tests, I/O-bound agents).

    A restarted agent keeps its behavior object (and so its attributes); its
    :class:`~tether.agents.state.State` is restored as with every launcher.

    Args:
        restart: The restart policy, or a number of restarts (default: never).
    """

    in_process = True

    def __init__(self, *, restart: RestartPolicy | int | None = None, **_: Any) -> None:
        super().__init__(restart=restart)
        self._runtimes: dict[str, AgentRuntime] = {}

    def run_once(self, entry: Supervised) -> None:
        runtime = AgentRuntime(entry.spec)
        self._runtimes[entry.spec.agent_id] = runtime
        if entry.stopping:
            return
        runtime.run()

    def kill(self, entry: Supervised) -> None:
        runtime = self._runtimes.get(entry.spec.agent_id)
        if runtime is not None:
            runtime.request_shutdown(terminate=False)
