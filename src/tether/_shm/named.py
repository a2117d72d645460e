"""The named backing: reusable segments in ``/dev/shm`` that any process of the host opens.

Writing an object into a new tmpfs file costs more than copying it: the kernel allocates
and zeroes every 4 KB page as it is first written (about 5 ms for 10 MB on a VM) and
frees them all again when the file is unlinked. So a large object lives in a *pooled*
segment: evicting it moves the segment into a pool directory (the shared-memory
connector's is ``/dev/shm/tether-<namespace>-pool``) instead of unlinking it, and a later
large put of the same size class (:func:`tether._shm.pool.size_class`) claims it and
writes over pages already allocated.

A pooled segment starts with a 64-byte header (magic, the 16-byte id of the key it holds,
the object's size, and a word that is non-zero while the object is still being written);
the object follows it, and the rest of the segment is a sparse tail. Reuse is safe
because of two rules:

* A reader takes a shared ``flock`` on the segment before it reads the header, and keeps
  it for as long as it maps the segment (the lock belongs to the open file, which the
  mapping holds). It returns nothing unless the header names its own key.
* A writer claims a pool entry by renaming it to a name of its own, then writes only
  under an exclusive lock taken without waiting; if a reader still holds the segment, the
  writer unlinks it instead (its memory goes when the reader unmaps) and moves on.

So a reader never sees another key's bytes: either it locked first (no writer can touch
the segment until its mapping is gone) or a writer did (the reader then fails to lock,
or finds another key's id in the header).

A *background* write (:func:`begin_write`) gives the segment its key's name before the
object is copied: the writer locks it exclusively, writes the header with the *pending*
word set, renames it to the key's name and returns; the copy runs later (in another
thread), and the writer clears the pending word after it, then unlocks. A reader that
cannot lock a segment that its key still names (so not evicted: evicting renames it) and
whose header names that key waits for the lock (up to a timeout); under the lock, it
reads only if the header still names its key and the word is clear. A writer
that dies mid-copy releases the lock (the kernel drops it with the process) but leaves
the word set, so its readers fail with a clear error instead of reading a partial object.
Any other segment is only locked exclusively while it has a private name, never while
it is reachable through a key.

Pool entries are named ``<capacity>-<pid>-<id>``, the pid being the process that evicted
the object. A process removes its own entries at exit, :meth:`SharedMemoryConnector.close
<tether.connectors.shared_memory.SharedMemoryConnector.close>` empties the pool, and the
namespace's cleanups remove it with the rest; the entries of a killed process stay until
one of those (or a put that claims them). Unlike the anonymous backing
(:mod:`tether._shm.memfd`), a named segment outlives its writer: that is its purpose (a
key read by processes that never met the writer, after it exited), so what a killed
writer leaves is removed by a cleanup, not by the kernel.

The segment's key (its name) and the ``ident`` its header carries are the caller's: the
shared-memory connector derives both from its keys (:mod:`tether.connectors._shm_pool`).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

from tether._atomic import Replacing
from tether._shm import maps as _shm_maps
from tether._shm.pool import fits, size_class
from tether.exceptions import ConnectorError
from tether.serialize import BytesLike

__all__ = [
    'HEADER_SIZE',
    'MAX_ENTRIES',
    'WAIT_TIMEOUT',
    'begin_write',
    'capacity',
    'drain',
    'is_full',
    'lend',
    'open_segment',
    'read',
    'release',
    'write',
]

HEADER_SIZE = 64
"""Bytes before the object (a multiple of 64, so arrays on the mapping stay aligned)."""
MAX_ENTRIES = 64
"""Most segments in one pool (more are unlinked on evict), so listing it stays cheap."""

WAIT_TIMEOUT = 60.0
"""Seconds a reader waits for a background write of its object to complete."""

_HEADER = struct.Struct('<8s16sQQ')
_MAGIC = b'tethSHM1'
_PENDING = 1
"""The header's last word while a background write copies the object (0: complete)."""
_PENDING_AT = struct.calcsize('<8s16sQ')
_WAIT_SHORT = 0.0002
"""Longest sleep between two tries of a reader waiting for a background write, for the
first :data:`_WAIT_LONG_AFTER` seconds (a copy of a few MB: a late wake-up costs little)."""
_WAIT_LONG = 0.005
_WAIT_LONG_AFTER = 0.05
_TRIES = 4

R = TypeVar('R')

_owned_lock = threading.Lock()
_owned: set[str] = set()
"""Pool directories this process evicted into: their entries of this pid go at exit."""
_at_exit: list[bool] = []


def capacity(nbytes: int) -> int:
    """The size class of a segment holding an object of ``nbytes`` after its header."""
    return size_class(nbytes, header=HEADER_SIZE)


def _new_id() -> str:
    return os.urandom(16).hex()


def _entries(pool: str) -> list[str]:
    try:
        return os.listdir(pool)
    except FileNotFoundError:
        return []


def _entry_capacity(entry: str) -> int:
    head = entry.partition('-')[0]
    return int(head) if head.isdigit() else 0


def _claim(pool: str, cap: int, tmp: str) -> int | None:
    """Rename a free segment of ``cap`` bytes to ``tmp``; return it locked, or ``None``."""
    tries = 0
    for entry in _entries(pool):
        if _entry_capacity(entry) != cap:
            continue
        if tries == _TRIES:
            break
        tries += 1
        try:
            os.rename(os.path.join(pool, entry), tmp)
        except FileNotFoundError:
            continue  # another writer claimed it first
        try:
            fd = os.open(tmp, os.O_RDWR)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            # A reader still maps it: never write it; its memory goes when they unmap.
            os.close(fd)
            with contextlib.suppress(OSError):
                os.remove(tmp)
            continue
        if os.fstat(fd).st_size != cap:  # not a segment this module made
            os.close(fd)
            with contextlib.suppress(OSError):
                os.remove(tmp)
            continue
        return fd
    return None


def _write_all(fd: int, buffers: list[memoryview], offset: int = 0) -> None:
    while buffers:
        n = os.pwritev(fd, buffers, offset)
        offset += n
        while buffers and n >= buffers[0].nbytes:
            n -= buffers[0].nbytes
            buffers.pop(0)
        if buffers and n:
            buffers[0] = buffers[0][n:]


def _header(ident: bytes, size: int, *, pending: bool) -> bytes:
    state = _PENDING if pending else 0
    return _HEADER.pack(_MAGIC, ident, size, state).ljust(HEADER_SIZE, b'\0')


class _Locked(NamedTuple):
    fd: int
    tmp: str
    fresh: bool
    views: list[memoryview]
    size: int
    cap: int


def _lock_segment(pool: str, path: str, parts: Sequence[BytesLike]) -> _Locked:
    """A segment for the concatenation of ``parts``, exclusively locked under a private
    name: claimed from the pool, else new. Returns its open file, its name, whether it is
    new, the parts as byte views, their size and the segment's size class."""
    views = [memoryview(p).cast('B') for p in parts]
    size = sum(v.nbytes for v in views)
    cap = capacity(size)
    tmp = f'{path}.{_new_id()[:12]}.tmp'
    _shm_maps.prune()
    fd = _claim(pool, cap, tmp)
    if fd is not None:
        return _Locked(fd, tmp, False, views, size, cap)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return _Locked(fd, tmp, True, views, size, cap)


def begin_write(
    path: str, pool: str, ident: bytes, parts: Sequence[BytesLike]
) -> Callable[[], None]:
    """Start writing the concatenation of ``parts`` as the pooled object at ``path``.

    Claims or creates the segment, locks it exclusively, writes its header marked
    *pending* and renames it to ``path``: from then on the key exists, and its readers
    wait (see the module docstring). Returns the function that copies the object and
    completes it (clears the pending word, then unlocks); it may run in another thread,
    and must run exactly once. ``parts`` must not change until it has returned.

    Raises:
        OSError: if the segment cannot be created or named (``/dev/shm`` full ...).
    """
    fd, tmp, fresh, views, size, cap = _lock_segment(pool, path, parts)
    header = _header(ident, size, pending=True)
    try:
        try:
            os.pwrite(fd, header, 0)
            if fresh:
                os.ftruncate(fd, cap)  # sparse: the copy allocates the object's pages
            os.rename(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
    except BaseException:
        os.close(fd)
        raise

    def finish() -> None:
        try:
            if fresh:
                _write_all(fd, list(views), HEADER_SIZE)
            else:
                # Through the mapping this process keeps of the segment; the path may
                # have been evicted meanwhile, so the mapping is made through the fd.
                _shm_maps.write(f'/proc/self/fd/{fd}', fd, [memoryview(header), *views])
            # Last: a reader that gets the lock without this (the writer died or
            # failed) reads nothing.
            os.pwrite(fd, bytes(8), _PENDING_AT)
        except BaseException:
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    os.remove(path)  # its readers now find nothing, or fail on the word
            raise
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    return finish


def write(path: str, pool: str, ident: bytes, parts: Sequence[BytesLike]) -> None:
    """Write the concatenation of ``parts`` as the pooled object at ``path``.

    Into a free segment of the pool when there is one of its size class, else into a new
    one; under a private name, renamed to ``path`` when complete.

    Raises:
        OSError: if the segment cannot be created or written (``/dev/shm`` full ...).
    """
    fd, tmp, fresh, views, size, cap = _lock_segment(pool, path, parts)
    with Replacing(fd, tmp, path):
        # The header first: from here on, a reader of the segment's previous key finds
        # another id and reads nothing.
        header = _header(ident, size, pending=False)
        buffers = [memoryview(header), *views]
        if fresh:
            _write_all(fd, buffers)  # allocates the pages as it copies
            os.ftruncate(fd, cap)  # the tail stays sparse until a larger object
        else:
            _shm_maps.write(tmp, fd, buffers)  # over pages this process has mapped
        # Unlocked before it gets a key's name: a reader that cannot lock a segment
        # reached through a key knows that it was evicted and is being rewritten.
        fcntl.flock(fd, fcntl.LOCK_UN)


def open_segment(path: str, name: str) -> int | None:
    """Open a segment for reading; ``None`` if there is none at ``path``.

    Raises:
        ConnectorError: if it exists but cannot be opened.
    """
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConnectorError(f'cannot open shared memory {name!r}: {e}') from e


def _names(fd: int, ident: bytes) -> bool:
    """Whether the segment's header (read without its lock) names the object ``ident``."""
    head = os.pread(fd, _HEADER.size, 0)
    if len(head) < _HEADER.size:
        return False
    magic, stored, _, _ = _HEADER.unpack(head)
    return bool(magic == _MAGIC and stored == ident)


def _wait_shared(fd: int, name: str, timeout: float) -> None:
    """Take the segment's shared lock, waiting for a background write to let go of it."""
    start = time.monotonic()
    deadline = start + timeout
    delay = 0.00002
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise ConnectorError(
                f'shared memory {name!r} is still being written after {timeout:g} s: its '
                'writer holds it (is the process that put it stuck?); raise the '
                "connector's wait_timeout if such large objects need longer",
            )
        time.sleep(min(delay, left))
        longest = _WAIT_SHORT if time.monotonic() - start < _WAIT_LONG_AFTER else _WAIT_LONG
        delay = min(delay * 2, longest)


def _named_by(path: str, fd: int) -> bool:
    """Whether ``path`` is still a name of the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _checked_size(fd: int, path: str, name: str, ident: bytes, timeout: float) -> int | None:
    """Lock the pooled segment open as ``fd`` (shared) and return its object's size.

    ``None`` if the segment no longer holds the object of ``ident`` (evicted, maybe being
    rewritten for another key). If a background write of the object still holds the
    segment, waits for it (up to ``timeout`` seconds). The lock stays until ``fd`` (and
    any mapping made through it) is closed.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        if not _names(fd, ident) or not _named_by(path, fd):
            return None  # evicted, and a writer is rewriting it for another key
        # Locked while its key still names it: a background write of this object, still
        # copying (or done, about to unlock). The header read under the lock tells.
        _wait_shared(fd, name, timeout)
    head = os.pread(fd, _HEADER.size, 0)
    if len(head) < _HEADER.size:
        raise ConnectorError(f'shared memory {name!r} is too short for its header')
    magic, stored, size, state = _HEADER.unpack(head)
    if magic != _MAGIC:
        raise ConnectorError(f'shared memory {name!r} has no tether segment header')
    if stored != ident:
        return None  # evicted, and the segment now holds another object
    if state != 0:
        raise ConnectorError(
            f'shared memory {name!r} holds an incomplete object: the process that put it '
            'died or failed while copying it in the background; put the object again',
        )
    if HEADER_SIZE + size > os.fstat(fd).st_size:
        raise ConnectorError(f'shared memory {name!r} is shorter than its header says')
    return int(size)


def _map(fd: int, size: int) -> memoryview | bytearray:
    if size == 0:
        return bytearray()
    # The mapping keeps the open file, hence the shared lock, until it is unmapped.
    mapping = mmap.mmap(fd, HEADER_SIZE + size, access=mmap.ACCESS_COPY)
    return memoryview(mapping)[HEADER_SIZE:]


def read(
    path: str, name: str, ident: bytes, timeout: float = WAIT_TIMEOUT
) -> memoryview | bytearray | None:
    """Map the pooled object at ``path`` (copy-on-write); ``None`` if it is not there.

    Waits up to ``timeout`` seconds for a background write of the object to complete.

    Raises:
        ConnectorError: if the segment cannot be read or its header is corrupt.
    """
    fd = open_segment(path, name)
    if fd is None:
        return None
    try:
        size = _checked_size(fd, path, name, ident, timeout)
        return None if size is None else _map(fd, size)
    except OSError as e:
        raise ConnectorError(f'cannot map shared memory {name!r}: {e}') from e
    finally:
        os.close(fd)


def lend(
    path: str,
    name: str,
    ident: bytes,
    use: Callable[[memoryview, Callable[[], BytesLike]], R],
    timeout: float = WAIT_TIMEOUT,
) -> tuple[R] | None:
    """Call ``use`` on the pooled object at ``path``, lent; ``None`` if it is not there.

    Waits up to ``timeout`` seconds for a background write of the object to complete.

    ``use(view, keep)`` gets a read-only view of the object in a mapping this process
    keeps (:func:`tether.connectors._shm_maps.lend`), valid during the call only: the
    segment stays locked (shared) until ``use`` returns, and may then be rewritten for
    another object. ``keep()`` returns what :func:`read` would (a copy-on-write mapping
    of the object, which holds the lock for as long as it lives), for a ``use`` that
    needs the object's memory afterwards.

    Raises:
        ConnectorError: if the segment cannot be read or its header is corrupt.
    """
    _shm_maps.prune()
    fd = open_segment(path, name)
    if fd is None:
        return None
    try:
        size = _checked_size(fd, path, name, ident, timeout)
        if size is None:
            return None
        locked = fd
        lent = _shm_maps.lend(
            path, fd, HEADER_SIZE, size, keep=lambda: _map(locked, size), use=use
        )
        return (lent,)
    except OSError as e:
        raise ConnectorError(f'cannot map shared memory {name!r}: {e}') from e
    finally:
        os.close(fd)


def release(path: str, pool: str, pool_bytes: int) -> None:
    """Evict the pooled object at ``path``: into the pool if it has room, else unlink it.

    Raises:
        OSError: if the segment exists but can be neither moved nor removed.
    """
    try:
        cap = os.stat(path).st_size
    except FileNotFoundError:
        return
    entries = _entries(pool)
    held = sum(_entry_capacity(e) for e in entries)
    if pool_bytes and len(entries) < MAX_ENTRIES and fits(held, cap, pool_bytes):
        entry = os.path.join(pool, f'{cap}-{os.getpid()}-{_new_id()}')
        for _ in range(2):
            try:
                os.rename(path, entry)
            except FileNotFoundError:
                if not os.path.exists(path):
                    return  # evicted by someone else meanwhile
                with contextlib.suppress(OSError):
                    os.mkdir(pool, 0o700)
                continue
            except OSError:
                break  # a pool this process cannot use: unlink instead
            with _owned_lock:
                if not _at_exit:
                    atexit.register(_drain_owned)
                    _at_exit.append(True)
                _owned.add(pool)
            return
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def drain(pool: str, pid: int | None = None) -> int:
    """Remove the pool's entries (only those evicted by ``pid`` if given); return how many.

    Removes the pool directory too once it is empty.
    """
    n = 0
    for entry in _entries(pool):
        if pid is not None and entry.split('-')[1:2] != [str(pid)]:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(pool, entry))
            n += 1
    with contextlib.suppress(OSError):
        os.rmdir(pool)  # fails while entries remain (other processes' or new ones)
    return n


def is_full(error: OSError) -> bool:
    """Whether ``error`` says that ``/dev/shm`` has no room left."""
    return error.errno in (errno.ENOSPC, errno.ENOMEM)


def _reset_in_child() -> None:
    # A lock held by another thread at fork time would stay held in the child forever.
    global _owned_lock
    _owned_lock = threading.Lock()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_reset_in_child)


def _drain_owned() -> None:
    with _owned_lock:
        pools = sorted(_owned)
        _owned.clear()
    for pool in pools:
        drain(pool, os.getpid())
