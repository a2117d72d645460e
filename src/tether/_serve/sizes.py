"""Parse and print byte sizes (``4GB``, ``512MiB``, ``1.5G``)."""

from __future__ import annotations

import os
import re

__all__ = ['format_size', 'parse_size', 'physical_memory']

_UNITS = {
    '': 1,
    'b': 1,
    'k': 1000,
    'kb': 1000,
    'kib': 1 << 10,
    'm': 1000**2,
    'mb': 1000**2,
    'mib': 1 << 20,
    'g': 1000**3,
    'gb': 1000**3,
    'gib': 1 << 30,
    't': 1000**4,
    'tb': 1000**4,
    'tib': 1 << 40,
}


def parse_size(text: str | int) -> int:
    """Return the number of bytes in ``text`` (``'4GB'``, ``'512MiB'``, ``1024``)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r'\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*', text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise ValueError(f'cannot read {text!r} as a size: use e.g. 4GB, 512MiB or 1048576')
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: int) -> str:
    """Format a byte count for people."""
    size = float(n)
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if size < 1024:
            return f'{size:.0f} {unit}' if unit == 'B' else f'{size:.1f} {unit}'
        size /= 1024
    return f'{size:.1f} TiB'


def physical_memory() -> int:
    """Bytes of physical memory of this host (4 GiB if it cannot be read)."""
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    except (ValueError, OSError):
        return 4 << 30
