"""Preloaded by the process launcher's fork server: the launching script runs there once.

With the ``forkserver`` start method, every new process runs the launching script's main
module again (as ``__mp_main__``, so that what it defines, a behavior class for one, can
be unpickled) before it runs its target: for a script that imports much, that is most of
the cost of starting an agent. Imported by the fork server, this module runs the script
there instead, once, the way each child would have: forked agents then find it already
run and skip it. The script's path comes from :data:`ENV` (set by
:class:`~tether.agents.launcher.ProcessLauncher`); if running it fails, the children run
it themselves as before.
"""

from __future__ import annotations

import logging
import os

__all__ = ['ENV']

ENV = 'TETHER_AGENTS_FORKSERVER_MAIN'
"""Environment variable naming the main script the fork server runs once."""


def _run() -> None:
    path = os.environ.pop(ENV, None)  # agents forked from here do not inherit it
    if not path or not os.path.isfile(path):
        return
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
