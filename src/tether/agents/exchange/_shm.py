"""Large values between processes of one host: reusable shared-memory slots, by reference.

A sender copies each large payload of a direct message into a *slot*: an anonymous
shared-memory file (``memfd``) of its own process, mapped once and reused for later
messages, so its pages are already in memory (fresh pages are what makes a new
shared-memory segment per value slow: on a VM they cost several microseconds each, tens
of milliseconds for 10 MB). The message names the slot (sender pid, file descriptor,
the process's random token, the slot's serial number and the size); the receiver opens
it through ``/proc/<pid>/fd/<fd>``, checks that the file is that slot (its memfd name
carries the token and the serial), keeps the mapping for the next message in the same
slot, and copies the bytes out while it decodes the message, before acknowledging it.
The sender reuses a slot once the message is acknowledged, or after rerouting it.

Slots die with their process (a memfd has no name in ``/dev/shm``), so nothing leaks when
a process is killed. Only authenticated direct links carry slot references: a reference
in a message that came through Redis is refused like any other invalid value.
"""

from __future__ import annotations

import collections
import contextlib
import mmap
import os
import re
import secrets
import threading
import time
from typing import Any

from tether.exceptions import MessageRejectedError

__all__ = ['Arena', 'MappedReader', 'Slot', 'identity']

_NAME = 'tether-agents-'
_TOKEN = re.compile(r'[0-9a-f]{16,64}')
_MIN_SLOT = 1 << 16
_POOL_BYTES = 256 << 20
"""Most bytes of free slots a process keeps for reuse (more are closed)."""
_INFLIGHT_BYTES = 1 << 30
"""Most bytes of slots in flight; beyond that, values go through the store instead."""
_MAPPINGS = 64
"""Most slot mappings a receiver keeps open."""
_MAPPED_BYTES = 1 << 30
"""Most bytes of slot mappings a receiver keeps open (the newest is always kept)."""

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


class Slot:
    """One reusable shared-memory file of the sending process."""

    __slots__ = ('capacity', 'fd', 'freed', 'mm', 'serial', 'size')

    def __init__(self, token: str, serial: int, capacity: int) -> None:
        self.serial = serial
        self.capacity = capacity
        self.size = 0
        self.freed = 0.0
        self.fd = os.memfd_create(f'{_NAME}{token}-{serial}', os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, capacity)
            self.mm = mmap.mmap(self.fd, capacity)
        except BaseException:
            os.close(self.fd)
            raise

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self.mm.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Arena:
    """The slots of one process (thread-safe).

    Args:
        pool_bytes: Most bytes of free slots kept for reuse.
        inflight_bytes: Most bytes of slots in use; :meth:`take` returns ``None`` beyond.
    """

    def __init__(
        self, *, pool_bytes: int = _POOL_BYTES, inflight_bytes: int = _INFLIGHT_BYTES
    ) -> None:
        self.token = secrets.token_hex(8)
        self.pid = os.getpid()
        self.pool_bytes = pool_bytes
        self.inflight_bytes = inflight_bytes
        self._free: dict[int, list[Slot]] = collections.defaultdict(list)
        self._pooled = 0
        self._inflight = 0
        self._serial = 0
        self._lock = threading.Lock()
        self.closed = False

    def take(self, nbytes: int) -> Slot | None:
        """A slot of at least ``nbytes`` (``None`` when too much is in flight)."""
        capacity = max(_MIN_SLOT, 1 << (nbytes - 1).bit_length())
        with self._lock:
            if self.closed or self._inflight + capacity > self.inflight_bytes:
                return None
            free = self._free.get(capacity)
            if free:
                slot = free.pop()
                self._pooled -= capacity
            else:
                self._serial += 1
                slot = None
                serial = self._serial
            self._inflight += capacity
        if slot is None:
            try:
                slot = Slot(self.token, serial, capacity)
            except OSError:
                with self._lock:
                    self._inflight -= capacity
                return None
        return slot

    def write(self, payload: Any) -> Slot | None:
        """Copy ``payload`` (bytes-like) into a slot; ``None`` if no slot is available."""
        view = memoryview(payload).cast('B')
        slot = self.take(view.nbytes)
        if slot is None:
            return None
        slot.mm[: view.nbytes] = view
        slot.size = view.nbytes
        return slot

    def ref(self, index: int, slot: Slot) -> list[Any]:
        """What a message carries for payload ``index`` held in ``slot``."""
        return [index, self.pid, slot.fd, self.token, slot.serial, slot.size]

    def release(self, slots: list[Slot]) -> None:
        """Give slots back (their message was acknowledged or rerouted)."""
        closing = []
        now = time.monotonic()
        with self._lock:
            for slot in slots:
                self._inflight -= slot.capacity
                if not self.closed and self._pooled + slot.capacity <= self.pool_bytes:
                    slot.freed = now
                    self._free[slot.capacity].append(slot)
                    self._pooled += slot.capacity
                else:
                    closing.append(slot)
        for slot in closing:
            slot.close()

    def trim(self, idle: float) -> int:
        """Close the free slots unused for ``idle`` seconds (their memory goes back).

        Returns:
            How many bytes of slots were closed.
        """
        limit = time.monotonic() - idle
        closing = []
        with self._lock:
            for free in self._free.values():
                keep = [s for s in free if s.freed > limit]
                closing += [s for s in free if s.freed <= limit]
                free[:] = keep
            freed = sum(s.capacity for s in closing)
            self._pooled -= freed
        for slot in closing:
            slot.close()
        return freed

    def close(self) -> None:
        """Close every free slot (slots in flight are closed when released)."""
        with self._lock:
            self.closed = True
            free = [s for slots in self._free.values() for s in slots]
            self._free.clear()
            self._pooled = 0
        for slot in free:
            slot.close()


class MappedReader:
    """The receiving side: maps senders' slots (kept for reuse) and reads payloads.

    Used from one thread (the exchange server's event loop).

    Args:
        max_bytes: Largest total of the slot payloads of one message.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._maps: collections.OrderedDict[tuple[int, int, str, int], tuple[mmap.mmap, int]]
        self._maps = collections.OrderedDict()
        self._mapped = 0

    def payloads(self, refs: Any, payloads: list[Any]) -> list[Any]:
        """Return ``payloads`` with each referenced one replaced by a view of its slot.

        The views are valid until the message is acknowledged: decode (which copies) first.

        Raises:
            MessageRejectedError: if a reference is not valid or its slot cannot be read.
        """
        if not isinstance(refs, list) or len(refs) > len(payloads):
            raise MessageRejectedError('message carries invalid shared-memory references')
        out = list(payloads)
        total = 0
        for ref in refs:
            if (
                not isinstance(ref, list)
                or len(ref) != 6
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in ref[:3])
                or not isinstance(ref[3], str)
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in ref[4:])
            ):
                raise MessageRejectedError('message carries an invalid shared-memory reference')
            index, pid, fd, token, serial, size = ref
            if not 0 <= index < len(out) or len(out[index]) != 0 or size < 0:
                raise MessageRejectedError('message carries an invalid shared-memory reference')
            total += size
            if total > self.max_bytes:
                raise MessageRejectedError(
                    f'message carries {total} bytes in shared memory, over the limit of '
                    f'{self.max_bytes}',
                )
            mm, capacity = self._map(pid, fd, token, serial)
            if size > capacity:
                raise MessageRejectedError('shared-memory reference is larger than its slot')
            out[index] = memoryview(mm)[:size]
        return out

    def _map(self, pid: int, fd: int, token: str, serial: int) -> tuple[mmap.mmap, int]:
        key = (pid, fd, token, serial)
        found = self._maps.get(key)
        if found is not None:
            self._maps.move_to_end(key)
            return found
        if not _TOKEN.fullmatch(token) or pid <= 0 or fd < 0 or serial <= 0:
            raise MessageRejectedError('message carries an invalid shared-memory reference')
        try:
            opened = os.open(f'/proc/{pid}/fd/{fd}', os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise MessageRejectedError(f"cannot open the sender's shared memory: {e}") from e
        try:
            # The file opened must be that slot: a memfd named with the token and serial.
            name = os.readlink(f'/proc/self/fd/{opened}')
            if name != f'/memfd:{_NAME}{token}-{serial} (deleted)':
                raise MessageRejectedError('shared-memory reference names another file')
            capacity = os.fstat(opened).st_size
            if capacity <= 0:
                raise MessageRejectedError('shared-memory reference names an empty file')
            flags = mmap.MAP_SHARED | getattr(mmap, 'MAP_POPULATE', 0)
            mm = mmap.mmap(opened, capacity, flags=flags, prot=mmap.PROT_READ)
        except OSError as e:
            raise MessageRejectedError(f"cannot map the sender's shared memory: {e}") from e
        finally:
            os.close(opened)
        self._maps[key] = (mm, capacity)
        self._mapped += capacity
        while len(self._maps) > 1 and (
            len(self._maps) > _MAPPINGS or self._mapped > _MAPPED_BYTES
        ):
            _, (old, size) = self._maps.popitem(last=False)
            self._mapped -= size
            with contextlib.suppress(BufferError):
                old.close()
        return mm, capacity

    def close(self) -> None:
        """Unmap every slot."""
        maps, self._maps = self._maps, collections.OrderedDict()
        self._mapped = 0
        for mm, _ in maps.values():
            with contextlib.suppress(BufferError):
                mm.close()
