"""Cut-through forwarding: a large object's bytes go on to the next hop as they arrive.

An endpoint that forwards a ``PUT`` of a large object to its owner, or the owner's reply
to a ``GET``, does not wait for the whole object: the head goes out as soon as the
incoming frame's head is read, and every received chunk is written on at once. Reading
the incoming side pauses while the outgoing side is backed up, so an endpoint holds at
most a few megabytes of a forwarded object, whatever its size.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from tether._wire import Connection
from tether.exceptions import WireError

__all__ = ['Pipe', 'PipeSlice', 'pipe_of']

_HIGH = 8 << 20
"""Bytes queued on the outgoing transport above which the incoming one is paused."""


def _buffered(transport: asyncio.Transport) -> int:
    try:
        return transport.get_write_buffer_size()
    except NotImplementedError:
        return 0


class Pipe:
    """The payload bytes of one frame, written through to another connection.

    Args:
        out: Where the bytes go (its head has been written already).
        src: The connection they come from, paused while ``out`` is backed up (and
            then not timed out as a stalled frame).
        on_abort: Called once if the frame is abandoned (after ``out`` is dropped).

    Attributes:
        failed: Why the bytes could not all be passed on (``None``: they were).
        request_id: The id of the forwarded request on ``out`` (``PUT`` direction).
    """

    def __init__(
        self,
        out: Connection,
        src: Connection,
        on_abort: Callable[[], None] | None = None,
    ) -> None:
        self.out = out
        self.src = src
        self._on_abort = on_abort
        self.failed: str | None = None
        self.request_id = 0
        self._paused = False

    def sinks(self, sizes: tuple[int, ...]) -> list[PipeSlice]:
        """One sink per payload; they share this pipe, in order."""
        return [PipeSlice(self, n) for n in sizes]

    def write(self, data: memoryview) -> None:
        """Pass on the next received bytes (copied: the caller reuses its buffer)."""
        if self.failed is not None:
            return
        transport = self.out.transport
        if transport.is_closing():
            self.failed = f'the connection to {self.out.peer} closed'
            return
        transport.write(bytes(data))
        if not self._paused and _buffered(transport) > _HIGH:
            self._paused = True
            self.src.protocol.held = True
            self.src.transport.pause_reading()
            asyncio.get_running_loop().create_task(self._resume())

    async def _resume(self) -> None:
        with contextlib.suppress(WireError, OSError):
            await self.out.protocol.drain()
        self._paused = False
        self.src.protocol.held = False
        if not self.src.transport.is_closing():
            self.src.transport.resume_reading()

    def abort(self) -> None:
        """The frame will not complete: drop the outgoing connection (mid-frame)."""
        self.failed = self.failed or 'the incoming frame was abandoned'
        self.out.abort()
        on_abort, self._on_abort = self._on_abort, None
        if on_abort is not None:
            on_abort()


class PipeSlice:
    """A :class:`~tether._wire._proto.PayloadSink` for one payload of a piped frame."""

    def __init__(self, pipe: Pipe, size: int) -> None:
        self.pipe = pipe
        self.size = size

    def __len__(self) -> int:
        return self.size

    def write(self, data: memoryview) -> None:
        self.pipe.write(data)

    def abort(self) -> None:
        self.pipe.abort()


def pipe_of(payloads: list[Any]) -> Pipe | None:
    """The pipe a frame's payloads were routed into, if they were."""
    if payloads and isinstance(payloads[0], PipeSlice):
        return payloads[0].pipe
    return None
