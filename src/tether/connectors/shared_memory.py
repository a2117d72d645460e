"""Connector for POSIX shared memory on one node.

Each object is one shared-memory segment (a file under ``/dev/shm``). A consumer maps the
segment instead of copying it, so resolving a large NumPy array costs microseconds. The
mapping is copy-on-write: a consumer may modify what it resolved without the producer or
other consumers seeing the change, and pages are copied only when written.

Large objects (from 256 KiB) go into reusable segments: evicting one keeps its segment in
the namespace's pool (up to ``pool_bytes``) and a later put of a similar size writes over
its pages, already allocated, instead of making the kernel allocate and zero new ones. A
segment is never reused while a consumer still maps it, and a consumer never reads a
reused segment as the object it asked for (see :mod:`tether._shm.named`).
Objects that are copied as they are read (``bytes``, ``str`` ...) are copied out of a
read-only mapping the reader keeps, lent for the copy (:meth:`SharedMemoryConnector.get_lent`),
instead of a mapping made for each read.

A large object whose bytes cannot change (``bytes``, or buffers the serializer made) can
be written in the background (:meth:`SharedMemoryConnector.put_parts_background`, which
:class:`~tether.store.Store` uses): the key exists at once, and the copy into the segment
runs in a thread of the process (the GIL released) while the caller goes on, for example
sending a task that carries the key. A reader that comes before the copy is complete
waits for it (up to ``wait_timeout``); if the writing process dies first, the reader gets
a :class:`~tether.exceptions.ConnectorError`, never part of the object. :meth:`close
<SharedMemoryConnector.close>` and :meth:`flush <SharedMemoryConnector.flush>` wait for
the process's pending copies, and raise if one failed.

Objects outlive the process that put them, until they are evicted. Leftovers (objects
never evicted, temporaries of writers killed mid-write, pools of killed processes) are
named ``tether-<namespace>-...`` and are removed by :meth:`SharedMemoryConnector.close`
with ``clear=True``, by :func:`cleanup`, or by ``tether shm clean [--namespace NS]``.
Being memory, they also disappear when the machine restarts.

Linux only (``/dev/shm``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, NamedTuple, TypeVar

from tether._atomic import write_and_replace
from tether._shm import maps as _shm_maps
from tether.connectors import _shm_pool
from tether.connectors._keyed import KeyedWrites
from tether.connectors._util import new_id, total_size
from tether.connectors.base import Decode, lent_object
from tether.connectors.config import ConnectorConfigModel
from tether.exceptions import ConnectorError
from tether.serialize import BytesLike

__all__ = [
    'SharedMemoryConnector',
    'SharedMemoryConnectorConfig',
    'SharedMemoryKey',
    'check_namespace',
    'cleanup',
    'segments',
]

SHM_DIR = '/dev/shm'
_PREFIX = 'tether-'
_TMP = '.tmp'
_POOL_BYTES = 256 << 20

R = TypeVar('R')
D = TypeVar('D')


class SharedMemoryKey(NamedTuple):
    """Key of an object in a :class:`SharedMemoryConnector`: the segment's name."""

    name: str


class SharedMemoryConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`SharedMemoryConnector` (see its arguments)."""

    namespace: str = 'default'
    clear: bool = False
    pool_bytes: int = _POOL_BYTES
    background_writes: bool = True
    wait_timeout: float = _shm_pool.WAIT_TIMEOUT


class SharedMemoryConnector(KeyedWrites[SharedMemoryKey]):
    """A connector that stores objects in POSIX shared-memory segments.

    Args:
        namespace: Groups the segments of one application (used by ``clear`` and
            :func:`cleanup`); letters, digits, ``_`` and ``.`` only.
        clear: Remove every segment of the namespace when :meth:`close` is called.
        pool_bytes: Most bytes of evicted large segments the namespace's pool keeps for
            reuse (``0``: none, every evict unlinks).
        background_writes: Let :meth:`put_parts_background` copy large immutable
            objects in a background thread (``False``: it writes them before returning,
            as :meth:`put_parts` does).
        wait_timeout: Seconds a reader waits for the background write of the object it
            reads (then: :class:`~tether.exceptions.ConnectorError`).
    """

    config_model = SharedMemoryConnectorConfig

    def __init__(
        self,
        namespace: str = 'default',
        clear: bool = False,
        pool_bytes: int = _POOL_BYTES,
        background_writes: bool = True,
        wait_timeout: float = _shm_pool.WAIT_TIMEOUT,
    ) -> None:
        if not os.path.isdir(SHM_DIR):
            raise ConnectorError(
                f'SharedMemoryConnector needs {SHM_DIR} (Linux); it was not found',
            )
        check_namespace(namespace)
        if pool_bytes < 0:
            raise ValueError(f'pool_bytes must be at least 0, got {pool_bytes}')
        if not wait_timeout > 0:
            raise ValueError(f'wait_timeout must be more than 0, got {wait_timeout}')
        self.namespace = namespace
        self.clear = clear
        self.pool_bytes = pool_bytes
        self.background_writes = background_writes
        self.wait_timeout = wait_timeout
        self._pool = os.path.join(SHM_DIR, f'{_PREFIX}{namespace}{_shm_pool.POOL_SUFFIX}')
        self._pending_lock = threading.Lock()
        self._pending: dict[str, Future[None]] = {}
        self._pending_pid = os.getpid()
        self._failed: list[tuple[str, BaseException]] = []
        self._settle()

    def __repr__(self) -> str:
        return f'SharedMemoryConnector(namespace={self.namespace!r})'

    def __reduce__(self) -> tuple[type[SharedMemoryConnector], tuple[str, bool, int, bool, float]]:
        # Its settings only: pending background writes belong to this process.
        return (
            type(self),
            (
                self.namespace,
                self.clear,
                self.pool_bytes,
                self.background_writes,
                self.wait_timeout,
            ),
        )

    def _path(self, key: SharedMemoryKey) -> str:
        if '/' in key.name or not key.name.startswith(_PREFIX):
            raise ConnectorError(f'invalid shared-memory key {key!r}')
        return os.path.join(SHM_DIR, key.name)

    def _new_key(self) -> SharedMemoryKey:
        return SharedMemoryKey(f'{_PREFIX}{self.namespace}-{new_id()}')

    def _key_for(self, nbytes: int) -> SharedMemoryKey:
        if self.pool_bytes and nbytes >= _shm_pool.MIN_POOLED:
            return SharedMemoryKey(_shm_pool.new_name(f'{_PREFIX}{self.namespace}-'))
        return self._new_key()

    def put_parts(self, parts: Sequence[BytesLike]) -> SharedMemoryKey:
        """Store the concatenation of ``parts`` (written without joining them first).

        Raises:
            ConnectorError: if the object cannot be written, or if a background write
                of this connector failed since the last check (see :meth:`flush`).
        """
        self._raise_failed()
        key = self._key_for(total_size(parts))
        self._write(key, parts)
        return key

    def put_parts_background(
        self, parts: Sequence[BytesLike]
    ) -> tuple[SharedMemoryKey, Future[None]]:
        """Store the concatenation of ``parts``, copying it in the background if it can.

        Returns the key, which exists at once, and a future that completes when the
        object is written (its exception, if the copy fails, is also raised by the
        connector's next put, :meth:`flush` or :meth:`close`). Readers of the key that
        come before then wait for the copy to complete.

        Only a large object (from 256 KiB) whose parts are all memory of ``bytes``
        objects, which cannot change, is copied in the background; any other (a
        ``bytearray``, a NumPy array, a view of memory its owner may change) is written
        before this returns, and the future is already done.

        Raises:
            ConnectorError: if the segment cannot be created, or if an earlier
                background write failed (as :meth:`put_parts`).
        """
        self._raise_failed()
        key = self._key_for(total_size(parts))
        ident = _shm_pool.key_id(key.name)
        if not self.background_writes or ident is None or not _immutable(parts):
            self._write(key, parts)
            done: Future[None] = Future()
            done.set_result(None)
            return key, done
        finish = self._pooled(_shm_pool.begin_write, key, ident, parts)
        try:
            future = _writer().submit(finish)
        except RuntimeError:  # the interpreter is shutting down: no new threads
            finish()
            done = Future()
            done.set_result(None)
            return key, done
        with self._pending_lock:
            self._forget_parent()
            self._pending[key.name] = future
        future.add_done_callback(lambda done: self._written(key.name, done))
        return key, future

    def _forget_parent(self) -> None:
        """In a forked child, drop the parent's pending copies and failures (hold the
        lock)."""
        if self._pending_pid != os.getpid():
            self._pending.clear()
            self._failed.clear()
            self._pending_pid = os.getpid()

    def _written(self, name: str, future: Future[None]) -> None:
        with self._pending_lock:
            if self._pending.get(name) is future:
                del self._pending[name]
            error = future.exception()
            if error is not None:
                self._failed.append((name, error))

    def _pending_writes(self, name: str | None = None) -> list[Future[None]]:
        """This process's pending background writes (of key ``name`` only, if given)."""
        with self._pending_lock:
            self._forget_parent()
            if name is None:
                return list(self._pending.values())
            future = self._pending.get(name)
            return [] if future is None else [future]

    def _raise_failed(self) -> None:
        with self._pending_lock:
            self._forget_parent()
            failed, self._failed = self._failed, []
        if failed:
            name, error = failed[0]
            more = f' (and {len(failed) - 1} more)' if len(failed) > 1 else ''
            raise ConnectorError(
                f'the background write of shared memory {name!r} failed{more}: {error} '
                '(readers of that key get an error or nothing; put the object again)',
            ) from error

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for this connector's background writes; return whether none is left.

        Raises:
            ConnectorError: if one of them (or one that ended before) failed.
        """
        pending = self._pending_writes()
        left = wait_futures(pending, timeout).not_done if pending else set()
        self._raise_failed()
        return not left

    def new_key(self, data: BytesLike | None = None) -> SharedMemoryKey:
        """Reserve a fresh key; nothing is stored under it until :meth:`set`.

        Given ``data`` (what :meth:`set` will store; not stored now), a large object gets
        a key of a reusable segment.
        """
        return self._new_key() if data is None else self._key_for(memoryview(data).nbytes)

    def close(self, clear: bool | None = None) -> None:
        """Close: empty the namespace's pool; remove every segment too if ``clear``.

        Waits for the connector's background writes first.

        Raises:
            ConnectorError: (after closing) if a background write failed.
        """
        wait_futures(self._pending_writes())
        if self.clear if clear is None else clear:
            cleanup(self.namespace)
        else:
            _shm_pool.drain(self._pool)
        _shm_maps.prune()  # mappings of the segments just removed would keep their memory
        self._raise_failed()

    def evict(self, key: SharedMemoryKey) -> None:
        """Remove the object (processes that mapped it keep their mapping).

        A plain segment is unlinked; a large object's segment goes to the pool, to be
        reused once nobody maps it (or unlinked if the pool is full). Waits for a
        background write of the object by this connector to complete first (a segment
        still being written could not be reused).
        """
        path = self._path(key)
        if self._pending:
            wait_futures(self._pending_writes(key.name))
        try:
            if _shm_pool.key_id(key.name) is None:
                os.remove(path)
            else:
                _shm_pool.release(path, self._pool, self.pool_bytes)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise ConnectorError(f'cannot remove shared memory {key.name!r}: {e}') from e

    def exists(self, key: SharedMemoryKey) -> bool:
        """Return whether ``key`` is stored."""
        return os.path.exists(self._path(key))

    def get(self, key: SharedMemoryKey) -> BytesLike | None:
        """Map the segment (copy-on-write) and return a writable view, or ``None``."""
        path = self._path(key)
        ident = _shm_pool.key_id(key.name)
        if ident is not None:
            return _shm_pool.read(path, key.name, ident, self.wait_timeout)
        fd = _shm_pool.open_segment(path, key.name)
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return bytearray()
            return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_COPY))
        except OSError as e:
            raise ConnectorError(f'cannot map shared memory {key.name!r}: {e}') from e
        finally:
            os.close(fd)

    def get_lent(
        self,
        key: SharedMemoryKey,
        use: Callable[[memoryview, Callable[[], BytesLike]], R],
        default: D,
    ) -> R | D:
        """Return ``use(view, keep)`` for the object under ``key``, or ``default``.

        ``view`` is the object's bytes, read-only and valid only until ``use`` returns.
        For a large object it lies in a mapping of its segment that this process keeps
        (no page faults when the segment comes round again), and the segment stays
        locked until ``use`` returns; then it may be reused for another object, so
        ``use`` must copy what it needs. ``keep()`` returns what :meth:`get` would.
        Like :meth:`get`, waits for a background write of the object to complete.
        """
        ident = _shm_pool.key_id(key.name)
        if ident is None:
            data = self.get(key)
            if data is None:
                return default
            return use(memoryview(data).toreadonly(), lambda: data)
        lent = _shm_pool.lend(self._path(key), key.name, ident, use, self.wait_timeout)
        return default if lent is None else lent[0]

    def get_object(
        self, key: SharedMemoryKey, decode: Decode, own_format: bool
    ) -> tuple[Any, int] | None:
        """The object under ``key``: with tether's serializer, built from lent bytes
        (:meth:`get_lent`) where that saves a copy."""
        if own_format:
            return lent_object(self, key, decode)
        return super().get_object(key, decode, own_format)

    def _write(self, key: SharedMemoryKey, parts: Sequence[BytesLike]) -> None:
        ident = _shm_pool.key_id(key.name)
        if ident is not None:
            self._pooled(_shm_pool.write, key, ident, parts)
            return
        final = self._path(key)
        tmp = f'{final}{_TMP}'
        size = total_size(parts)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise ConnectorError(f'cannot create shared memory {key.name!r}: {e}') from e
        try:
            write_and_replace(fd, tmp, final, parts)
        except OSError as e:
            raise _write_error(key, size, e) from e

    def _pooled(
        self,
        write: Callable[[str, str, bytes, Sequence[BytesLike]], R],
        key: SharedMemoryKey,
        ident: bytes,
        parts: Sequence[BytesLike],
    ) -> R:
        """``write`` (:func:`_shm_pool.write` or ``begin_write``) into the pool's segment."""
        path = self._path(key)
        try:
            try:
                return write(path, self._pool, ident, parts)
            except OSError as e:
                # Free segments kept for reuse may be what fills /dev/shm: drop, retry.
                if not _shm_pool.is_full(e) or not _shm_pool.drain(self._pool):
                    raise
                return write(path, self._pool, ident, parts)
        except OSError as e:
            raise _write_error(key, total_size(parts), e) from e


def _write_error(key: SharedMemoryKey, size: int, e: OSError) -> ConnectorError:
    return ConnectorError(
        f'cannot write {size} bytes to shared memory {key.name!r}: {e} (is {SHM_DIR} full?)'
    )


def _immutable(parts: Sequence[BytesLike]) -> bool:
    """Whether every part is memory of a ``bytes`` object (which nobody can change)."""
    for part in parts:
        if type(part) is bytes:
            continue
        if type(part) is memoryview and type(part.obj) is bytes:
            continue
        return False
    return True


_writer_lock = threading.Lock()
_writers: list[ThreadPoolExecutor] = []


def _writer() -> ThreadPoolExecutor:
    """The process's thread for background writes (interpreter exit waits for it)."""
    with _writer_lock:
        if not _writers:
            _writers.append(ThreadPoolExecutor(1, thread_name_prefix='tether-shm-writer'))
        return _writers[0]


def _forget_writer_in_child() -> None:
    global _writer_lock
    _writer_lock = threading.Lock()
    _writers.clear()  # its thread does not exist in the child


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_forget_writer_in_child)


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is valid (letters, digits, ``_`` and ``.``), else raise.

    Raises:
        ValueError: if it is empty or has any other character (``-``, ``/``, ``*`` ...).
    """
    if not namespace or not all(c.isalnum() or c in '_.' for c in namespace):
        raise ValueError(
            f'invalid shared-memory namespace {namespace!r}: use letters, digits, "_" and "."',
        )
    return namespace


def _pools(namespace: str | None) -> list[str]:
    prefix = _PREFIX if namespace is None else f'{_PREFIX}{check_namespace(namespace)}-'
    return sorted(
        entry.name
        for entry in os.scandir(SHM_DIR)
        if entry.name.startswith(prefix)
        and entry.name.endswith(_shm_pool.POOL_SUFFIX)
        and entry.is_dir(follow_symlinks=False)
    )


def segments(namespace: str | None = None) -> list[tuple[str, int]]:
    """Return ``(name, size)`` of tether's shared-memory segments (of ``namespace``, or all).

    Free segments kept for reuse are listed as ``tether-<namespace>-pool/<entry>``; a
    large object's size is its segment's (a power of two, sparse beyond the object).

    Raises:
        ValueError: if ``namespace`` is not a valid namespace.
    """
    prefix = _PREFIX if namespace is None else f'{_PREFIX}{check_namespace(namespace)}-'
    out: list[tuple[str, int]] = []
    for entry in os.scandir(SHM_DIR):
        if entry.name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                if not entry.is_dir(follow_symlinks=False):
                    out.append((entry.name, entry.stat().st_size))
                elif entry.name.endswith(_shm_pool.POOL_SUFFIX) and os.access(
                    entry.path, os.R_OK | os.X_OK
                ):
                    for sub in os.scandir(entry.path):
                        with contextlib.suppress(FileNotFoundError):
                            out.append((f'{entry.name}/{sub.name}', sub.stat().st_size))
    return sorted(out)


def cleanup(namespace: str | None = None) -> int:
    """Remove tether shared-memory segments (of ``namespace``, or all); return how many.

    Includes the free segments of the namespaces' pools, and the pools' directories.

    Raises:
        ValueError: if ``namespace`` is not a valid namespace.
    """
    n = 0
    for name, _ in segments(namespace):
        try:
            os.remove(os.path.join(SHM_DIR, name))
            n += 1
        except FileNotFoundError:
            pass
    for pool in _pools(namespace):
        n += _shm_pool.drain(os.path.join(SHM_DIR, pool))
    return n
