"""Build large ``bytes`` objects on transparent huge pages (CPython on Linux).

Copying 100 MB into a new ``bytes`` costs ~55 ms on a VM, against ~11 ms for the copy
itself: the rest is the kernel faulting in 25,000 pages of 4 KB. :func:`join` allocates
the (uninitialised) ``bytes`` object through the C API, asks the kernel to back it with
huge pages (``madvise(MADV_HUGEPAGE)``, what NumPy does for its arrays), and copies the
parts into it before anyone else can see it. Elsewhere (other interpreters, other
systems, or if the self-check at first use fails) it is ``b''.join``.

:func:`empty_bytearray` and :func:`copy_to_bytes` serve receivers of large payloads (a
proxy resolving in a background thread while the task it feeds runs): the buffer is
allocated without being zeroed (``PyByteArray_FromStringAndSize(NULL, n)``), so its pages
are faulted in by the ``recv_into`` that fills it, with the GIL released; and the copy
into a new ``bytes`` is a ``memmove`` called through ctypes, which also releases the GIL
(from read-only memory too, such as a segment a connector lends: its address comes from
the buffer protocol).
Zeroing 10 MB and copying it with the GIL held blocked every other thread of the
process for ~6 ms each. Neither asks for huge pages (see ``tether.serialize.new_buffer``).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ['copy_to_bytes', 'empty_bytearray', 'empty_bytes', 'join']

_MIN_SIZE = 4 << 20
_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14
# Below this, zeroing or copying with the GIL held is cheaper than the ctypes calls.
_GIL_FREE_MIN = 256 << 10

_state: dict[str, Any] = {}


class _PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer`` (part of the stable ABI since Python 3.11)."""

    _fields_ = (
        ('buf', ctypes.c_void_p),
        ('obj', ctypes.c_void_p),  # a reference PyBuffer_Release drops: not ctypes'
        ('len', ctypes.c_ssize_t),
        ('itemsize', ctypes.c_ssize_t),
        ('readonly', ctypes.c_int),
        ('ndim', ctypes.c_int),
        ('format', ctypes.c_char_p),
        ('shape', ctypes.c_void_p),
        ('strides', ctypes.c_void_p),
        ('suboffsets', ctypes.c_void_p),
        ('internal', ctypes.c_void_p),
    )


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
            new_array = ctypes.pythonapi.PyByteArray_FromStringAndSize
            new_array.restype = ctypes.py_object
            new_array.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
            get_buffer = ctypes.pythonapi.PyObject_GetBuffer
            get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
            get_buffer.restype = ctypes.c_int
            release = ctypes.pythonapi.PyBuffer_Release
            release.argtypes = [ctypes.POINTER(_PyBuffer)]
            release.restype = None
            probe = new(b'tether', 6)
            ok = (ctypes.c_char * 6).from_address(id(probe) + offset).raw == b'tether'
            ok = ok and len(new_array(None, 3)) == 3
            _state.update(new=new, new_array=new_array, madvise=madvise, offset=offset)
            _state.update(get_buffer=get_buffer, release=release)
            ok = ok and _copied(memoryview(b'xtether')[1:].toreadonly()) == b'tether'
        except (AttributeError, BufferError, OSError, TypeError, ValueError):
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


def empty_bytearray(nbytes: int) -> bytearray:
    """Return a ``bytearray`` of ``nbytes`` whose content is not initialised.

    For receive buffers that are filled completely before anyone reads them.
    """
    if nbytes < _GIL_FREE_MIN or not _setup():
        return bytearray(nbytes)
    out: bytearray = _state['new_array'](None, nbytes)
    return out


def empty_bytes(nbytes: int) -> tuple[bytes, memoryview] | None:
    """Return a new ``bytes`` of ``nbytes`` whose content is not initialised, and a
    writable view of its memory; ``None`` for small sizes or where this is not possible.

    For a receiver that reads a payload straight into the object it returns, instead of
    into a buffer that it then copies into a new ``bytes`` (at 100 MB, the copy and the
    fresh pages it faults in cost ~60 ms). The caller must fill all of it, through the
    view, before anyone else sees the object, and must not use the view afterwards.
    """
    if nbytes < _GIL_FREE_MIN or not _setup():
        return None
    out: bytes = _state['new'](None, nbytes)
    view = memoryview((ctypes.c_char * nbytes).from_address(id(out) + _state['offset']))
    return out, view.cast('B')


def copy_to_bytes(view: memoryview) -> bytes:
    """Return ``view``'s bytes as a new ``bytes``, copied with the GIL released.

    Read-only views too (memory lent by a connector): the source address comes from the
    buffer protocol (``PyObject_GetBuffer``), which also keeps the memory from being
    released during the copy. Falls back to ``view.tobytes()`` for small or
    non-contiguous views.
    """
    nbytes = view.nbytes
    if nbytes < _GIL_FREE_MIN or not view.c_contiguous or not _setup():
        return view.tobytes()
    return _copied(view)


def _copied(view: memoryview) -> bytes:
    nbytes = view.nbytes
    out: bytes = _state['new'](None, nbytes)
    buffer = _PyBuffer()
    _state['get_buffer'](view, ctypes.byref(buffer), 0)  # PyBUF_SIMPLE; raises on failure
    try:
        if buffer.len != nbytes or not buffer.buf:
            raise ValueError(f'buffer of {buffer.len} bytes, expected {nbytes}')
        ctypes.memmove(id(out) + _state['offset'], buffer.buf, nbytes)  # GIL released
    finally:
        _state['release'](ctypes.byref(buffer))
    return out
