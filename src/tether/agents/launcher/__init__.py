"""Launchers run agents: in threads, in processes, on a Parsl pool, in any executor, or as
daemons.

Every launcher restarts an agent that fails, after a back-off and up to a limit
(:class:`RestartPolicy`); a restarted agent keeps its mailbox (and the messages waiting
in it) and restores its :class:`~tether.agents.state.State`.

A launcher implements :class:`Launcher` (``run_once()``, and ``kill()`` if it can); every
launcher passes :class:`tether.testing.agents.LauncherConformance`.
"""

from __future__ import annotations

from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised
from tether.agents.launcher.daemon import DaemonLauncher
from tether.agents.launcher.executor import ExecutorLauncher
from tether.agents.launcher.parsl import ParslLauncher
from tether.agents.launcher.process import ProcessLauncher
from tether.agents.launcher.thread import ThreadLauncher

__all__ = [
    'DaemonLauncher',
    'ExecutorLauncher',
    'Launcher',
    'ParslLauncher',
    'ProcessLauncher',
    'RestartPolicy',
    'Supervised',
    'ThreadLauncher',
]
