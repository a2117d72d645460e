"""tether's own Redis connections, for the raw protocol path of the Redis connector.

The connector sends large values from the caller's memory and reads replies straight into
their final buffers (:mod:`tether.connectors._redis_io`). That needs the socket itself,
which redis-py keeps private; so these requests go over connections of tether's own,
opened, authenticated and pooled here, and redis-py serves the other commands. The seam
is this module's :class:`RawPool`: a pool of :class:`RawConnection` (a connected,
authenticated socket) to one server.

Errors are redis-py's (``redis.ConnectionError``, ``redis.TimeoutError``,
``redis.ResponseError``, ``redis.AuthenticationError``), so the connector's retry and
error mapping treat both paths alike. Pools are fork-safe: a child process never uses a
socket its parent opened (it opens its own on first use).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import socket
import ssl as _ssl
import struct
import termios
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.connectors._redis_io import Packer, ReplyReader
from tether.serialize import BytesLike

if TYPE_CHECKING:
    from tether.connectors.redis import RedisConnectorConfig

__all__ = ['RawConnection', 'RawPool', 'os_timeouts', 'send_all']

# At most this many buffers per sendmsg (Linux's IOV_MAX is 1024).
_IOV_MAX = 512
# Forks of this process so far, as the child sees it: a pool made before a fork is not
# the child's (a counter bumped by a fork hook, not a getpid system call per request).
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def os_timeouts(sock: socket.socket, timeout: float | None) -> None:
    """Make ``sock`` blocking, each send and receive bounded by ``timeout`` seconds in
    the kernel (``SO_SNDTIMEO``/``SO_RCVTIMEO``), not by Python's ``settimeout``.

    With ``settimeout``, CPython polls before every send and receive (two system calls
    more per round trip); a blocking socket with kernel timeouts makes just the send and
    the receive, and one that times out fails with ``EAGAIN`` (``BlockingIOError``), which
    the readers and :func:`send_all` raise as ``redis.TimeoutError``. ``None``: no bound
    (as ``settimeout(None)``).
    """
    sock.settimeout(None)
    if timeout is None:
        return
    # (0 would mean "no timeout" to the kernel: at least one microsecond)
    micros = max(1, round(timeout * 1e6))
    timeval = struct.pack('ll', micros // 1_000_000, micros % 1_000_000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


class RawConnection:
    """One connected socket to a Redis server, authenticated and on its database, and
    the reader of its replies (its buffer reused from request to request)."""

    __slots__ = ('_waiting', 'reader', 'sock')

    def __init__(self, sock: socket.socket, redis: Any) -> None:
        self.sock = sock
        self.reader = ReplyReader(sock, redis)
        self._waiting = bytearray(4)  # (FIONREAD's answer)

    def close(self) -> None:
        """Close the socket (no error if it is already closed)."""
        with contextlib.suppress(OSError):
            self.sock.close()

    def quiet(self) -> bool:
        """Whether no byte waits to be read (a reply nobody asked this connection for:
        it is out of step and never lent). One ``ioctl``, about a microsecond."""
        try:
            fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, self._waiting, True)
        except OSError:
            return False
        return self._waiting == b'\0\0\0\0' and not (
            isinstance(self.sock, _ssl.SSLSocket) and self.sock.pending()
        )

    def __del__(self) -> None:
        # A pool dropped without close() (its connector garbage-collected): closed
        # quietly, as redis-py's connections are.
        self.close()


def send_all(sock: socket.socket, buffers: Sequence[BytesLike], redis: Any) -> None:
    """Send ``buffers`` in order, with vectored writes (one copy, by the kernel)."""
    try:
        if len(buffers) == 1 and type(buffers[0]) is bytes and type(sock) is socket.socket:
            sock.sendall(buffers[0])  # (a small request: one send, no views)
            return
        views = [memoryview(b).cast('B') for b in buffers if memoryview(b).nbytes]
        if isinstance(sock, _ssl.SSLSocket):  # no sendmsg over TLS
            for view in views:
                sock.sendall(view)
            return
        while views:
            sent = sock.sendmsg(views[:_IOV_MAX])
            while sent:
                if sent >= views[0].nbytes:
                    sent -= views[0].nbytes
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0
    except (TimeoutError, BlockingIOError) as e:  # (BlockingIOError: SO_SNDTIMEO)
        raise redis.TimeoutError(f'timed out sending a request: {e}') from e
    except OSError as e:
        raise redis.ConnectionError(f'error sending a request: {e}') from e


@dataclasses.dataclass(eq=False, repr=False)
class RawPool:
    """Connections of tether's own to one Redis server (see the module's documentation).

    Args:
        redis: The ``redis`` module (its exceptions are raised).
        host: The server's host.
        port: The server's port.
        settings: The connector's settings: the database selected on each connection
            (``db``), the user for ``AUTH`` (``username``), TLS or not (``ssl``: the
            system's default trust store and host check), the seconds one read or write
            may block (``socket_timeout``) and connecting may take (``connect_timeout``).
        password: Password for ``AUTH``, if any.
        max_idle: Idle connections kept for reuse (more are closed when released).
    """

    redis: Any
    host: str
    port: int
    settings: RedisConnectorConfig
    password: str | None
    max_idle: int = dataclasses.field(default=64, kw_only=True)

    def __post_init__(self) -> None:
        self._ssl = _ssl.create_default_context() if self.settings.ssl else None
        self._idle: list[RawConnection] = []
        self._lock = threading.Lock()
        self._forks = _forks

    def __repr__(self) -> str:
        return f'RawPool({self.host}:{self.port})'

    def get(self) -> RawConnection:
        """An idle connection, or a new one.

        An idle connection with bytes waiting to be read (a reply nobody asked this
        connection for) is dropped, never lent.
        """
        if self._forks != _forks:
            # Forked: the parent's sockets are not ours, nor its lock (another thread of
            # the parent may have held it at the fork: it would never be released here).
            self._lock = threading.Lock()
            self._idle = []
            self._forks = _forks
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn = self._idle.pop()
            if conn.quiet():
                return conn
            conn.close()
        return self._connect()

    def release(self, conn: RawConnection) -> None:
        """Give back a connection whose replies were all read; one whose reader still
        holds unread bytes is closed, never lent again (its next reply could be taken
        for another request's)."""
        if not conn.reader.clean():
            conn.close()
            return
        with self._lock:
            if self._forks == _forks and len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle connections (those in use are closed when released)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self.max_idle = 0
        for conn in idle:
            conn.close()

    def _connect(self) -> RawConnection:
        redis, settings = self.redis, self.settings
        try:
            sock = socket.create_connection((self.host, self.port), settings.connect_timeout)
        except TimeoutError as e:
            raise redis.TimeoutError(f'timed out connecting to {self.host}:{self.port}') from e
        except OSError as e:
            raise redis.ConnectionError(
                f'error connecting to {self.host}:{self.port}: {e}',
            ) from e
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None:
                sock.settimeout(settings.socket_timeout)
                sock = self._ssl.wrap_socket(sock, server_hostname=self.host)
            else:
                os_timeouts(sock, settings.socket_timeout)
            conn = RawConnection(sock, self.redis)
            self._handshake(conn)
        except BaseException:
            sock.close()
            raise
        return conn

    def _handshake(self, conn: RawConnection) -> None:
        username, password, db = self.settings.username, self.password, self.settings.db
        packer = Packer()
        replies = 0
        if password is not None:
            args = (username, password) if username else (password,)
            packer.command(b'AUTH', *args)
            replies += 1
        if db:
            packer.command(b'SELECT', b'%d' % db)
            replies += 1
        if not replies:
            return
        send_all(conn.sock, packer.finish(), self.redis)
        reader = conn.reader
        for reply in [reader.simple() for _ in range(replies)]:
            if isinstance(reply, Exception):
                text = str(reply)
                if 'WRONGPASS' in text or 'NOAUTH' in text or 'AUTH' in text:
                    raise self.redis.AuthenticationError(text)
                raise reply
