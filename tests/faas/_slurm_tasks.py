"""Functions the Slurm tests run on an endpoint's workers (inside Slurm jobs)."""

from __future__ import annotations

import os
import signal
import subprocess


def job_id() -> str:
    """The Slurm job this task runs in."""
    return os.environ.get('SLURM_JOB_ID', '')


def end_own_job(how: str, log: str, times: int) -> str:
    """End the Slurm job this task runs in, the first ``times`` times it runs (each run's
    job id is appended to the file ``log``); later runs return their job id.

    ``how``: ``'scancel'``, or ``'walltime'`` (the job's time limit set to zero: Slurm
    ends it as TIMEOUT, as at the end of its walltime).
    """
    job = os.environ['SLURM_JOB_ID']
    with open(log, 'a') as f:
        f.write(job + '\n')
    with open(log) as f:
        runs = len(f.read().split())
    if runs > times:
        return job
    if how == 'scancel':
        subprocess.run(['scancel', job], check=True)
    else:
        subprocess.run(['scontrol', 'update', f'jobid={job}', 'timelimit=0'], check=True)
    while True:  # until Slurm ends the job, and this worker with it
        signal.pause()
