"""The seed programs of figures 3.21, 4.4, 4.7-4.10 run with only imports changed.

Each program runs in its own interpreter (as the seed shows it, with ``Client()`` starting
its own Dask cluster); what each had to change is written at its top. Programs that use
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


@pytest.mark.parametrize(
    ('program', 'leak_free'),
    [
        ('fig_3_21a', False),
        ('fig_3_21b', True),
        ('fig_3_21c', True),
        ('fig_4_4', False),
        ('fig_4_7', True),
        ('fig_4_8', True),
        ('fig_4_9', False),
        ('fig_4_10', True),
    ],
)
def test_seed_program_runs(
    program: str,
    leak_free: bool,
    redis_client: Any,
    unique_prefix: str,
    tmp_path: pathlib.Path,
) -> None:
    env = dict(os.environ)
    env['TETHER_SEED_PREFIX'] = unique_prefix
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), env.get('PYTHONPATH')) if p)
    env['DASK_DISTRIBUTED__DASHBOARD__ADDRESS'] = ':0'
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
