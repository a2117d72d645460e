"""Preloaded by the process launcher's fork server: the launching script runs there once.

With the ``forkserver`` start method, every new process runs the launching script's main
module again (as ``__mp_main__``, so that what it defines, a behavior class for one, can
be unpickled) before it runs its target: for a script that imports much, that is most of
the cost of starting an agent. Imported by the fork server, this module runs the script
there instead, once, the way each child would have: forked agents then find it already
run and skip it. The script's path comes from the environment variable that
:class:`~tether.agents.launcher.ProcessLauncher` sets while it starts the fork server,
with the launcher's pid: any other process (one that imports this module, or inherited
the variable) leaves its ``__main__`` alone. If running the script fails, the children
run it themselves as before.
"""

from __future__ import annotations

import logging
import os

__all__: list[str] = []


def _run() -> None:
    from tether.agents.launcher.process import MAIN_ENV

    value = os.environ.pop(MAIN_ENV, None)  # agents forked from here do not inherit it
    launcher, _, path = (value or '').partition(':')
    if launcher != str(os.getppid()) or not os.path.isfile(path):
        return  # not the fork server of the launcher that named the script
    from multiprocessing import process, spawn

    current = process.current_process()
    current._inheriting = True  # type: ignore[attr-defined]  # as multiprocessing does
    try:
        spawn.import_main_path(path)
    except (Exception, SystemExit):
        logging.getLogger(__name__).warning(
            'the agent fork server could not run %s; each agent process will',
            path,
            exc_info=True,
        )
    finally:
        del current._inheriting  # type: ignore[attr-defined]


_run()
