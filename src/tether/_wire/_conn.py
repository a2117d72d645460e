"""Asyncio side of the wire, its connection: an authenticated :class:`Connection`, the
reply types of handlers, and the client side (:func:`connect`).

Reads go through :class:`~tether._wire._proto.FrameProtocol` (payloads land directly in
their final buffers); writes go from the caller's buffers. The server is in
:mod:`tether._wire._aio`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl as _ssl
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from tether._wire import _auth
from tether._wire._cleanup import closed_on_error
from tether._wire._frame import (
    AUTH,
    CHALLENGE,
    ERROR,
    HELLO,
    PROTOCOL_VERSION,
    WELCOME,
    Frame,
    Limits,
    Payload,
    encode_head,
    flatten,
)
from tether._wire._handshake import (
    HANDSHAKE_LIMITS,
    answer_challenge,
    challenge_header,
    check_auth,
    check_reply,
    check_welcome,
    hello_header,
    parse_hello,
)
from tether._wire._proto import FrameProtocol
from tether.exceptions import (
    AuthenticationError,
    ProtocolError,
    ProtocolVersionError,
    WireConnectionError,
)

__all__ = [
    'Connection',
    'Handler',
    'InlineHandler',
    'Later',
    'RawReply',
    'Reply',
    'SecretLookup',
    'client_handshake',
    'client_protocol',
    'connect',
    'error_reply',
    'run',
    'server_handshake',
]

logger = logging.getLogger(__name__)

_T = TypeVar('_T')
_SMALL = 64 * 1024
_CHUNK = 1 << 20
_MAX_HELD = 8

Reply = tuple[int, dict[str, Any] | None, Sequence[Payload]]
"""What a handler returns: ``(message type, header, payloads)``."""

RawReply = bytearray
"""A reply frame encoded elsewhere, already carrying its request's id (passed through)."""

Handler = Callable[['Connection', Frame], Awaitable[Reply | None]]
"""Called for every frame a client sends; its reply (if any) gets the same request id."""

InlineHandler = Callable[
    ['Connection', Frame], 'Reply | RawReply | Later | Awaitable[Reply | None] | None'
]
"""A handler called straight from the connection's data callback, which never waits: it
returns its reply (a :data:`RawReply` carries the frame's request id already), ``None``
(no reply), or, for a reply that is not ready yet, a :class:`Later` or an awaitable (the
connection's later frames wait for it)."""

SecretLookup = Callable[[str], bytes | None]
"""Returns the secret of the client that announced itself by this name (``None``: refuse)."""


class Later:
    """A reply an inline handler gives later: it returns a ``Later`` and calls :meth:`set`.

    Unlike a future, :meth:`set` hands the reply to the server at once, from whatever
    callback calls it (on the server's event loop), with no task step or callback round.
    """

    __slots__ = ('_done', '_on_set', '_reply')

    def __init__(self) -> None:
        self._on_set: Callable[[Reply | RawReply | None], None] | None = None
        self._reply: Reply | RawReply | None = None
        self._done = False

    def set(self, reply: Reply | RawReply | None) -> None:
        """Give the reply (``None``: no reply); only the first call counts."""
        if self._done:
            return
        self._done = True
        self._reply = reply
        on_set, self._on_set = self._on_set, None
        if on_set is not None:
            on_set(reply)

    def _bind(self, on_set: Callable[[Reply | RawReply | None], None]) -> None:
        if self._done:
            on_set(self._reply)
        else:
            self._on_set = on_set


def error_reply(code: str, message: str) -> Reply:
    """An ``ERROR`` reply (the client raises it as a :class:`~tether.exceptions.WireError`)."""
    return (ERROR, {'code': code, 'message': message}, ())


class Connection:
    """One connection (either side), authenticated once its handshake is done.

    Attributes:
        peer: ``host:port`` of the other side.
        info: What the peer said about itself in the handshake.
    """

    def __init__(self, transport: asyncio.Transport, protocol: FrameProtocol) -> None:
        self.transport = transport
        self.protocol = protocol
        peer = transport.get_extra_info('peername')
        if isinstance(peer, tuple):
            self.peer = f'{peer[0]}:{peer[1]}'
        elif peer:
            self.peer = str(peer)
        else:  # the client end of a Unix socket has no name: name the socket
            self.peer = f'unix:{transport.get_extra_info("sockname") or "?"}'
        self.info: dict[str, Any] = {}
        self.authenticated = False
        """Whether the peer proved who it is: in the wire handshake (a server with a
        secret, or none at all), or later to the handler (``Server(handler_auth=True)``)."""
        self._login_timer: asyncio.TimerHandle | None = None
        self.state: Any = None
        """Whatever its owner keeps with this connection (the server never reads it)."""
        self._next_id = 0
        self._lock = asyncio.Lock()
        # An inline server's state for this connection: frames held back while a reply
        # is pending (deferred, or waiting for the connection to drain).
        self._busy = False
        self._claims = 0  # frames a fast path claimed (see Server.claim)
        self._held: collections.deque[Frame] = collections.deque()

    @property
    def last_request_id(self) -> int:
        """The id of the latest request this side sent (0: none yet)."""
        return self._next_id

    async def recv(self) -> Frame:
        """Read the next frame."""
        return await self.protocol.recv()

    async def send(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        request_id: int = 0,
        flags: int = 0,
    ) -> None:
        """Write one frame and wait until the transport drains.

        Large payloads go out a chunk at a time, waiting whenever the transport is backed
        up: a TLS transport encrypts all it is given at once, so a 100 MB write would
        otherwise be encrypted (and copied twice) before its first byte left, and held in
        memory meanwhile.
        """
        sizes, buffers = flatten(payloads)
        if sum(sizes) <= _SMALL:
            self._write_flat(mtype, header, sizes, buffers, request_id=request_id, flags=flags)
        else:
            head = encode_head(mtype, header, sizes, request_id, flags)
            if self.transport.is_closing():
                raise WireConnectionError(f'connection to {self.peer} is closed')
            self.transport.write(head)
            for buf in buffers:
                for start in range(0, buf.nbytes, _CHUNK):
                    self.transport.write(buf[start : start + _CHUNK])
                    if self.protocol.writing_paused:
                        await self.protocol.drain()
        await self.protocol.drain()

    def write(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        request_id: int = 0,
        flags: int = 0,
    ) -> None:
        """Hand one frame to the transport without waiting for it to drain.

        Raises:
            WireConnectionError: if the connection is closed.
        """
        sizes, buffers = flatten(payloads)
        self._write_flat(mtype, header, sizes, buffers, request_id=request_id, flags=flags)

    def _write_flat(
        self,
        mtype: int,
        header: dict[str, Any] | None,
        sizes: list[int],
        buffers: list[memoryview],
        *,
        request_id: int,
        flags: int = 0,
    ) -> None:
        head = encode_head(mtype, header, sizes, request_id, flags)
        if self.transport.is_closing():
            raise WireConnectionError(f'connection to {self.peer} is closed')
        if sum(sizes) <= _SMALL:
            self.transport.write(b''.join([head, *buffers]))
        else:
            self.transport.write(head)
            for buf in buffers:
                self.transport.write(buf)

    def write_request(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
    ) -> int:
        """Hand a whole request to the transport without waiting; return its id.

        For a caller that collects the reply itself (with ``protocol.on_next``) and holds
        the connection alone until then (no :meth:`request` on it meanwhile).

        Raises:
            WireConnectionError: if the connection is closed.
        """
        rid = self._next_id + 1
        self.write(mtype, header, payloads, request_id=rid)
        self._next_id = rid
        return rid

    def write_raw(self, frame: bytearray, request_id: int) -> None:
        """Hand a request encoded elsewhere to the transport without waiting.

        ``frame`` must carry ``request_id``, the id after :attr:`last_request_id` (see
        :func:`~tether._wire._frame.with_request_id`); the same rules as
        :meth:`write_request` apply.

        Raises:
            WireConnectionError: if the connection is closed.
        """
        if self.transport.is_closing():
            raise WireConnectionError(f'connection to {self.peer} is closed')
        self.transport.write(frame)
        self._next_id = request_id

    async def request(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        timeout: float | None = 30.0,
    ) -> Frame:
        """Send a request and return its reply (an ``ERROR`` reply is raised)."""
        async with self._lock:
            self._next_id += 1
            rid = self._next_id
            try:
                async with asyncio.timeout(timeout):
                    await self.send(mtype, header, payloads, request_id=rid)
                    frame = await self.recv()
            except (TimeoutError, OSError) as e:
                raise self._lost(e) from e
        return self._checked(frame, rid)

    def _lost(self, error: BaseException) -> WireConnectionError:
        """Drop the connection after a request failed; the error to raise."""
        self.abort()
        if isinstance(error, TimeoutError):
            return WireConnectionError(f'request to {self.peer} timed out')
        return WireConnectionError(f'connection to {self.peer} failed: {error!r}')

    def _checked(self, frame: Frame, request_id: int) -> Frame:
        """``frame`` if it answers ``request_id`` (a reply out of step drops the connection)."""
        try:
            return check_reply(frame, request_id, self.peer)
        except ProtocolError:
            self.abort()
            raise

    def start_request(
        self, mtype: int, header: dict[str, Any] | None, sizes: Sequence[int]
    ) -> int:
        """Write only the head of a request and return its id (cut-through forwarding).

        The caller then writes exactly ``sum(sizes)`` payload bytes to :attr:`transport`
        and collects the reply with :meth:`reply`; it must hold the connection alone
        until then (no :meth:`request` on it meanwhile).
        """
        if self.transport.is_closing():
            raise WireConnectionError(f'connection to {self.peer} is closed')
        self._next_id += 1
        self.transport.write(encode_head(mtype, header, sizes, self._next_id, 0))
        return self._next_id

    async def reply(self, request_id: int, *, timeout: float | None = 30.0) -> Frame:
        """Wait for the reply to a request begun with :meth:`start_request`."""
        try:
            async with asyncio.timeout(timeout):
                await self.protocol.drain()
                frame = await self.recv()
        except (TimeoutError, OSError) as e:
            raise self._lost(e) from e
        return self._checked(frame, request_id)

    def abort(self) -> None:
        """Drop the connection at once."""
        self.transport.abort()

    async def close(self) -> None:
        """Close the connection."""
        self.transport.close()


async def connect(
    host: str,
    port: int,
    *,
    secret: str | bytes | None = None,
    ssl: _ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    limits: Limits | None = None,
    timeout: float = 10.0,
    client: str = 'tether',
) -> Connection:
    """Open an authenticated asyncio connection to a :class:`Server`.

    Raises:
        WireConnectionError: if the server cannot be reached.
        AuthenticationError: if the secrets differ.
        ProtocolVersionError: if the server speaks another version.
    """
    peer = f'{host}:{port}'
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await loop.create_connection(
                client_protocol,
                host,
                port,
                ssl=ssl,
                server_hostname=(server_hostname or host) if ssl else None,
            )
    except (OSError, TimeoutError) as e:
        raise WireConnectionError(f'cannot connect to {peer}: {e!r}') from e
    return await client_handshake(
        transport, protocol, secret=secret, limits=limits, timeout=timeout, client=client
    )


def client_protocol() -> FrameProtocol:
    """A fresh protocol for the client side of a connection (see :func:`client_handshake`)."""
    return FrameProtocol(HANDSHAKE_LIMITS, None)


async def client_handshake(
    transport: asyncio.BaseTransport,
    protocol: asyncio.BaseProtocol,
    *,
    secret: str | bytes | None = None,
    limits: Limits | None = None,
    timeout: float = 10.0,
    client: str = 'tether',
) -> Connection:
    """Authenticate the client side of a transport made elsewhere; return the connection.

    ``protocol`` comes from :func:`client_protocol` and already receives the transport's
    data (a TCP connection, a TLS session over a relayed stream, a QUIC stream).
    """
    assert isinstance(protocol, FrameProtocol)
    conn = Connection(transport, protocol)  # type: ignore[arg-type]
    peer = conn.peer
    key = _auth.as_secret(secret)
    with closed_on_error(conn.abort, TimeoutError, lambda _: f'handshake with {peer} timed out'):
        async with asyncio.timeout(timeout):
            nonce = _auth.new_nonce()
            await conn.send(HELLO, hello_header(nonce, client))
            await conn.send(AUTH, answer_challenge(await conn.recv(), key, nonce, peer))
            conn.info = check_welcome(await conn.recv(), peer)
    protocol.expect(PROTOCOL_VERSION)
    protocol.limits = limits or Limits()
    return conn


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine on a new event loop (uvloop when installed)."""
    from tether._serve.loop import run as run_on_new_loop

    return run_on_new_loop(main)


async def server_handshake(
    conn: Connection, secret: bytes | SecretLookup | None, name: str
) -> None:
    hello = await conn.recv()
    if hello.version != PROTOCOL_VERSION:
        await conn.send(
            ERROR,
            {
                'code': 'version',
                'message': (
                    f'{name} speaks tether wire protocol version {PROTOCOL_VERSION}, '
                    f'the client sent version {hello.version}: upgrade the older side'
                ),
                'versions': [PROTOCOL_VERSION],
            },
        )
        raise ProtocolVersionError(f'client sent protocol version {hello.version}')
    conn.protocol.expect(PROTOCOL_VERSION)
    if hello.type != HELLO:
        raise ProtocolError(f'first message has type {hello.type}, expected HELLO')
    client_nonce, client = parse_hello(hello)
    conn.info = {'client': client}
    if callable(secret):
        # A per-client secret: a client nobody knows gets a challenge it cannot answer.
        secret = secret(conn.info['client']) or _auth.new_nonce()
    server_nonce = _auth.new_nonce()
    await conn.send(CHALLENGE, challenge_header(secret, client_nonce, server_nonce))
    frame = await conn.recv()
    if frame.type != AUTH:
        raise ProtocolError(f'second message has type {frame.type}, expected AUTH')
    try:
        check_auth(frame, secret, client_nonce, server_nonce)
    except AuthenticationError:
        await conn.send(
            ERROR,
            {'code': 'auth', 'message': f'authentication with {name} failed: wrong shared secret'},
        )
        raise
    await conn.send(WELCOME, {'server': name, 'version': PROTOCOL_VERSION})
