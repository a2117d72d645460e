"""Functions the managers-in-blocks tests run on a block's workers."""

from __future__ import annotations

import os
import signal


def where() -> dict[str, str]:
    """The worker's process, its manager's, and the Slurm job (if any) it runs in."""
    return {
        'pid': str(os.getpid()),
        'manager': str(os.getppid()),
        'job': os.environ.get('SLURM_JOB_ID', ''),
    }


def kill_manager(log: str, times: int) -> str:
    """Kill this worker's manager (its parent) the first ``times`` runs (each run's manager
    pid appended to ``log``); later runs return the manager's pid."""
    manager = os.getppid()
    with open(log, 'a') as f:
        f.write(f'{manager}\n')
    with open(log) as f:
        runs = len(f.read().split())
    if runs > times:
        return str(manager)
    os.kill(manager, signal.SIGKILL)
    while True:  # the manager is gone: this worker is stopped with it, or orphaned
        signal.pause()
