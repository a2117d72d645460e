"""Figures 5.5 and 5.6 of the dissertation run with only their imports changed."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from tests.agents.seed_programs.fig_5_5 import Example

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_figure_5_5_behavior_works_as_a_plain_object() -> None:
    behavior = Example()
    assert behavior.square(3) == 9
    assert behavior.count == 0


def test_figure_5_6_runs_as_a_program() -> None:
    proc = subprocess.run(
        [sys.executable, '-m', 'tests.agents.seed_programs.fig_5_6'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
