"""The seed programs of figures 3.21, 4.4, 4.7-4.10 run with only imports changed.

Figure 4.4 also runs with its consumer submitted before its producer
(``fig_4_4_consumer_first``): submitting must not wait for the future's result.

Each program runs in its own interpreter, unchanged but for what is written at its top.
Their ``Client()`` connects to the Dask cluster of tests/patterns through Dask's own
``scheduler-address`` setting (``DASK_SCHEDULER_ADDRESS``) instead of starting a cluster
per program, except in figure 3.21c: its StoreExecutor shuts its client down at the end,
which for a Dask client shuts down the scheduler it is connected to, so that program's
``Client()`` starts a cluster of its own, as the seed shows it. Programs that use
ownership or lifetimes must leave no key behind.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import count_keys

PROGRAMS = pathlib.Path(__file__).parent / 'seed_programs'
ROOT = pathlib.Path(__file__).resolve().parents[2]


# These programs' StoreExecutor (or client) shuts down the Dask cluster it is given.
OWN_CLUSTER = {'fig_3_21c'}


@pytest.mark.parametrize(
    ('program', 'leak_free'),
    [
        ('fig_3_21a', False),
        ('fig_3_21b', True),
        ('fig_3_21c', True),
        ('fig_4_4', False),
        ('fig_4_4_consumer_first', False),
        ('fig_4_7', True),
        ('fig_4_8', True),
        ('fig_4_9', False),
        ('fig_4_10', True),
    ],
)
def test_seed_program_runs(  # noqa: PLR0917 (pytest passes fixtures by name)
    program: str,
    leak_free: bool,
    redis_client: Any,
    unique_prefix: str,
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> None:
    env = dict(os.environ)
    env['TETHER_SEED_PREFIX'] = unique_prefix
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), env.get('PYTHONPATH')) if p)
    env['DASK_DISTRIBUTED__DASHBOARD__ADDRESS'] = ':0'
    source = (PROGRAMS / f'{program}.py').read_text()
    if 'Client(' in source and program not in OWN_CLUSTER:
        env['DASK_SCHEDULER_ADDRESS'] = request.getfixturevalue('dask_cluster').scheduler_address
    try:
        out = subprocess.run(
            [sys.executable, str(PROGRAMS / f'{program}.py')],
            capture_output=True,
            text=True,
            timeout=100,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        if leak_free:
            assert count_keys(redis_client, unique_prefix) == 0
    finally:
        for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
            redis_client.delete(key)
