"""Raw Redis protocol (RESP2/RESP3) I/O for :class:`~tether.connectors.redis.RedisConnector`.

Large values go to and come from the socket without redis-py's packer and parser, which
copy them several times. This is the connector's I/O seam, over sockets of tether's own
(:mod:`tether.connectors._redis_conn`):

* :class:`Packer` builds a command as a list of buffers: small pieces (command names,
  lengths, CRLFs) are gathered into one ``bytes`` while large ones stay views of the
  caller's memory, so a value is sent without being joined;
* :class:`ReplyReader` reads replies straight from a socket: a bulk string into one new
  buffer, and the array of bulk strings of a value stored in chunks into one buffer too,
  each byte copied once, from the kernel; or, asked to decode, into the memory of the
  object the value deserializes to, when the serializer offers one
  (:func:`tether.serialize.direct_target`: the framing is the serializer's business, never
  this module's).

Errors are redis-py's (``redis.ConnectionError``, ``redis.TimeoutError``,
``redis.ResponseError``), so the connector's retry and error mapping apply unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from tether.serialize import BYTES_HEAD, BytesLike, direct_target, new_buffer

__all__ = ['Decoded', 'Packer', 'ReplyReader', 'raise_first', 'split']

# Pieces smaller than this are copied into the command's small-piece buffer; larger ones
# are sent from the caller's memory.
_INLINE_MAX = 16 * 1024
_BUFFER = 64 * 1024
# The first read of a request's replies takes at most this much into the reader's buffer:
# a small reply whole, and no more than this of a large value to copy from there (the
# rest is read straight into the value's own buffer).
_FIRST = 16 * 1024
# Decoding, a value is read straight into the object it deserializes to from this size
# (the serializer offers no target below it: there the copy costs less than the fuss).
_DIRECT_MIN = 256 * 1024


class Packer:
    """Build Redis commands as a list of buffers for one vectored send."""

    def __init__(self) -> None:
        self._out: list[BytesLike] = []
        self._small = bytearray()
        self.commands = 0  # how many replies the request expects (see ReplyReader.replies)

    def raw(self, data: bytes) -> None:
        """Append protocol bytes as they are."""
        self._small += data

    def array(self, count: int) -> None:
        """Start a command of ``count`` arguments (its name included)."""
        self.commands += 1
        self._small += b'*%d\r\n' % count

    def arg(self, arg: bytes | str) -> None:
        """Append a small argument."""
        data = arg.encode() if isinstance(arg, str) else arg
        self._small += b'$%d\r\n%s\r\n' % (len(data), data)

    def command(self, *args: bytes | str) -> None:
        """Append a command whose arguments are all small."""
        self.commands += 1
        small = self._small  # (in place: one call per command, not one per argument)
        small += b'*%d\r\n' % len(args)
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else arg
            small += b'$%d\r\n%s\r\n' % (len(data), data)

    def bulk(self, pieces: Sequence[memoryview]) -> None:
        """Append one bulk-string argument made of ``pieces``, sent without joining."""
        self._small += b'$%d\r\n' % sum(p.nbytes for p in pieces)
        for piece in pieces:
            if piece.nbytes < _INLINE_MAX:
                self._small += piece
            else:
                self._flush()
                self._out.append(piece)
        self._small += b'\r\n'

    def _flush(self) -> None:
        if self._small:
            self._out.append(bytes(self._small))
            self._small = bytearray()

    def finish(self) -> list[BytesLike]:
        """Return the buffers to send, in order."""
        self._flush()
        return self._out


def split(parts: Sequence[BytesLike], count: int) -> Iterator[list[memoryview]]:
    """Cut the concatenation of ``parts`` into ``count`` chunks of (almost) equal size.

    Each chunk is a list of views of ``parts`` (nothing is copied). The first chunks are
    the longest, by one byte at most, so a reader can size one buffer for the whole value
    from the first chunk's length (see :meth:`ReplyReader.array_joined`).
    """
    views = [memoryview(p).cast('B') for p in parts]
    total = sum(v.nbytes for v in views)
    base, extra = divmod(total, count)
    index = 0
    view = views[0] if views else memoryview(b'')
    for i in range(count):
        want = base + (1 if i < extra else 0)
        chunk: list[memoryview] = []
        while want:
            while not view.nbytes:
                index += 1
                view = views[index]
            take = min(want, view.nbytes)
            chunk.append(view[:take])
            view = view[take:]
            want -= take
        yield chunk


def _recv_into(sock: Any, view: memoryview, redis: Any) -> int:
    try:
        n: int = sock.recv_into(view)
    except (TimeoutError, BlockingIOError) as e:  # (BlockingIOError: SO_RCVTIMEO)
        raise redis.TimeoutError(f'timed out reading a reply: {e}') from e
    except OSError as e:
        raise redis.ConnectionError(f'error reading a reply: {e}') from e
    if n == 0:
        raise redis.ConnectionError('connection closed by the server while reading a reply')
    return n


def raise_first(replies: list[Any]) -> list[Any]:
    """``replies``, unless one is an error reply: then the first one is raised."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


class ReplyReader:
    """Read the replies of one request from a socket.

    The reader buffers at most 64 KB past what it has returned, in one buffer it keeps
    (one reader per connection); the caller reads every reply of its request, then
    checks :meth:`clean` (bytes left over mean the replies were
    not what the request expects, and the connection must be dropped).

    Error replies are returned as ``redis.ResponseError`` instances, not raised, so that
    the caller can read the replies that follow before raising.
    """

    def __init__(self, sock: Any, redis: Any) -> None:
        self._sock = sock
        self._redis = redis
        self._buf = bytearray(_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        # Whole replies read since the caller last reset it (each reply-reading method
        # reads exactly one): the requester matches it against the commands it sent.
        self.replies = 0

    def clean(self) -> bool:
        """Whether every byte read from the socket has been consumed (the reader is
        then ready for the replies of the next request)."""
        if self._start != self._end:
            return False
        self._start = self._end = 0
        return True

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b'\r\n', self._start, self._end)
            if end >= 0:
                line = bytes(self._view[self._start : end])
                self._start = end + 2
                return line
            if self._start:
                pending = self._end - self._start
                self._view[:pending] = self._view[self._start : self._end]
                self._start, self._end = 0, pending
            if self._end == _BUFFER:
                raise self._redis.ConnectionError('reply line longer than 64 KB')
            view = self._view[self._end :] if self._end else self._view[:_FIRST]
            self._end += _recv_into(self._sock, view, self._redis)

    def _into(self, view: memoryview) -> None:
        start = self._start
        have = min(self._end - start, view.nbytes)
        view[:have] = self._view[start : start + have]
        self._start = start + have
        got = have
        while got < view.nbytes:
            got += _recv_into(self._sock, view[got:], self._redis)

    def _crlf(self) -> None:
        start = self._start
        if self._end - start >= 2:  # (usually read with the value)
            ok = self._buf[start] == 13 and self._buf[start + 1] == 10
            self._start = start + 2
        else:
            end = bytearray(2)
            self._into(memoryview(end))
            ok = end == b'\r\n'
        if not ok:
            raise self._redis.ConnectionError('bulk reply not followed by CRLF')

    def _header(self, what: str) -> tuple[bytes, int | Exception | None]:
        """Read a reply's first line: ``(marker, length)``, or an error or a null."""
        line = self._line()
        marker = line[:1]
        if marker == b'-':
            return marker, self._redis.ResponseError(line[1:].decode('utf-8', 'replace'))
        if marker == b'_':  # RESP3 null
            return marker, None
        if marker not in (b'$', b'*'):
            raise self._redis.ConnectionError(f'unexpected reply to {what}: {line[:80]!r}')
        try:
            size = int(line[1:])
        except ValueError:
            raise self._redis.ConnectionError(f'bad reply to {what}: {line[:80]!r}') from None
        return marker, (None if size < 0 else size)

    def bulk(self, *, decode: bool = False) -> memoryview | Decoded | Exception | None:
        """Read a bulk-string reply into a new buffer (``None`` for a null).

        With ``decode``, a value serialized as ``bytes`` is read straight into that
        ``bytes`` object, returned as :class:`Decoded` (see :class:`_Value`).
        """
        self.replies += 1
        if self._start == self._end:  # (nothing buffered: the first read of a request)
            self._start = 0
            self._end = _recv_into(self._sock, self._view[:_FIRST], self._redis)
        buf, start = self._buf, self._start
        end = buf.find(b'\r\n', start, self._end)
        size: int
        if end > start + 1 and buf[start] == 36 and buf[start + 1 : end].isdigit():
            # (the usual case, '$<length>': parsed here, without _header)
            size = int(buf[start + 1 : end])
            self._start = end + 2
        else:
            marker, header = self._header('GET')
            if not isinstance(header, int):
                return header
            if marker != b'$':
                raise self._redis.ConnectionError('expected a bulk string reply, got an array')
            size = header
        if decode and size >= _DIRECT_MIN:
            value = _Value(self, decode, size)
            value.read(size, 0)
            self._crlf()
            return value.finish()
        # (the common case, without a _Value: the value and its CRLF read together)
        out = new_buffer(size + 2)
        self._into(out)
        if out[size] != 13 or out[size + 1] != 10:
            raise self._redis.ConnectionError('bulk reply not followed by CRLF')
        return out[:size]

    def simple(self) -> bytes | int | Exception | None:
        """Read a small reply (status, integer, error or short bulk string)."""
        self.replies += 1
        line = self._line()
        marker = line[:1]
        if marker == b'-':
            error: Exception = self._redis.ResponseError(line[1:].decode('utf-8', 'replace'))
            return error
        if marker == b'+':
            return line[1:]
        if marker == b':':
            return int(line[1:])
        if marker == b'_':
            return None
        if marker == b'$':
            size = int(line[1:])
            if size < 0:
                return None
            data = bytearray(size)
            self._into(memoryview(data))
            self._crlf()
            return bytes(data)
        raise self._redis.ConnectionError(f'unexpected reply: {line[:80]!r}')

    def array_joined(self, *, decode: bool = False) -> memoryview | Decoded | Exception | None:
        """Read an array of bulk strings into one new buffer: their concatenation.

        ``None`` for an empty or null array. The buffer is sized from the first element
        (the longest, as :func:`split` writes them) and grown if a later one does not fit.
        ``decode`` as for :meth:`bulk`.
        """
        self.replies += 1
        marker, count = self._header('LRANGE')
        if not isinstance(count, int):
            return count
        if marker != b'*':
            raise self._redis.ConnectionError('expected an array reply, got a bulk string')
        if count == 0:
            return None
        value: _Value | None = None
        for i in range(count):
            kind, size = self._header('LRANGE')
            if kind != b'$' or not isinstance(size, int):
                raise self._redis.ConnectionError('a chunk of a stored value is not a string')
            if value is None:
                value = _Value(self, decode, size * count)
            value.read(size, count - i - 1)
            self._crlf()
        assert value is not None
        return value.finish()


class Decoded(NamedTuple):
    """A value already deserialized while it was read (see :meth:`ReplyReader.bulk`)."""

    obj: Any
    nbytes: int
    """The size of its serialization (what the server stores)."""


class _Value:
    """Where the bytes of one stored value go as they are read from the socket.

    By default, into one new buffer (grown if the value is longer than ``hint``). With
    ``decode``, the value's first :data:`~tether.serialize.BYTES_HEAD` bytes are read
    first and handed to :func:`~tether.serialize.direct_target`: if the serializer
    offers the object's own memory, the rest goes straight there and the object is
    returned as :class:`Decoded`; the copy that deserializing the buffer would make, and
    the fresh pages it would fault in, are saved. A value whose length then does not
    match what the serializer expected goes back to a buffer (deserializing it raises the
    usual error).
    """

    def __init__(self, reader: ReplyReader, decode: bool, hint: int) -> None:
        self._reader = reader
        self._decode = decode
        self._hint = hint
        self._obj: Any = None  # the object being filled, in the direct mode
        self._head = b''
        # Decoding, the buffer waits for the head (the value may not need one).
        self._out = new_buffer(0 if decode else hint)
        self._used = 0

    def read(self, size: int, chunks_left: int) -> None:
        """Read the value's next ``size`` bytes (``chunks_left`` chunks follow them)."""
        if self._decode and not self._used and self._obj is None and size >= BYTES_HEAD:
            self._decode = False
            head = bytearray(BYTES_HEAD)
            self._reader._into(memoryview(head))
            size -= BYTES_HEAD
            # What another writer stored: never allocate more than the reply itself can
            # hold (``hint``, from the sizes Redis sent).
            made = direct_target(head, self._hint)
            if made is not None:
                self._obj, self._out = made
                self._head = bytes(head)
            else:
                self._out = new_buffer(self._hint)
                self._out[:BYTES_HEAD] = head
                self._used = BYTES_HEAD
        if self._used + size > self._out.nbytes:
            self._grow(self._used + size * (chunks_left + 1))
        self._reader._into(self._out[self._used : self._used + size])
        self._used += size

    def _grow(self, nbytes: int) -> None:
        if self._obj is not None:
            # Longer than its framing says: back to a plain buffer, head first.
            grown = new_buffer(BYTES_HEAD + nbytes)
            grown[:BYTES_HEAD] = self._head
            grown[BYTES_HEAD : BYTES_HEAD + self._used] = self._out[: self._used]
            self._used += BYTES_HEAD
            self._obj = None
        else:
            grown = new_buffer(nbytes)
            grown[: self._used] = self._out[: self._used]
        self._out = grown

    def finish(self) -> memoryview | Decoded:
        """The value: its buffer, or the ``bytes`` object it is the serialization of."""
        if self._obj is not None:
            if self._used == self._out.nbytes:
                obj, self._obj, self._out = self._obj, None, new_buffer(0)
                return Decoded(obj, BYTES_HEAD + self._used)
            self._grow(self._used)  # shorter than its framing says
        return self._out[: self._used]
