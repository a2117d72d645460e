"""The worked example (examples/steer_active_learning.py) runs, learns, and plots."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_active_learning_example(tmp_path: pathlib.Path) -> None:
    plot = tmp_path / 'progress.png'
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'examples' / 'steer_active_learning.py'),
            '--simulations',
            '24',
            '--retrain-every',
            '6',
            '--plot',
            str(plot),
        ],
        cwd=tmp_path,
        env={**os.environ, 'PYTHONWARNINGS': 'ignore'},
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary['simulations'] == 24
    assert summary['retrains'] >= 1
    # The surrogate did pick simulations. Whether its picks beat the random ones in a
    # campaign this small depends on the order results arrive (timing), so that is
    # reported by the example, not asserted here.
    assert summary['mean_range_model_picks'] is not None
    assert summary['mean_range_random_picks'] is not None
    assert summary['best_range_m'] >= summary['mean_range_random_picks']
    assert plot.stat().st_size > 10_000
