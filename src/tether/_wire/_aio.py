"""Asyncio side of the wire, its server: :class:`Server` accepts authenticated
connections and dispatches each frame to a handler (or an inline handler, or a fast path).

The connection, the handler types and the client side are in :mod:`tether._wire._conn`.
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
from collections.abc import Callable, Coroutine
from typing import Any

from tether._wire import _auth
from tether._wire._conn import (
    _CHUNK,
    _MAX_HELD,
    Connection,
    Handler,
    InlineHandler,
    Later,
    RawReply,
    Reply,
    SecretLookup,
    error_reply,
    server_handshake,
)
from tether._wire._frame import (
    ERROR,
    Frame,
    Limits,
    flatten,
)
from tether._wire._handshake import (
    HANDSHAKE_LIMITS,
    PRE_AUTH_LIMITS,
)
from tether._wire._proto import FastFrame, FastPath, FrameMemory, FrameProtocol, FrameRouter
from tether.exceptions import (
    FrameTooLargeError,
    ProtocolError,
    ProtocolVersionError,
    WireError,
)

__all__ = ['Server']

logger = logging.getLogger(__name__)


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
                    await server_handshake(conn, self.secret, self.name)
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

        def guarded(frame: FastFrame) -> bool:
            claims = conn._claims
            try:
                return fast(frame)
            except Exception as e:
                logger.exception('%s: fast path failed for a frame from %s', self.name, conn.peer)
                if conn._claims == claims:
                    return False  # not claimed: the handler answers it
                if conn._busy:  # claimed, not answered yet
                    reply = error_reply('internal', f'{self.name} failed: {e!r}')
                    self.finish(conn, frame[2], reply)
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
