"""A loopback environment for Parsl's High-Throughput Executor in tests."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def parsl_environment(prefix: str = 'tether-parsl-') -> Iterator[pathlib.Path]:
    """Yield a fresh run directory while Parsl's workers can import the tests.

    Parsl workers are started by a shell command: they import test modules from the
    repository root (on ``PYTHONPATH``), and its interchange and worker commands live next
    to this interpreter (on ``PATH``). Both are restored, and the directory removed, after.
    """
    run_dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    old = os.environ.get('PYTHONPATH')
    old_path = os.environ.get('PATH', '')
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    os.environ['PATH'] = os.pathsep.join((str(pathlib.Path(sys.executable).parent), old_path))
    try:
        yield run_dir
    finally:
        os.environ['PATH'] = old_path
        if old is None:
            os.environ.pop('PYTHONPATH', None)
        else:
            os.environ['PYTHONPATH'] = old
        shutil.rmtree(run_dir, ignore_errors=True)
