"""The faas diagnostic report's parts (``tether faas diagnostic`` runs them all).

The Globus Compute SDK's ``diagnostic`` and ``hardware_report`` helpers port by changing
the import (``docs/porting.md``): :func:`cat`, :func:`get_recent_endpoints`,
:func:`mem_info`, :func:`swap_info`, :func:`python_runtime_host_info`.
"""

from __future__ import annotations

from tether.faas._diagnostic import (
    REDACTED,
    cat,
    diagnostic_report,
    disk_info,
    get_recent_endpoints,
    mem_info,
    python_runtime_host_info,
    redact,
    swap_info,
    write_report,
)

__all__ = [
    'REDACTED',
    'cat',
    'diagnostic_report',
    'disk_info',
    'get_recent_endpoints',
    'mem_info',
    'python_runtime_host_info',
    'redact',
    'swap_info',
    'write_report',
]
