"""An asyncio ``BufferedProtocol`` that parses frames straight into their final buffers.

The kernel copies each payload directly into the bytearray that the frame will hold
(``recv_into``); nothing is accumulated and sliced the way a ``StreamReader`` would.
Prefixes and headers go through a small scratch buffer.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tether._wire._frame import (
    PREFIX,
    Frame,
    Limits,
    check_sizes,
    decode_header,
    unpack_prefix,
)
from tether.exceptions import (
    FrameTooLargeError,
    ProtocolVersionError,
    WireConnectionError,
    WireError,
)

__all__ = [
    'FAST_MAX',
    'FastFrame',
    'FastPath',
    'FrameMemory',
    'FrameProtocol',
    'FrameRouter',
    'PayloadSink',
]

_SCRATCH = 64 * 1024
_STAGE = 1 << 20
_MAX_QUEUED = 8
FAST_MAX = 64 * 1024
"""Largest frame (head and payloads) offered to a :class:`FastPath`."""


class PayloadSink(Protocol):
    """Where a payload too large for memory is written as it arrives (a spill file)."""

    def __len__(self) -> int:
        """The payload's size."""

    def write(self, data: memoryview) -> None:
        """Append the next received bytes."""


class FrameRouter(Protocol):
    """Decides, from a frame's head, where its payloads go as they arrive (cut-through).

    Called once per frame whose payloads total at least ``FrameProtocol.route_min``
    bytes, as soon as its header is read and before anything is allocated. It returns one
    :class:`PayloadSink` per size (bytes are handed to them as they arrive, through a
    staging buffer that is reused: a sink copies what it keeps), or ``None`` to receive
    the frame into buffers as usual. A sink with an ``abort()`` method is told when its
    frame is abandoned (the connection died or was refused mid-frame, or the frame was
    never handled).
    """

    def __call__(
        self, mtype: int, header: dict[str, Any], request_id: int, sizes: tuple[int, ...]
    ) -> list[Any] | None:
        """Return the sinks of this frame's payloads, or ``None``."""


FastFrame = tuple[int, dict[str, Any], int, tuple[int, ...], memoryview, int]
"""A whole small frame offered to a :data:`FastPath`, straight from the parser's buffer:
``(mtype, header, request_id, sizes, raw, head)``.

``mtype`` is the message type, ``header`` the decoded JSON header, ``request_id`` the
frame's request id, ``sizes`` the length of each payload, ``raw`` the whole frame as
received (prefix, sizes, header and payloads; valid only during the call: copy what you
keep) and ``head`` where the payloads start in ``raw``. A plain tuple, unpacked in one
step: a named tuple's construction and attribute lookups cost the endpoint's forwarding
5% more instructions per request (callgrind).
"""

FastPath = Callable[[FastFrame], bool]
"""May take a whole small frame straight from the parser's buffer (no :class:`Frame`).

Called with every frame of at most :data:`FAST_MAX` bytes, once it is received in full
(such a frame waits in the parser's buffer until it is) and its header is decoded and
checked against the limits, before anything is allocated for it (see :class:`FastFrame`).
Returns ``True`` if the frame was dealt with; ``False`` and it is received and delivered
as usual. The one type of every fast path (servers' and channels').
"""


class FrameMemory(Protocol):
    """Accounts for the memory of frames being received (a server's budget).

    :meth:`allocate` is called once per frame, as soon as its payload sizes are known and
    before anything is allocated; every payload list it returned is given back to
    :meth:`release` exactly once: when the frame has been handled, or when its connection
    died first. On a connection that also has a :class:`FrameRouter`, the frames the
    router took are given to :meth:`release` too: it ignores payloads it did not allocate.
    """

    def allocate(self, sizes: Sequence[int]) -> list[Any]:
        """Return one buffer (or :class:`PayloadSink`) per size; may refuse the frame.

        Raises:
            FrameTooLargeError: if the frame cannot be taken.
        """

    def release(self, payloads: list[Any]) -> None:
        """The frame is done with: stop counting its payloads as in flight."""


class FrameProtocol(asyncio.BufferedProtocol):
    """Frames in (to an internal queue), bytes out (with write flow control).

    Args:
        limits: Limits applied to each frame before anything is allocated.
        version: The protocol version frames must carry (``None``: any, used for the
            first frame of a handshake; :meth:`expect` changes it).
        alloc: Returns a writable buffer of exactly ``n`` bytes for a payload (default:
            ``bytearray``); servers pass a pool so that memory is reused.
        memory: If given, allocates each frame's payloads instead of ``alloc`` and is
            told when each frame is released (see :class:`FrameMemory`).
    """

    def __init__(
        self,
        limits: Limits,
        version: int | None,
        alloc: Callable[[int], bytearray] = bytearray,
        memory: FrameMemory | None = None,
    ) -> None:
        self.limits = limits
        self.version = version
        self.alloc = alloc
        self.memory = memory
        self.router: FrameRouter | None = None
        self.route_min = 1 << 20
        self.fast: FastPath | None = None
        self.held = False
        self.stalled = False
        self._progress = 0
        self._timer: asyncio.TimerHandle | None = None
        self._stage: bytearray | None = None
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(_SCRATCH)
        self._have = 0
        self._frames: collections.deque[Frame] = collections.deque()
        self._on_frame: Callable[[Frame], None] | None = None
        self._on_next: Callable[[Frame | BaseException], None] | None = None
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._write_ready: asyncio.Event = asyncio.Event()
        self._write_ready.set()
        self._closed = False
        self._paused = False
        # State of the frame being read.
        self._frame: Frame | None = None
        self._sizes: tuple[int, ...] = ()
        self._index = 0
        self._pos = 0

    # Transport callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._error is None:
            reason = f': {exc!r}' if exc else ''
            mid = ' in the middle of a frame' if self._frame or self._have else ''
            self._error = WireConnectionError(f'connection closed{mid}{reason}')
        self._wake()
        self._write_ready.set()

    def pause_writing(self) -> None:
        self._write_ready.clear()

    def resume_writing(self) -> None:
        self._write_ready.set()

    def get_buffer(self, sizehint: int) -> Any:
        frame = self._frame
        if frame is not None:
            target = frame.payloads[self._index]
            if isinstance(target, bytearray | memoryview):
                return memoryview(target)[self._pos :]
            # A sink: bytes land in a bounded staging buffer, then go to the sink.
            if self._stage is None:
                self._stage = bytearray(_STAGE)
            return memoryview(self._stage)[: min(_STAGE, len(target) - self._pos)]
        if self._have == len(self._scratch):
            self._grow(2 * len(self._scratch))
        return memoryview(self._scratch)[self._have :]

    def _grow(self, size: int) -> None:
        # A new buffer rather than resizing: the transport may still hold a view of the
        # old one (it does during buffer_updated), and an exported bytearray cannot resize.
        bigger = bytearray(size)
        bigger[: self._have] = memoryview(self._scratch)[: self._have]
        self._scratch = bigger

    def buffer_updated(self, nbytes: int) -> None:
        self._progress += 1
        try:
            frame = self._frame
            if frame is not None:
                target = frame.payloads[self._index]
                if not isinstance(target, bytearray | memoryview):
                    assert self._stage is not None
                    try:
                        target.write(memoryview(self._stage)[:nbytes])
                    except OSError as e:
                        raise FrameTooLargeError(f'cannot write a payload to disk: {e}') from e
                self._pos += nbytes
                self._advance()
            else:
                self._have += nbytes
                self._parse()
        except WireError as e:
            self._fail(e)
        else:
            self._watch()

    # Stalled frames --------------------------------------------------------------------

    def _partial(self) -> bool:
        return self._frame is not None or self._have > 0

    def _watch(self) -> None:
        """Arm the stall timer while a frame is partly received."""
        timeout = self.limits.frame_timeout
        if timeout is None or self._timer is not None or self._closed or not self._partial():
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(timeout, self._check_stall, self._progress)

    def _check_stall(self, seen: int) -> None:
        self._timer = None
        if self._closed or not self._partial():
            return
        if self._progress != seen or self.held:
            # Progress, or reading is held back on purpose (the frame's bytes are being
            # passed on to a slower connection): not a stall.
            self._watch()
            return
        self.stalled = True
        self._error = WireConnectionError(
            f'no data for {self.limits.frame_timeout} s in the middle of a frame: dropped',
        )
        self._wake()
        if self.transport is not None:
            self.transport.abort()

    @property
    def idle(self) -> bool:
        """Whether nothing is buffered: no frame, whole or partial, and no reader waiting.

        A transport may be handed to another protocol (``set_protocol``) only then, or
        bytes already read would be lost.
        """
        return not (self._have or self._frame or self._frames or self._on_next)

    def release_all(self) -> None:
        """Give back every frame not handed out by :meth:`recv` (the connection is gone)."""
        frames = list(self._frames)
        self._frames.clear()
        if self._frame is not None:
            frames.append(self._frame)
            self._frame = None
        self._stage = None
        for frame in frames:
            _abort_sinks(frame.payloads)
            if self.memory is not None:
                self.memory.release(frame.payloads)
            frame.payloads.clear()

    def eof_received(self) -> bool | None:
        return None

    # Parsing ---------------------------------------------------------------------------

    def _fail(self, error: WireError) -> None:
        self._error = error
        frame, self._frame = self._frame, None
        if frame is not None:
            _abort_sinks(frame.payloads)
        if frame is not None and self.memory is not None:
            self.memory.release(frame.payloads)
        self._have = 0
        self._wake()
        if self.transport is not None:
            self.transport.pause_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        on_next = self._on_next
        if on_next is not None and self._error is not None:
            self._on_next = None
            on_next(self._error)

    def _emit(self, frame: Frame) -> None:
        on_frame = self._on_frame
        if on_frame is not None:
            on_frame(frame)
            return
        on_next = self._on_next
        if on_next is not None:
            self._on_next = None
            on_next(frame)
            return
        self._frames.append(frame)
        self._wake()
        if len(self._frames) >= _MAX_QUEUED and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()

    def _advance(self) -> None:
        """Move past completed payloads; emit the frame when all are in."""
        frame = self._frame
        assert frame is not None
        while self._index < len(self._sizes) and self._pos == self._sizes[self._index]:
            self._index += 1
            self._pos = 0
        if self._index == len(self._sizes):
            self._frame = None
            self._emit(frame)

    def _parse(self) -> None:
        while self._error is None:
            if self._have < PREFIX.size:
                return
            scratch = self._scratch
            version, flags, mtype, rid, hlen, count = unpack_prefix(scratch, self.limits)
            if self.version is not None and version != self.version:
                raise ProtocolVersionError(
                    f'peer sent protocol version {version}, this side speaks {self.version}',
                )
            head = PREFIX.size + 8 * count + hlen
            if head > len(scratch):
                self._grow(head)
                return  # the rest of the header arrives into the bigger buffer
            if self._have < head:
                return
            sizes = check_sizes(scratch, count, self.limits, PREFIX.size)
            header = decode_header(memoryview(scratch)[PREFIX.size + 8 * count : head])
            if self.fast is not None and head + sum(sizes) <= FAST_MAX:
                took = self._offer_fast(mtype, header, rid, sizes, head)
                if took is None:
                    return  # a small frame is offered whole: wait for the rest of it
                if took:
                    continue
            routed = None
            if self.router is not None and sum(sizes) >= self.route_min:
                routed = self.router(mtype, header, rid, sizes)
            frame = Frame(mtype, header, self._buffers(sizes, routed), rid, flags, version)
            taken = self._fill(frame, head, routed)
            rest = self._have - head - taken
            if rest:
                scratch[:rest] = scratch[head + taken : self._have]
            self._have = rest
            if sum(sizes) == taken:
                self._emit(frame)
                if len(self._scratch) > _SCRATCH and not rest:
                    self._scratch = bytearray(_SCRATCH)
                continue
            self._stream_rest(frame, sizes, taken)
            return

    def _offer_fast(
        self, mtype: int, header: dict[str, Any], rid: int, sizes: tuple[int, ...], head: int
    ) -> bool | None:
        """Offer a small whole frame to the fast path; None: wait for more bytes."""
        end = head + sum(sizes)
        if self._have < end:
            return None
        scratch = self._scratch
        fast = self.fast
        assert fast is not None
        raw = memoryview(scratch)[:end]
        try:
            took = fast((mtype, header, rid, sizes, raw, head))
        finally:
            raw.release()
        if took:
            rest = self._have - end
            if rest:
                scratch[:rest] = scratch[end : self._have]
            self._have = rest
        return bool(took)

    def _buffers(self, sizes: tuple[int, ...], routed: Any) -> Any:
        """The buffers a frame's payloads are read into."""
        try:
            if routed is not None:
                return routed
            if self.memory is not None:
                return self.memory.allocate(sizes)
            return [self.alloc(n) for n in sizes]
        except MemoryError as e:
            raise FrameTooLargeError(
                f'cannot allocate {sum(sizes)} bytes for a frame: out of memory',
            ) from e

    def _fill(self, frame: Frame, head: int, routed: Any) -> int:
        """Copy the bytes already read past the header into the payloads; return how many."""
        extra = memoryview(self._scratch)[head : self._have]
        taken = 0
        try:
            for buf in frame.payloads:
                n = min(len(buf), extra.nbytes - taken)
                if isinstance(buf, bytearray | memoryview):
                    buf[:n] = extra[taken : taken + n]
                elif n:
                    try:
                        buf.write(extra[taken : taken + n])
                    except OSError as e:
                        _abort_sinks(frame.payloads)
                        if self.memory is not None and routed is None:
                            self.memory.release(frame.payloads)
                        raise FrameTooLargeError(f'cannot write a payload to disk: {e}') from e
                taken += n
                if n < len(buf):
                    break
        finally:
            extra.release()
        return taken

    def _stream_rest(self, frame: Frame, sizes: tuple[int, ...], taken: int) -> None:
        """Payloads continue beyond what is buffered: read the rest into them directly."""
        self._frame = frame
        self._sizes = sizes
        self._index = 0
        self._pos = 0
        consumed = taken
        for i, n in enumerate(sizes):
            if consumed >= n:
                consumed -= n
                continue
            self._index = i
            self._pos = consumed
            break

    # API used by Connection ------------------------------------------------------------

    def expect(self, version: int) -> None:
        """From now on, refuse frames of any other version."""
        self.version = version

    def deliver_to(self, on_frame: Callable[[Frame], None]) -> None:
        """From now on, call ``on_frame`` with each frame as soon as it is complete.

        Frames already received are handed over first. ``on_frame`` runs in the data
        callback (no future or task step per frame); :meth:`recv` then only raises the
        connection's error once it has one.
        """
        self._on_frame = on_frame
        while self._frames:
            on_frame(self._frames.popleft())
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def on_next(self, callback: Callable[[Frame | BaseException], None]) -> None:
        """Hand the next frame, or the connection's error, to ``callback`` (once).

        ``callback`` runs in the data callback as soon as the frame is complete (no future
        or task step); if the connection fails first it gets the error instead. For a
        request whose reply is awaited by a callback rather than :meth:`recv`: nothing
        else may read the connection meanwhile.

        Raises:
            RuntimeError: a frame is already queued or another callback is waiting.
        """
        if self._frames or self._on_next is not None or self._on_frame is not None:
            raise RuntimeError('on_next on a connection that has a reader already')
        if self._error is not None:
            callback(self._error)
            return
        self._on_next = callback

    def cancel_next(self) -> None:
        """Forget the callback given to :meth:`on_next` (its frame was taken otherwise)."""
        self._on_next = None

    async def recv(self) -> Frame:
        """Return the next frame (raises the connection's error once it has one)."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        if self._paused and len(self._frames) < _MAX_QUEUED // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return frame

    @property
    def writing_paused(self) -> bool:
        """Whether the transport asked to stop writing until it drains."""
        return not self._write_ready.is_set()

    async def drain(self) -> None:
        """Wait until the transport accepts more data."""
        if self._closed:
            raise self._error or WireConnectionError('connection closed')
        await self._write_ready.wait()
        if self._closed:
            raise self._error or WireConnectionError('connection closed')


def _abort_sinks(payloads: list[Any]) -> None:
    """Tell every sink of an abandoned frame (those that care) that it will not complete."""
    for payload in payloads:
        abort = getattr(payload, 'abort', None)
        if abort is not None and not isinstance(payload, bytearray | memoryview):
            abort()
