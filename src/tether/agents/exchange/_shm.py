"""Large values between processes of one host: reusable shared-memory slots, by reference.

A sender copies each large payload of a direct message into a *slot* of the anonymous
backing of :mod:`tether._shm` (a ``memfd`` of its own process, mapped once and reused
for later messages, so its pages are already in memory: fresh pages are what makes a
new shared-memory segment per value slow, tens of milliseconds for 10 MB on a VM). The
message names the slot (sender pid, file descriptor, the process's random token, the
slot's serial number and the size); the receiver opens it through
``/proc/<pid>/fd/<fd>``, checks that the file is that slot, keeps the mapping for the
next message in the same slot, and copies the bytes out while it decodes the message,
before acknowledging it. The sender reuses a slot once the message is acknowledged, or
after rerouting it.

Slots die with their process (a memfd has no name in ``/dev/shm``), so nothing leaks when
a process is killed. Only authenticated direct links carry slot references: a reference
in a message that came through Redis is refused like any other invalid value.
"""

from __future__ import annotations

from typing import Any

from tether._shm.memfd import MemfdPool, MemfdSlot, PeerMappings, identity
from tether.exceptions import ConnectorError, MessageRejectedError

__all__ = ['Arena', 'MappedReader', 'Slot', 'identity']

_NAME = 'tether-agents-'
_MIN_SLOT = 1 << 16
_POOL_BYTES = 256 << 20
"""Most bytes of free slots a process keeps for reuse (more are closed)."""
_INFLIGHT_BYTES = 1 << 30
"""Most bytes of slots in flight; beyond that, values go through the store instead."""
_MAPPINGS = 64
"""Most slot mappings a receiver keeps open."""
_MAPPED_BYTES = 1 << 30
"""Most bytes of slot mappings a receiver keeps open (the newest is always kept)."""

Slot = MemfdSlot


class Arena(MemfdPool):
    """The slots of one process (thread-safe): a :class:`~tether._shm.memfd.MemfdPool` of
    slots named for the agents.

    :meth:`write` raises :class:`~tether.exceptions.ConnectorError` when too much is in
    flight (the sender then sends the value through the store).

    Args:
        pool_bytes: Most bytes of free slots kept for reuse.
        inflight_bytes: Most bytes of slots in use.
    """

    def __init__(
        self, *, pool_bytes: int = _POOL_BYTES, inflight_bytes: int = _INFLIGHT_BYTES
    ) -> None:
        super().__init__(
            _NAME, kept_bytes=pool_bytes, inflight_bytes=inflight_bytes, minimum=_MIN_SLOT
        )

    def ref(self, index: int, slot: Slot) -> list[Any]:
        """What a message carries for payload ``index`` held in ``slot``."""
        return [index, self.pid, slot.fd, self.token, slot.serial, slot.size]

    def release(self, slots: list[Slot]) -> None:
        """Give slots back (their message was acknowledged or rerouted)."""
        self.give(slots)


class MappedReader:
    """The receiving side: maps senders' slots (kept for reuse) and reads payloads.

    Args:
        max_bytes: Largest total of the slot payloads of one message.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.mappings = PeerMappings(_NAME, entries=_MAPPINGS, nbytes=_MAPPED_BYTES)

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
            try:
                mm, capacity = self.mappings.map(pid, fd, token, serial)
            except ConnectorError as e:
                raise MessageRejectedError(str(e)) from e
            if size > capacity:
                raise MessageRejectedError('shared-memory reference is larger than its slot')
            out[index] = memoryview(mm)[:size]
        return out

    def close(self) -> None:
        """Unmap every slot."""
        self.mappings.close()
