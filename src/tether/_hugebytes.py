"""Build large ``bytes`` objects on transparent huge pages (CPython on Linux).

Copying 100 MB into a new ``bytes`` costs ~55 ms on a VM, against ~11 ms for the copy
itself: the rest is the kernel faulting in 25,000 pages of 4 KB. :func:`join` allocates
the (uninitialised) ``bytes`` object through the C API, asks the kernel to back it with
huge pages (``madvise(MADV_HUGEPAGE)``, what NumPy does for its arrays), and copies the
parts into it before anyone else can see it. Elsewhere (other interpreters, other
systems, or if the self-check at first use fails) it is ``b''.join``.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ['join']

_MIN_SIZE = 4 << 20
_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14

_state: dict[str, Any] = {}


def _setup() -> bool:
    if 'ok' in _state:
        return bool(_state['ok'])
    ok = False
    if sys.implementation.name == 'cpython' and sys.platform.startswith('linux'):
        try:
            new = ctypes.pythonapi.PyBytes_FromStringAndSize
            new.restype = ctypes.py_object
            new.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
            madvise = ctypes.CDLL(None).madvise
            madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            madvise.restype = ctypes.c_int
            offset = bytes.__basicsize__ - 1  # offset of ob_sval in PyBytesObject
            probe = new(b'tether', 6)
            ok = (ctypes.c_char * 6).from_address(id(probe) + offset).raw == b'tether'
            _state.update(new=new, madvise=madvise, offset=offset)
        except (AttributeError, OSError, TypeError, ValueError):
            ok = False
    _state['ok'] = ok
    return ok


def join(parts: Sequence[Any]) -> bytes:
    """Return the concatenation of the buffers in ``parts`` as one new ``bytes``."""
    views = [memoryview(p).cast('B') for p in parts]
    total = sum(v.nbytes for v in views)
    if total < _MIN_SIZE or not _setup():
        return b''.join(views)
    out: bytes = _state['new'](None, total)
    addr = id(out) + _state['offset']
    start = (addr + _HUGE_PAGE - 1) & ~(_HUGE_PAGE - 1)
    end = (addr + total) & ~(_HUGE_PAGE - 1)
    if end > start:
        _state['madvise'](start, end - start, _MADV_HUGEPAGE)  # a hint: failure is harmless
    dest = memoryview((ctypes.c_char * total).from_address(addr)).cast('B')
    offset = 0
    for view in views:
        dest[offset : offset + view.nbytes] = view
        offset += view.nbytes
    return out
