"""The anonymous backing: slots that are ``memfd`` files of the process that owns them.

A slot is an anonymous shared-memory file (``memfd``) of its process, named
``tether-<token>-<serial>`` (the process's random token, the slot's serial number),
mapped once and reused for later values (:class:`MemfdPool`). Another process of the
same boot, PID namespace and user (:func:`identity`) opens it through
``/proc/<pid>/fd/<fd>`` (:func:`open_peer`), which checks that the file is that slot
(its memfd name), and keeps the mapping for the next value in the same slot
(:class:`PeerMappings`).

A slot has no name in ``/dev/shm``, so nothing leaks when its process is killed: the
kernel frees it with the process's last open file and the readers' last mapping.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import secrets
from typing import Any

from tether._shm.maps import MappingCache
from tether._shm.pool import SlotPool
from tether.exceptions import ConnectorError

__all__ = ['MemfdPool', 'MemfdSlot', 'PeerMappings', 'identity', 'open_peer']

_TOKEN = re.compile(r'[0-9a-f]{16,64}')

_identity: str | None = None


def identity() -> str:
    """Who can open this process's slots: the same boot, PID namespace and user.

    Empty when this process cannot tell (no ``memfd``, no ``/proc``): it then never
    offers slots.
    """
    global _identity
    if _identity is None:
        try:
            with open('/proc/sys/kernel/random/boot_id') as f:
                boot = f.read().strip()
            pidns = os.readlink('/proc/self/ns/pid')
            _identity = f'{boot}/{pidns}/{os.getuid()}' if hasattr(os, 'memfd_create') else ''
        except OSError:
            _identity = ''
        _identity = re.sub(r'\s', '', _identity)
    return _identity


def _name(prefix: str, token: str, serial: int) -> str:
    return f'{prefix}{token}-{serial}'


class MemfdSlot:
    """One reusable ``memfd`` of this process, mapped read-write."""

    __slots__ = ('capacity', 'fd', 'freed', 'mm', 'serial', 'size')

    def __init__(self, name: str, serial: int, capacity: int) -> None:
        self.serial = serial
        self.capacity = capacity
        self.size = 0
        self.freed = 0.0
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, capacity)
            self.mm = mmap.mmap(self.fd, capacity)
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        """Unmap and close it (its memory goes once no reader maps it)."""
        with contextlib.suppress(BufferError, ValueError):
            self.mm.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class MemfdPool(SlotPool[MemfdSlot]):
    """The ``memfd`` slots of this process (a :class:`~tether._shm.pool.SlotPool`).

    Args:
        prefix: Starts the memfd name of every slot (says whose slots they are).
        kept_bytes: Most bytes of free slots kept for reuse.
        inflight_bytes: Most bytes of slots in use.
        minimum: The smallest slot.
    """

    def __init__(self, prefix: str, *, kept_bytes: int, inflight_bytes: int, minimum: int) -> None:
        self.prefix = prefix
        self.token = secrets.token_hex(8)
        super().__init__(
            self._new_slot,
            kept_bytes=kept_bytes,
            inflight_bytes=inflight_bytes,
            minimum=minimum,
        )

    def _new_slot(self, serial: int, capacity: int) -> MemfdSlot:
        return MemfdSlot(_name(self.prefix, self.token, serial), serial, capacity)

    def write(self, payload: Any) -> MemfdSlot:
        """Copy ``payload`` (bytes-like) into a slot taken for it.

        Raises:
            ConnectorError: if no slot can be taken (see :meth:`SlotPool.take`).
        """
        view = memoryview(payload).cast('B')
        slot = self.take(view.nbytes)
        slot.mm[: view.nbytes] = view
        slot.size = view.nbytes
        return slot


def open_peer(prefix: str, pid: int, fd: int, token: str, serial: int) -> tuple[mmap.mmap, int]:
    """Map (read-only) the slot ``serial`` of process ``pid`` (token ``token``), open there
    as ``fd``; return the mapping and the slot's capacity.

    Raises:
        ConnectorError: if the reference is not valid, names any other file than that
            slot, or the slot cannot be opened or mapped (its process is gone ...).
    """
    if not _TOKEN.fullmatch(token) or pid <= 0 or fd < 0 or serial <= 0:
        raise ConnectorError('invalid shared-memory reference')
    try:
        opened = os.open(f'/proc/{pid}/fd/{fd}', os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise ConnectorError(f"cannot open the sender's shared memory: {e}") from e
    try:
        # The file opened must be that slot: a memfd named with the token and serial.
        name = os.readlink(f'/proc/self/fd/{opened}')
        if name != f'/memfd:{_name(prefix, token, serial)} (deleted)':
            raise ConnectorError('shared-memory reference names another file')
        capacity = os.fstat(opened).st_size
        if capacity <= 0:
            raise ConnectorError('shared-memory reference names an empty file')
        flags = mmap.MAP_SHARED | getattr(mmap, 'MAP_POPULATE', 0)
        mm = mmap.mmap(opened, capacity, flags=flags, prot=mmap.PROT_READ)
    except OSError as e:
        raise ConnectorError(f"cannot map the sender's shared memory: {e}") from e
    finally:
        os.close(opened)
    return mm, capacity


_Mapped = tuple[mmap.mmap, int]


def _unmap(entry: _Mapped) -> None:
    with contextlib.suppress(BufferError):
        entry[0].close()


class PeerMappings:
    """The mappings a reader keeps of other processes' slots (the newest always kept).

    Args:
        prefix: The memfd name prefix of the slots (as :class:`MemfdPool`'s).
        entries: Most mappings kept.
        nbytes: Most bytes of mappings kept.
    """

    def __init__(self, prefix: str, *, entries: int, nbytes: int) -> None:
        self.prefix = prefix
        self.cache: MappingCache[tuple[int, int, str, int], _Mapped] = MappingCache(
            entries=entries, nbytes=nbytes, size=lambda e: e[1], close=_unmap, keep_newest=True
        )

    def map(self, pid: int, fd: int, token: str, serial: int) -> _Mapped:
        """The mapping of a slot and its capacity (kept for the next use).

        Raises:
            ConnectorError: as :func:`open_peer`.
        """
        key = (pid, fd, token, serial)
        found = self.cache.get(key)
        if found is None:
            found = open_peer(self.prefix, pid, fd, token, serial)
            self.cache.keep(key, found)
        return found

    def close(self) -> None:
        """Unmap every slot."""
        self.cache.clear()
