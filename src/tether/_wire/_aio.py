"""Asyncio side of the wire: frame I/O, an authenticated connection, a server, a client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl as _ssl
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from tether._wire import _auth
from tether._wire._frame import (
    AUTH,
    CHALLENGE,
    ERROR,
    HELLO,
    PREFIX,
    PROTOCOL_VERSION,
    WELCOME,
    Frame,
    Limits,
    Payload,
    check_sizes,
    decode_header,
    encode_head,
    flatten,
    unpack_prefix,
)
from tether._wire._handshake import (
    HANDSHAKE_LIMITS,
    answer_challenge,
    challenge_header,
    check_auth,
    check_welcome,
    hello_header,
    parse_hello,
)
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
    'Reply',
    'Server',
    'connect',
    'error_reply',
    'read_frame',
    'run',
    'write_frame',
]

logger = logging.getLogger(__name__)

_T = TypeVar('_T')
_SMALL = 64 * 1024
_READER_LIMIT = 1 << 20

Reply = tuple[int, dict[str, Any] | None, Sequence[Payload]]
"""What a handler returns: ``(message type, header, payloads)``."""

Handler = Callable[['Connection', Frame], Awaitable[Reply | None]]
"""Called for every frame a client sends; its reply (if any) gets the same request id."""


def error_reply(code: str, message: str) -> Reply:
    """An ``ERROR`` reply (the client raises it as a :class:`~tether.exceptions.WireError`)."""
    return (ERROR, {'code': code, 'message': message}, ())


async def read_frame(
    reader: asyncio.StreamReader,
    limits: Limits,
    *,
    version: int | None = PROTOCOL_VERSION,
) -> Frame:
    """Read one frame, enforcing ``limits`` before allocating (``version=None``: any)."""
    prefix = await reader.readexactly(PREFIX.size)
    got, flags, mtype, rid, hlen, count = unpack_prefix(prefix, limits)
    if version is not None and got != version:
        raise ProtocolVersionError(f'peer sent protocol version {got}, this side speaks {version}')
    sizes = check_sizes(await reader.readexactly(8 * count), count, limits) if count else ()
    header = decode_header(await reader.readexactly(hlen)) if hlen else {}
    payloads = [await reader.readexactly(n) if n else b'' for n in sizes]
    return Frame(mtype, header, payloads, rid, flags)


async def write_frame(
    writer: asyncio.StreamWriter,
    mtype: int,
    header: dict[str, Any] | None = None,
    payloads: Sequence[Payload] = (),
    *,
    request_id: int = 0,
    flags: int = 0,
) -> None:
    """Write one frame; large payloads go from their own memory, not joined."""
    sizes, buffers = flatten(payloads)
    head = encode_head(mtype, header, sizes, request_id, flags)
    if sum(sizes) <= _SMALL:
        writer.write(b''.join([head, *buffers]))
    else:
        writer.write(head)
        for buf in buffers:
            writer.write(buf)
    await writer.drain()


class Connection:
    """One authenticated connection (either side).

    Attributes:
        peer: ``host:port`` of the other side.
        info: The header the peer sent in its handshake (client name or server name).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limits: Limits,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.limits = limits
        peer = writer.get_extra_info('peername')
        self.peer = f'{peer[0]}:{peer[1]}' if isinstance(peer, tuple) else str(peer)
        self.info: dict[str, Any] = {}
        self._next_id = 0
        self._lock = asyncio.Lock()

    async def recv(self) -> Frame:
        """Read the next frame."""
        return await read_frame(self.reader, self.limits)

    async def send(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        request_id: int = 0,
        flags: int = 0,
    ) -> None:
        """Write one frame."""
        await write_frame(self.writer, mtype, header, payloads, request_id=request_id, flags=flags)

    async def request(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        timeout: float | None = 30.0,
    ) -> Frame:
        """Send a request and return its reply (raising an ``ERROR`` reply as an exception)."""
        from tether._wire._handshake import error_from_frame

        async with self._lock:
            self._next_id += 1
            rid = self._next_id
            try:
                async with asyncio.timeout(timeout):
                    await self.send(mtype, header, payloads, request_id=rid)
                    frame = await self.recv()
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as e:
                self.abort()
                raise WireConnectionError(f'connection to {self.peer} failed: {e!r}') from e
        if frame.type == ERROR:
            raise error_from_frame(frame, self.peer)
        if frame.request_id != rid:
            self.abort()
            raise ProtocolError(f'{self.peer} answered request {frame.request_id}, expected {rid}')
        return frame

    def abort(self) -> None:
        """Drop the connection at once."""
        self.writer.transport.abort()

    async def close(self) -> None:
        """Close the connection politely."""
        self.writer.close()
        with contextlib.suppress(OSError, TimeoutError, asyncio.IncompleteReadError):
            await asyncio.wait_for(self.writer.wait_closed(), 1.0)


async def _server_handshake(
    conn: Connection,
    secret: bytes | None,
    name: str,
) -> None:
    reader = conn.reader
    prefix = await reader.readexactly(PREFIX.size)
    version, _, mtype, rid, hlen, _count = unpack_prefix(prefix, HANDSHAKE_LIMITS)
    if version != PROTOCOL_VERSION:
        await conn.send(
            ERROR,
            {
                'code': 'version',
                'message': (
                    f'{name} speaks tether wire protocol version {PROTOCOL_VERSION}, '
                    f'the client sent version {version}: upgrade the older side'
                ),
                'versions': [PROTOCOL_VERSION],
            },
        )
        raise ProtocolVersionError(f'client sent protocol version {version}')
    if mtype != HELLO:
        raise ProtocolError(f'first message has type {mtype}, expected HELLO')
    hello = Frame(mtype, decode_header(await reader.readexactly(hlen)), [], rid)
    client_nonce = parse_hello(hello)
    conn.info = {'client': str(hello.header.get('client', ''))}
    server_nonce = _auth.new_nonce()
    await conn.send(CHALLENGE, challenge_header(secret, client_nonce, server_nonce))
    frame = await read_frame(reader, HANDSHAKE_LIMITS)
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


class Server:
    """An asyncio server that authenticates every connection and dispatches frames.

    Args:
        handler: Called with each frame; its reply is sent back with the request's id.
            Exceptions become ``ERROR`` replies (code ``'internal'``) and the connection
            stays open.
        host: Address to bind.
        port: Port to bind (0: a free port, see :attr:`address`).
        secret: Shared secret clients must prove they know (``None``: no authentication).
        ssl: Server-side TLS context, if any.
        limits: Frame limits applied to every client.
        name: Name used in log and error messages.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = '127.0.0.1',
        port: int = 0,
        secret: str | bytes | None = None,
        ssl: _ssl.SSLContext | None = None,
        limits: Limits | None = None,
        name: str = 'tether server',
    ) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.secret = _auth.as_secret(secret)
        self.ssl = ssl
        self.limits = limits or Limits()
        self.name = name
        self.connections: set[Connection] = set()
        self.refused = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``."""
        if self._server is None:
            raise RuntimeError(f'{self.name} is not started')
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def start(self) -> None:
        """Bind and start accepting connections."""
        self._server = await asyncio.start_server(
            self._on_client,
            self.host,
            self.port,
            ssl=self.ssl,
            limit=_READER_LIMIT,
            ssl_handshake_timeout=self.limits.handshake_timeout if self.ssl else None,
        )

    async def close(self) -> None:
        """Stop accepting and drop every connection."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        conn = Connection(reader, writer, self.limits)
        try:
            try:
                async with asyncio.timeout(self.limits.handshake_timeout):
                    await _server_handshake(conn, self.secret, self.name)
            except (WireError, asyncio.IncompleteReadError, TimeoutError, OSError) as e:
                self.refused += 1
                logger.info('%s refused connection from %s: %s', self.name, conn.peer, e)
                return
            self.connections.add(conn)
            await self._serve(conn)
        except asyncio.CancelledError:
            pass
        finally:
            self.connections.discard(conn)
            writer.transport.abort()
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, conn: Connection) -> None:
        while True:
            try:
                frame = await conn.recv()
            except asyncio.IncompleteReadError:
                return
            except (ProtocolError, FrameTooLargeError) as e:
                self.refused += 1
                logger.warning('%s: bad frame from %s: %s', self.name, conn.peer, e)
                code = 'too-large' if isinstance(e, FrameTooLargeError) else 'protocol'
                with contextlib.suppress(OSError):
                    await conn.send(ERROR, {'code': code, 'message': str(e)})
                return
            except OSError:
                return
            try:
                reply = await self.handler(conn, frame)
            except WireError:
                raise
            except Exception as e:
                logger.exception('%s: handler failed for a frame from %s', self.name, conn.peer)
                reply = error_reply('internal', f'{self.name} failed: {e!r}')
            if reply is not None:
                try:
                    await conn.send(reply[0], reply[1], reply[2], request_id=frame.request_id)
                except OSError:
                    return


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
    """Open an authenticated asyncio connection to a :class:`Server`."""
    peer = f'{host}:{port}'
    key = _auth.as_secret(secret)
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=ssl,
                server_hostname=server_hostname if ssl else None,
                limit=_READER_LIMIT,
            )
            conn = Connection(reader, writer, limits or Limits())
            nonce = _auth.new_nonce()
            await conn.send(HELLO, hello_header(nonce, client))
            challenge = await read_frame(reader, HANDSHAKE_LIMITS)
            await conn.send(AUTH, answer_challenge(challenge, key, nonce, peer))
            conn.info = check_welcome(await read_frame(reader, HANDSHAKE_LIMITS), peer)
            return conn
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as e:
        raise WireConnectionError(f'cannot connect to {peer}: {e!r}') from e


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine on a new event loop (uvloop when installed)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
