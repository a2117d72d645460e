"""What the run directory records about the machine and the software."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
from typing import Any

__all__ = ['PACKAGES', 'environment']

PACKAGES = (
    'tether',
    'numpy',
    'pydantic',
    'dask',
    'distributed',
    'parsl',
    'ray',
    'redis',
    'torch',
    'scikit-learn',
    'rdkit',
    'tblite',
    'pybullet',
    'matplotlib',
)
"""Packages whose versions are recorded (when installed)."""

_ENV_VARS = ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'OPENBLAS_CORETYPE')


def _cpu_model() -> str | None:
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'))
    except (ValueError, OSError, AttributeError):
        return None


def environment() -> dict[str, Any]:
    """Return the hardware, the OS, the interpreter, package versions and thread settings."""
    versions: dict[str, str] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        'hostname': socket.gethostname(),
        'platform': platform.platform(),
        'python': sys.version.split()[0],
        'executable': sys.executable,
        'cpu_count': os.cpu_count(),
        'cpu_model': _cpu_model(),
        'memory_bytes': _memory_bytes(),
        'load_average': load,
        'packages': versions,
        'env': {k: os.environ[k] for k in _ENV_VARS if k in os.environ},
        'argv': sys.argv,
    }
