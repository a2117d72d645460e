"""A small synchronous client: blocking sockets, vectored sends, ``recv_into`` reads.

:class:`SyncConnection` is one authenticated socket; :class:`SyncClient` keeps a pool of
them to one server so that threads share connections and no operation opens its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import ssl as _ssl
import struct
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tether._wire import _auth
from tether._wire._cleanup import closed_on_error
from tether._wire._frame import (
    AUTH,
    ERROR,
    HELLO,
    PREFIX,
    PROTOCOL_VERSION,
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
    check_reply,
    check_welcome,
    hello_header,
)
from tether._wire._pool import IdlePool
from tether.exceptions import ProtocolError, ProtocolVersionError, WireConnectionError, WireError

__all__ = ['SyncClient', 'SyncConnection']

logger = logging.getLogger(__name__)

_IOV_MAX = 512
_SMALL = 64 * 1024
_READ_AHEAD = 64 * 1024


def _kernel_timeouts(sock: socket.socket, timeout: float) -> None:
    """Bound every send and receive by ``timeout`` in the kernel (no poll per call).

    A Python-level socket timeout polls before every ``recv``, which halves throughput
    for large transfers; ``SO_RCVTIMEO``/``SO_SNDTIMEO`` cost nothing per call.
    """
    sock.settimeout(None)
    sec = int(timeout)
    tv = struct.pack('ll', sec, int((timeout - sec) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def _connect_unix(path: str, timeout: float) -> socket.socket | None:
    """A socket connected to the Unix socket at ``path``, or ``None`` if it cannot be."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except (OSError, ValueError) as e:  # ValueError: a path too long for a socket
        sock.close()
        logger.debug('no Unix socket at %s (%s): connecting over TCP', path, e)
        return None
    return sock


class SyncConnection:
    """One authenticated blocking connection to a wire server.

    Args:
        host: Server address.
        port: Server port.
        secret: Shared secret (``None``: the server must not require one).
        ssl: Client TLS context, if the server uses TLS.
        server_hostname: Name checked against the server certificate.
        timeout: Seconds any single connect, send or receive may block.
        limits: Limits applied to frames received from the server.
        client: Name announced to the server.
        version: Protocol version to speak (tests use this to check refusals).
        unix_path: The server's Unix socket (see :class:`~tether._wire.Server`), tried
            before ``host:port``: a client on the server's host skips the TCP stack. If
            it cannot be connected (no socket there, nobody listening, another host's
            file on a shared file system), ``host:port`` is used.

    Attributes:
        unix: Whether this connection is over the Unix socket.

    Raises:
        WireConnectionError: if the server cannot be reached.
        AuthenticationError: if the secrets differ.
        ProtocolVersionError: if the server speaks another version.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        secret: str | bytes | None = None,
        ssl: _ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        timeout: float = 30.0,
        limits: Limits | None = None,
        client: str = 'tether',
        version: int = PROTOCOL_VERSION,
        unix_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.peer = f'{host}:{port}'
        self.limits = limits or Limits()
        self.version = version
        self.reply_started = False
        self.pid = os.getpid()
        # Request ids start at a random point: a reply to another connection's (or another
        # process's) request can then never pass for the reply to this one.
        self._next_id = secrets.randbits(48)
        self._rbuf = bytearray(_READ_AHEAD)
        self._rstart = self._rend = 0
        self._vectored = ssl is None
        path = None if unix_path is None else os.fspath(unix_path)
        sock = None if path is None else _connect_unix(path, timeout)
        self.unix = sock is not None
        if sock is None:
            try:
                sock = socket.create_connection((host, port), timeout=timeout)
            except OSError as e:
                raise WireConnectionError(
                    f'cannot connect to {self.peer}: {e}. Is the server running?',
                ) from e
        else:
            self.peer = f'unix:{path}'
        try:
            if not self.unix:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _kernel_timeouts(sock, timeout)
            if ssl is not None:
                sock = ssl.wrap_socket(sock, server_hostname=server_hostname or host)
            self.sock: socket.socket = sock
            self._handshake(secret, client)
        except BaseException as e:
            sock.close()
            if isinstance(e, OSError):
                raise WireConnectionError(f'handshake with {self.peer} failed: {e}') from e
            raise

    def _handshake(self, secret: str | bytes | None, client: str) -> None:
        nonce = _auth.new_nonce()
        self.send(HELLO, hello_header(nonce, client))
        challenge = self.recv(HANDSHAKE_LIMITS, any_version=True)
        self.send(AUTH, answer_challenge(challenge, _auth.as_secret(secret), nonce, self.peer))
        self.info = check_welcome(self.recv(HANDSHAKE_LIMITS, any_version=True), self.peer)

    # Low level -------------------------------------------------------------------------

    def send(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        request_id: int = 0,
        flags: int = 0,
    ) -> None:
        """Write one frame (payloads are sent from their own memory)."""
        sizes, buffers = flatten(payloads)
        head = encode_head(mtype, header, sizes, request_id, flags, self.version)
        if sum(sizes) <= _SMALL:
            self.sock.sendall(b''.join([head, *buffers]))
        elif not self._vectored:
            self.sock.sendall(head)
            for buf in buffers:
                self.sock.sendall(buf)
        else:
            self._sendmsg([memoryview(head), *buffers])

    def _sendmsg(self, buffers: list[memoryview]) -> None:
        i = 0
        while i < len(buffers):
            sent = self.sock.sendmsg(buffers[i : i + _IOV_MAX])
            while i < len(buffers) and sent >= buffers[i].nbytes:
                sent -= buffers[i].nbytes
                i += 1
            if sent:
                buffers[i] = buffers[i][sent:]

    def _recv_into(self, view: memoryview) -> None:
        """Fill ``view``: first from read-ahead bytes, then straight from the socket."""
        if self._rend > self._rstart:
            take = min(view.nbytes, self._rend - self._rstart)
            view[:take] = self._rbuf[self._rstart : self._rstart + take]
            self._rstart += take
            view = view[take:]
        if view.nbytes and view.nbytes < _READ_AHEAD // 2:
            # Small read: one recv that may also bring the rest of the frame.
            self._fill(view.nbytes)
            view[:] = self._rbuf[self._rstart : self._rstart + view.nbytes]
            self._rstart += view.nbytes
            return
        while view.nbytes:
            n = self.sock.recv_into(view)
            if n == 0:
                raise WireConnectionError(
                    f'{self.peer} closed the connection in the middle of a frame',
                )
            view = view[n:]

    def _fill(self, need: int) -> None:
        """Read until at least ``need`` bytes are buffered (read-ahead buffer is empty)."""
        self._rstart = self._rend = 0
        rbuf = memoryview(self._rbuf)
        while self._rend < need:
            n = self.sock.recv_into(rbuf[self._rend :])
            if n == 0:
                raise WireConnectionError(
                    f'{self.peer} closed the connection in the middle of a frame',
                )
            self._rend += n

    def _recv_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        if n:
            self._recv_into(memoryview(buf))
        return buf

    def recv(self, limits: Limits | None = None, *, any_version: bool = False) -> Frame:
        """Read one frame; each payload lands in its own preallocated buffer."""
        limits = limits or self.limits
        prefix = bytes(self._recv_exact(PREFIX.size))
        self.reply_started = True
        version, flags, mtype, rid, hlen, count = unpack_prefix(prefix, limits)
        if version != self.version and not (any_version and mtype == ERROR):
            raise ProtocolVersionError(
                f'{self.peer} sent protocol version {version}, this side speaks {self.version}',
            )
        sizes = check_sizes(bytes(self._recv_exact(8 * count)), count, limits) if count else ()
        header = decode_header(bytes(self._recv_exact(hlen))) if hlen else {}
        payloads = [self._recv_exact(n) for n in sizes]
        return Frame(mtype, header, payloads, rid, flags, version)

    # Requests --------------------------------------------------------------------------

    def request(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
    ) -> Frame:
        """Send a request and return the reply (``ERROR`` replies are raised).

        Raises:
            WireConnectionError: if the connection fails or times out (the connection is
                then unusable and closed).
            RemoteError: (or a subclass of WireError) if the server answered with an error.
        """
        if self.pid != os.getpid():
            # A connection inherited across fork: its socket is shared with the parent,
            # which would read our replies (and we its). Never use it.
            raise WireConnectionError(
                f'connection to {self.peer} was opened by process {self.pid}, not by this '
                f'process ({os.getpid()}): each process opens its own',
            )
        self._next_id += 1
        rid = self._next_id
        self.reply_started = False
        try:
            try:
                self.send(mtype, header, payloads, request_id=rid)
            except (ConnectionResetError, BrokenPipeError):
                # The server may have refused the request (a frame too large, say) and
                # closed before reading all of it: its answer can be waiting to be read.
                frame = self._answer_after_failed_send()
                if frame is None:
                    raise
            else:
                frame = self.recv()
        except WireError:
            self.close()
            raise
        except BlockingIOError as e:
            self.close()
            raise WireConnectionError(f'request to {self.peer} timed out: {e!r}') from e
        except OSError as e:
            self.close()
            raise WireConnectionError(f'request to {self.peer} failed: {e!r}') from e
        try:
            return check_reply(frame, rid, self.peer)
        except ProtocolError:
            self.close()
            raise

    def _answer_after_failed_send(self) -> Frame | None:
        """A frame the server sent before the connection broke, if one can be read."""
        try:
            return self.recv()
        except (OSError, WireError):
            return None

    def close(self) -> None:
        """Close the socket (in a forked child: only this process's descriptor)."""
        sock = getattr(self, 'sock', None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __del__(self) -> None:
        # A pooled connection of a client nobody closed: close it quietly.
        self.close()


class SyncClient(IdlePool[SyncConnection]):
    """A thread-safe pool of :class:`SyncConnection` to one server.

    Connections are opened on demand and reused. A request that fails on a reused
    connection before any byte of the reply arrived (the server restarted, or dropped an
    idle connection) is retried once on a fresh one, so requests must be idempotent or
    the caller passes ``retry=False``. A failure in the middle of a reply is not retried.

    The pool is fork-safe: a child process (``fork`` start method, or ``os.fork``) never
    uses a connection its parent opened; it drops the inherited ones (without touching
    the parent's sessions) and opens its own.

    Args:
        host: Server address.
        port: Server port.
        on_connect: Called with each new connection once it is authenticated, before it
            carries a request (a request that sets the connection up, say); what it
            raises closes the connection and propagates.
        kwargs: Passed to :class:`SyncConnection`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        on_connect: Callable[[SyncConnection], None] | None = None,
        **kwargs: Any,
    ) -> None:
        self.host = host
        self.port = port
        self._kwargs = kwargs
        self._on_connect = on_connect
        self._idle = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        _CLIENTS.add(self)

    def __repr__(self) -> str:
        return f'SyncClient({self.host!r}, {self.port})'

    def _after_fork(self) -> None:
        """In a new child process: forget the parent's connections and lock."""
        self._lock = threading.Lock()
        idle, self._idle = self._idle, []
        self._pid = os.getpid()
        for conn in idle:
            # Closing our descriptor leaves the parent's socket open and its session intact.
            conn.close()

    def _take(self) -> tuple[SyncConnection, bool]:
        if self._pid != os.getpid():
            self._after_fork()
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._new(), False

    def _new(self) -> SyncConnection:
        conn = SyncConnection(self.host, self.port, **self._kwargs)
        if self._on_connect is not None:
            with closed_on_error(conn.close):
                self._on_connect(conn)
        return conn

    def _give(self, conn: SyncConnection) -> None:
        with self._lock:
            if not self._closed and conn.pid == self._pid:
                self._idle.append(conn)
                return
        conn.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[SyncConnection]:
        """Borrow a connection (closed instead of returned if the block raises)."""
        conn, _ = self._take()
        with closed_on_error(conn.close):
            yield conn
        self._give(conn)

    def request(
        self,
        mtype: int,
        header: dict[str, Any] | None = None,
        payloads: Sequence[Payload] = (),
        *,
        retry: bool = True,
    ) -> Frame:
        """Send a request on a pooled connection and return the reply."""
        conn, reused = self._take()
        try:
            frame = conn.request(mtype, header, payloads)
        except WireConnectionError:
            if not (retry and reused and not conn.reply_started):
                raise
            logger.debug('stale connection to %s:%s, retrying once', self.host, self.port)
            conn = self._new()
            frame = conn.request(mtype, header, payloads)
        except WireError:
            conn.close()
            raise
        self._give(conn)
        return frame


_CLIENTS: weakref.WeakSet[SyncClient] = weakref.WeakSet()


def _reset_clients_after_fork() -> None:
    for client in list(_CLIENTS):
        client._after_fork()


os.register_at_fork(after_in_child=_reset_clients_after_fork)
