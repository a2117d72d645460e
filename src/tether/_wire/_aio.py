"""Asyncio side of the wire: an authenticated connection, a server, a client.

Reads go through :class:`~tether._wire._proto.FrameProtocol` (payloads land directly in
their final buffers); writes go from the caller's buffers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import functools
import logging
import os
import socket
import ssl as _ssl
import stat
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from tether._wire import _auth
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
    PRE_AUTH_LIMITS,
    answer_challenge,
    challenge_header,
    check_auth,
    check_reply,
    check_welcome,
    hello_header,
    parse_hello,
)
from tether._wire._proto import FastPath, FrameMemory, FrameProtocol, FrameRouter
from tether.exceptions import (
    AuthenticationError,
    FrameTooLargeError,
    ProtocolError,
    ProtocolVersionError,
    WireConnectionError,
    WireError,
)

__all__ = [
    'Connection',
    'Handler',
    'InlineHandler',
    'Later',
    'RawReply',
    'Reply',
    'SecretLookup',
    'Server',
    'client_handshake',
    'client_protocol',
    'connect',
    'error_reply',
    'run',
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
            self.write(mtype, header, payloads, request_id=request_id, flags=flags)
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


async def _server_handshake(
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
    client_nonce = parse_hello(hello)
    conn.info = {'client': str(hello.header.get('client', ''))}
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


class _ServerProtocol(FrameProtocol):
    def __init__(self, server: Server) -> None:
        super().__init__(HANDSHAKE_LIMITS, None, server.alloc, server.memory)
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.server._accept(Connection(transport, self))  # type: ignore[arg-type]


def _remove_socket(path: str | None, *, stale_only: bool = False) -> None:
    """Remove the socket file at ``path`` (nothing else: a regular file stays).

    With ``stale_only``, a socket some live server still accepts on is not removed:
    :class:`OSError` says it is in use.
    """
    if path is None:
        return
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        return
    if stale_only:
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(path)
            except OSError:
                pass  # nobody listens: stale
            else:
                raise OSError(errno.EADDRINUSE, f'a live server listens on {path}')
    os.unlink(path)


class Server:
    """An asyncio server that authenticates every connection and dispatches frames.

    Args:
        handler: Called with each frame; its reply is sent back with the request's id.
            Exceptions become ``ERROR`` replies (code ``'internal'``) and the connection
            stays open.
        host: Address to bind.
        port: Port to bind (0: a free port, see :attr:`address`).
        secret: Shared secret clients must prove they know (``None``: no authentication),
            or a :data:`SecretLookup` giving each client's secret by the name it announces.
        ssl: Server-side TLS context, if any.
        unix_path: Also listen on a Unix socket at this path, for clients on this host
            (see :meth:`start`); they authenticate as TCP clients do.
        limits: Frame limits applied to every client.
        name: Name used in log and error messages.
        alloc: Allocates the buffer of each received payload (default ``bytearray``);
            pass a pool to reuse memory.
        memory: Allocates each frame's payloads against a budget instead of ``alloc``,
            and is told when each frame is done with, including frames of connections
            that died midway (see :class:`~tether._wire._proto.FrameMemory`).
        router: Called with each authenticated connection; what it returns decides,
            from the head of each large frame, where that frame's payloads go as they
            arrive (see :class:`~tether._wire._proto.FrameRouter`). With ``memory``, the
            frames it leaves are allocated against the budget, and those it takes are
            given to ``memory.release`` too (which ignores what it did not allocate).
        fast: With ``inline`` only: called with each authenticated connection; what it
            returns may take whole small frames straight from the parser (see
            :class:`~tether._wire._proto.FastPath`). A frame it takes is answered with
            :meth:`claim` (before it acts on the frame) and :meth:`finish`, as if a
            handler had returned a :class:`Later`; a frame it leaves goes to
            ``handler``. If it raises after its claim, the frame gets an ``internal``
            error reply, as a failing handler's frame does.
        inline: ``handler`` is an :data:`InlineHandler`, a plain function called with
            each frame from the connection's data callback as soon as the frame is
            complete: no future, task step or coroutine per frame. A small reply is
            written at once; a large one (over 1 MiB) is sent a chunk at a time. The
            handler may instead return an awaitable (a future or a coroutine) for a reply
            that is not ready yet. While a reply is pending, or the connection has not
            drained, the connection's next frames are held back (and reading stops
            after a few): replies go out in request order, and a client that does not
            read its replies cannot make the server queue them without bound.
        handler_auth: Peers authenticate after the wire handshake, with a request the
            handler checks (a token), and the handler calls :meth:`authenticate` once it
            accepted one. Until then the connection's frames are held to ``pre_auth``
            (small, bounded) instead of ``limits``, and a connection still not
            authenticated ``limits.handshake_timeout`` seconds after it connected is
            dropped (:attr:`login_timeouts` counts them). A client sends nothing large
            before its login is answered.
        pre_auth: Frame limits before :meth:`authenticate` (default: a 16 KiB header
            and at most 16 KiB of payload).
    """

    def __init__(
        self,
        handler: Handler | InlineHandler,
        *,
        host: str = '127.0.0.1',
        port: int = 0,
        secret: str | bytes | SecretLookup | None = None,
        ssl: _ssl.SSLContext | None = None,
        unix_path: str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        name: str = 'tether server',
        alloc: Callable[[int], bytearray] = bytearray,
        memory: FrameMemory | None = None,
        router: Callable[[Connection], FrameRouter] | None = None,
        inline: bool = False,
        fast: Callable[[Connection], FastPath] | None = None,
        handler_auth: bool = False,
        pre_auth: Limits | None = None,
    ) -> None:
        if fast is not None and not inline:
            raise ValueError('a fast path needs an inline server')
        self.router = router
        self.fast = fast
        self.handler = handler
        self.inline = inline
        self.alloc = alloc
        self.memory = memory
        self.frame_timeouts = 0
        self.host = host
        self.port = port
        self.secret = secret if callable(secret) else _auth.as_secret(secret)
        self.ssl = ssl
        self.unix_path = None if unix_path is None else os.fspath(unix_path)
        self.limits = limits or Limits()
        self.name = name
        self.handler_auth = handler_auth
        self.pre_auth = pre_auth or PRE_AUTH_LIMITS
        self.connections: set[Connection] = set()
        self.refused = 0
        self.login_timeouts = 0
        self._server: asyncio.AbstractServer | None = None
        self._unix: asyncio.AbstractServer | None = None
        self._unix_inode: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``."""
        sockets = getattr(self._server, 'sockets', None)
        if not sockets:
            raise RuntimeError(f'{self.name} is not started')
        sockname = sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    @property
    def unix_address(self) -> str | None:
        """The Unix socket this server listens on, if any (see :meth:`start`)."""
        return self.unix_path if self._unix is not None else None

    async def start(self) -> None:
        """Bind and start accepting connections.

        With ``unix_path``, the server also listens there: a stale socket file left by a
        server that died is replaced (any other file there is left alone), and the new
        one is readable and writable by its owner only. A Unix socket that cannot be made
        (a path too long for one, a file system without them) is logged and skipped: the
        TCP listener serves every client.
        """
        loop = asyncio.get_running_loop()
        handshake = self.limits.handshake_timeout if self.ssl else None
        self._server = await loop.create_server(
            lambda: _ServerProtocol(self),
            self.host,
            self.port,
            ssl=self.ssl,
            ssl_handshake_timeout=handshake,
        )
        if self.unix_path is not None:
            try:
                _remove_socket(self.unix_path, stale_only=True)
                self._unix = await loop.create_unix_server(
                    lambda: _ServerProtocol(self),
                    self.unix_path,
                    ssl=self.ssl,
                    ssl_handshake_timeout=handshake,
                )
                os.chmod(self.unix_path, 0o600)
                self._unix_inode = os.stat(self.unix_path).st_ino
            except (OSError, ValueError) as e:
                logger.warning('%s: no Unix socket at %s: %s', self.name, self.unix_path, e)
                if self._unix is not None:  # made, but not ours alone: unmade
                    self._unix.close()
                    self._unix = None
                    with contextlib.suppress(OSError):
                        _remove_socket(self.unix_path)

    def protocol(self) -> asyncio.BufferedProtocol:
        """A protocol serving one connection of this server over a transport made elsewhere.

        For transports the server did not accept itself (a TLS session started over a
        relayed stream, a QUIC stream): call its ``connection_made(transport)`` and the
        connection is authenticated and served like an accepted one.
        """
        return _ServerProtocol(self)

    async def close(self) -> None:
        """Stop accepting and drop every connection (and remove the Unix socket)."""
        if self._server is not None:
            self._server.close()
        if self._unix is not None:
            self._unix.close()
        for conn in list(self.connections):
            conn.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._unix is not None and self.unix_path is not None:
            self._unix.close()
            await self._unix.wait_closed()
            self._unix = None
            with contextlib.suppress(OSError):
                # Only the socket this server made: another server may have replaced it.
                if os.lstat(self.unix_path).st_ino == self._unix_inode:
                    _remove_socket(self.unix_path)

    def authenticate(self, conn: Connection) -> None:
        """With ``handler_auth``: the handler accepted ``conn``'s login.

        Its frames are held to ``limits`` from now on (frames already received were held
        to ``pre_auth``), and the login deadline no longer applies.
        """
        conn.authenticated = True
        conn.protocol.limits = self.limits
        timer, conn._login_timer = conn._login_timer, None
        if timer is not None:
            timer.cancel()

    def _login_expired(self, conn: Connection) -> None:
        conn._login_timer = None
        if conn.authenticated or conn.transport.is_closing():
            return
        self.login_timeouts += 1
        logger.info(
            '%s: dropped %s, not authenticated within %s s',
            self.name,
            conn.peer,
            self.limits.handshake_timeout,
        )
        conn.abort()

    def _accept(self, conn: Connection) -> None:
        task = asyncio.get_running_loop().create_task(self._on_client(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_client(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.handshake_timeout
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    await _server_handshake(conn, self.secret, self.name)
            except (WireError, TimeoutError, OSError) as e:
                self.refused += 1
                logger.info('%s refused connection from %s: %s', self.name, conn.peer, e)
                if isinstance(e, ProtocolError) and not isinstance(e, ProtocolVersionError):
                    with contextlib.suppress(WireError, OSError):
                        await conn.send(ERROR, {'code': 'protocol', 'message': str(e)})
                return
            if self.handler_auth:
                # Not authenticated yet: small frames only, and a deadline for the login.
                conn.protocol.limits = self.pre_auth
                conn._login_timer = loop.call_at(deadline, self._login_expired, conn)
            else:
                conn.authenticated = True
                conn.protocol.limits = self.limits
            if self.router is not None:
                conn.protocol.router = self.router(conn)
            if self.fast is not None:
                conn.protocol.fast = self._guarded(conn, self.fast(conn))
            self.connections.add(conn)
            await self._serve(conn)
        except asyncio.CancelledError:
            pass
        finally:
            self.connections.discard(conn)
            if conn._login_timer is not None:
                conn._login_timer.cancel()
                conn._login_timer = None
            conn.transport.close()
            # Frames received but never handled, and a partial one, are given back now:
            # a connection that died mid-frame leaves nothing allocated behind.
            conn.protocol.release_all()
            held, conn._held = list(conn._held), collections.deque()
            if self.memory is not None:
                for frame in held:
                    self.memory.release(frame.payloads)
            if conn.protocol.stalled:
                self.frame_timeouts += 1
                logger.info(
                    '%s: dropped %s, stalled in the middle of a frame', self.name, conn.peer
                )

    def _dispatch_inline(self, conn: Connection, frame: Frame) -> None:
        if conn._busy:
            conn._held.append(frame)
            if len(conn._held) == _MAX_HELD:
                conn.transport.pause_reading()
            return
        self._run_inline(conn, frame)

    def _run_inline(self, conn: Connection, frame: Frame) -> None:
        """Handle one frame; the connection is busy afterwards if its reply is pending."""
        handler: InlineHandler = self.handler
        try:
            reply = handler(conn, frame)
        except Exception as e:
            logger.exception('%s: handler failed for a frame from %s', self.name, conn.peer)
            reply = error_reply('internal', f'{self.name} failed: {e!r}')
        if isinstance(reply, Later):
            conn._busy = True
            reply._bind(functools.partial(self._later_set, conn, frame))
            return
        if reply is not None and not isinstance(reply, tuple | bytearray):
            conn._busy = True
            later = asyncio.ensure_future(reply)
            if isinstance(later, asyncio.Task):
                self._tasks.add(later)  # type: ignore[arg-type]
                later.add_done_callback(self._tasks.discard)
            later.add_done_callback(functools.partial(self._deferred_done, conn, frame))
            return
        if self.memory is not None:
            self.memory.release(frame.payloads)
        if reply is not None:
            self._reply_inline(conn, frame.request_id, reply)

    def _deferred_done(self, conn: Connection, frame: Frame, later: asyncio.Future[Any]) -> None:
        if later.cancelled():
            if self.memory is not None:
                self.memory.release(frame.payloads)
            conn.abort()
            return
        error = later.exception()
        if error is None:
            self._later_set(conn, frame, later.result())
            return
        logger.error(
            '%s: handler failed for a frame from %s', self.name, conn.peer, exc_info=error
        )
        self._later_set(conn, frame, error_reply('internal', f'{self.name} failed: {error!r}'))

    def _later_set(self, conn: Connection, frame: Frame, reply: Reply | RawReply | None) -> None:
        if self.memory is not None:
            self.memory.release(frame.payloads)
        self.finish(conn, frame.request_id, reply)

    def _guarded(self, conn: Connection, fast: FastPath) -> FastPath:
        """``fast``, whose exceptions are answered as an inline handler's are.

        A frame the fast path claimed before it failed gets an ``internal`` error reply
        (and the connection goes on); one it had not claimed goes the usual way.
        """

        def guarded(  # noqa: PLR0917
            mtype: int,
            header: dict[str, Any],
            request_id: int,
            sizes: tuple[int, ...],
            raw: memoryview,
            head: int,
        ) -> bool:
            claims = conn._claims
            try:
                return fast(mtype, header, request_id, sizes, raw, head)
            except Exception as e:
                logger.exception('%s: fast path failed for a frame from %s', self.name, conn.peer)
                if conn._claims == claims:
                    return False  # not claimed: the handler answers it
                if conn._busy:  # claimed, not answered yet
                    reply = error_reply('internal', f'{self.name} failed: {e!r}')
                    self.finish(conn, request_id, reply)
                return True

        return guarded

    def claim(self, conn: Connection) -> bool:
        """For a fast path: make ``conn`` wait for a reply, unless it is waiting already.

        Returns ``False`` (and changes nothing) if a reply is pending on ``conn`` or frames
        are held back: the frame must then take the usual path, behind them.
        """
        if conn._busy or conn._held:
            return False
        conn._busy = True
        conn._claims += 1
        return True

    def finish(self, conn: Connection, request_id: int, reply: Reply | RawReply | None) -> None:
        """Answer the frame that made ``conn`` wait (:meth:`claim`); go on with the next.

        ``reply`` is written with ``request_id``, or written as it is if it is a
        :data:`RawReply`; ``None`` writes nothing.
        """
        conn._busy = False
        if reply is not None:
            self._reply_inline(conn, request_id, reply)
        self._resume(conn)

    def _reply_inline(self, conn: Connection, rid: int, reply: Reply | RawReply) -> None:
        """Write ``reply``; a large one, or one that fills the transport, makes it busy."""
        if isinstance(reply, bytearray):
            if not conn.transport.is_closing():
                conn.transport.write(reply)
        else:
            sizes, buffers = flatten(reply[2])
            if sum(sizes) > _CHUNK:
                # Large: a chunk at a time (a TLS transport would encrypt it all at once).
                conn._busy = True
                self._later(conn, self._send_reply(conn, rid, reply))
                return
            with contextlib.suppress(WireError, OSError):
                conn._write_flat(reply[0], reply[1], sizes, buffers, request_id=rid)
        if conn.protocol.writing_paused and not conn.transport.is_closing():
            conn._busy = True
            self._later(conn, conn.protocol.drain())

    def _later(self, conn: Connection, step: Coroutine[Any, Any, None]) -> None:
        async def then_resume() -> None:
            try:
                await step
            except (WireError, OSError):
                return
            conn._busy = False
            self._resume(conn)

        task = asyncio.get_running_loop().create_task(then_resume())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_reply(self, conn: Connection, rid: int, reply: Reply) -> None:
        await conn.send(reply[0], reply[1], reply[2], request_id=rid)

    def _resume(self, conn: Connection) -> None:
        """Handle the frames held back while the connection was busy, in order."""
        held = conn._held
        while held and not conn._busy:
            resume = len(held) == _MAX_HELD
            self._run_inline(conn, held.popleft())
            if resume:
                conn.transport.resume_reading()

    async def _serve(self, conn: Connection) -> None:
        if self.inline:
            conn.protocol.deliver_to(functools.partial(self._dispatch_inline, conn))
        while True:
            try:
                frame = await conn.recv()
            except (ProtocolError, FrameTooLargeError) as e:
                self.refused += 1
                logger.warning('%s: bad frame from %s: %s', self.name, conn.peer, e)
                code = 'too-large' if isinstance(e, FrameTooLargeError) else 'protocol'
                with contextlib.suppress(WireError, OSError):
                    await conn.send(ERROR, {'code': code, 'message': str(e)})
                return
            except (WireError, OSError):
                return
            if self.inline:  # pragma: no cover - recv only raises once frames go inline
                self._dispatch_inline(conn, frame)
                continue
            try:
                reply = await self.handler(conn, frame)  # type: ignore[misc]
            except Exception as e:
                logger.exception('%s: handler failed for a frame from %s', self.name, conn.peer)
                reply = error_reply('internal', f'{self.name} failed: {e!r}')
            finally:
                if self.memory is not None:
                    self.memory.release(frame.payloads)
            rid = frame.request_id
            # Drop our references to the request and reply buffers before waiting for the
            # next frame, so that the application sees when it holds the last reference.
            del frame
            if reply is not None:
                try:
                    await conn.send(reply[0], reply[1], reply[2], request_id=rid)
                except (WireError, OSError):
                    return
                finally:
                    del reply


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
    try:
        async with asyncio.timeout(timeout):
            nonce = _auth.new_nonce()
            await conn.send(HELLO, hello_header(nonce, client))
            await conn.send(AUTH, answer_challenge(await conn.recv(), key, nonce, peer))
            conn.info = check_welcome(await conn.recv(), peer)
    except TimeoutError as e:
        conn.abort()
        raise WireConnectionError(f'handshake with {peer} timed out') from e
    except BaseException:
        conn.abort()
        raise
    protocol.expect(PROTOCOL_VERSION)
    protocol.limits = limits or Limits()
    return conn


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine on a new event loop (uvloop when installed)."""
    from tether._serve.loop import run as run_on_new_loop

    return run_on_new_loop(main)
