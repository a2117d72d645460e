"""ProcessLauncher: each agent runs in a process of its own on this machine.

Processes come from a fork server that has already imported the agent runtime, so
starting an agent costs a ``fork`` rather than a new interpreter and its imports.
Behaviors defined in a script's ``__main__`` work as with :mod:`multiprocessing`: guard
the script's top level with ``if __name__ == '__main__':``.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from typing import Any

from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised
from tether.exceptions import AgentLaunchError

__all__ = ['ProcessLauncher']

# What every agent process needs, imported once by the fork server; children share these
# pages. (The store, and redis-py for the default store, are imported only by agents that
# receive a large value.)
_PRELOAD = [
    'tether.agents',
    'tether.agents._worker',
    'tether.agents.exchange',
    'tether.agents._preload_main',
    'uvloop',  # the hybrid exchange's server loop, when installed (skipped if not)
]


def _main_path() -> str | None:
    """The launching script, as multiprocessing names it (``None``: not a script file)."""
    main = sys.modules.get('__main__')
    if getattr(getattr(main, '__spec__', None), 'name', None) is not None:
        return None  # ``python -m module``: run by name, not by path
    path = getattr(main, '__file__', None)
    if not isinstance(path, str):
        return None
    from multiprocessing import process

    if not os.path.isabs(path):
        base = getattr(process, 'ORIGINAL_DIR', None) or os.getcwd()
        path = os.path.join(base, path)
    return os.path.normpath(path)


MAIN_ENV = 'TETHER_AGENTS_FORKSERVER_MAIN'
"""Names, for the fork server only, the script it runs once (``<launcher pid>:<path>``)."""

_env_lock = threading.Lock()


def _ensure_forkserver(main_path: str | None) -> None:
    """Start the fork server (if it is not running) with the launching script named.

    The fork server (see ``tether.agents._preload_main``) runs the script once, instead
    of every agent process running it again. The variable is set only while the server
    starts, so no other process this one starts inherits it.
    """
    from multiprocessing import forkserver

    with _env_lock:
        if main_path is not None:
            os.environ[MAIN_ENV] = f'{os.getpid()}:{main_path}'
        try:
            forkserver.ensure_running()
        finally:
            os.environ.pop(MAIN_ENV, None)


class ProcessLauncher(Launcher):
    """Runs each agent in its own process, restarted when it dies (per the policy).

    Args:
        restart: The restart policy, or a number of restarts (default: never).
        start_method: ``'forkserver'`` (default: fast starts, small processes),
            ``'spawn'`` or ``'fork'``.
    """

    def __init__(
        self, *, restart: RestartPolicy | int | None = None, start_method: str = 'forkserver'
    ) -> None:
        super().__init__(restart=restart)
        self.start_method = start_method
        self._ctx: Any = multiprocessing.get_context(start_method)
        self._main_path: str | None = None
        if start_method == 'forkserver':
            self._ctx.set_forkserver_preload(_PRELOAD)
            self._main_path = _main_path()
        self._procs: dict[str, Any] = {}
        self._plock = threading.Lock()

    def run_once(self, entry: Supervised) -> None:
        from tether.agents._worker import run_agent_process

        agent_id = entry.spec.agent_id
        proc = self._ctx.Process(
            target=run_agent_process,
            args=(entry.spec,),
            name=f'tether-agent-{agent_id[6:14]}',
            daemon=False,
        )
        if self.start_method == 'forkserver':
            _ensure_forkserver(self._main_path)
        with self._plock:
            if entry.stopping:
                return
            proc.start()
            self._procs[agent_id] = proc
        proc.join()
        if proc.exitcode != 0:
            from tether.agents._worker import read_failure

            why = read_failure(entry.spec.journal)
            raise AgentLaunchError(
                f'agent {agent_id} process exited with code {proc.exitcode}'
                + (f': {why}' if why else ''),
            )

    def pid(self, agent_id: str) -> int | None:
        """The pid of the agent's current process (``None`` if it has none)."""
        with self._plock:
            proc = self._procs.get(agent_id)
        return None if proc is None else proc.pid

    def kill(self, entry: Supervised) -> None:
        with self._plock:
            proc = self._procs.get(entry.spec.agent_id)
        if proc is not None and proc.is_alive():
            proc.kill()
