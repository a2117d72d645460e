"""A small Redis client (RESP2 over blocking sockets) for the agent exchanges.

Agent processes talk to Redis with a handful of commands. redis-py would add some 25 MiB
and a second or more of imports to every agent process, so the exchanges use this client:
a thread-safe pool of authenticated connections, pipelined batches, scripts by SHA with
a fallback to ``EVAL``, and one dedicated connection per blocking listener. Failures are
raised as :class:`~tether.exceptions.AgentError` naming the server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import select
import socket
import threading
from collections.abc import Sequence
from typing import Any

from tether._wire._pool import IdlePool
from tether.exceptions import AgentError

__all__ = [
    'Pipelining',
    'RedisConnectError',
    'RedisReplyError',
    'RespClient',
    'RespConnection',
    'Script',
]

_CRLF = b'\r\n'


class RedisReplyError(AgentError):
    """Redis answered a command with an error."""


class RedisConnectError(AgentError):
    """No connection to the server could be made (so no command was sent)."""


def _encode(args: Sequence[Any]) -> list[bytes]:
    parts = [b'*%d\r\n' % len(args)]
    for arg in args:
        if isinstance(arg, bytes | bytearray | memoryview):
            data = bytes(arg)
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, int | float):
            data = repr(arg).encode()
        else:
            raise TypeError(f'cannot send {type(arg).__name__} to Redis')
        parts.append(b'$%d\r\n' % len(data))
        parts.append(data)
        parts.append(_CRLF)
    return parts


class Pipelining:
    """What a RESP connection or client builds on its :meth:`pipeline`."""

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Run the commands; replies in order (errors as values)."""
        raise NotImplementedError

    def execute(self, *args: Any) -> Any:
        """Run one command; raise its error reply."""
        return _raised(self.pipeline([args])[0])

    def script(self, source: str) -> Script:
        """A callable that runs a Lua script (on a cluster, its keys must share one slot)."""
        return Script(self, source)


def _raised(reply: Any) -> Any:
    if isinstance(reply, RedisReplyError):
        raise reply
    return reply


class RespConnection(Pipelining):
    """One blocking connection to a Redis server.

    Args:
        host: Server host.
        port: Server port.
        db: Database number.
        password: Password for ``AUTH`` (``None``: none).
        timeout: Seconds a connect, send or receive may block (``None``: forever).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        db: int = 0,
        password: str | None = None,
        timeout: float | None = 10.0,
    ) -> None:
        self.where = f'Redis at {host}:{port}'
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise RedisConnectError(f'cannot connect to {self.where}: {e}') from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile('rb')
        self.broken = False
        try:
            if password is not None:
                self.execute('AUTH', password)
            if db:
                self.execute('SELECT', db)
        except BaseException:
            self.close()
            raise

    def stale(self) -> bool:
        """Whether an idle connection was closed by the server (a restart, a timeout).

        An idle connection has nothing to read: anything readable (the end of the
        stream, most often) means it cannot serve another command.
        """
        if self.broken:
            return True
        try:
            poller = select.poll()  # not select(): file descriptors above 1023 work too
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    def settimeout(self, timeout: float | None) -> None:
        """Change how long one operation may block."""
        self.sock.settimeout(timeout)

    def _read(self) -> Any:
        line = self.file.readline()
        if not line.endswith(_CRLF):
            raise ConnectionError('connection closed by the server')
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return rest
        if kind == b'-':
            return RedisReplyError(f'{self.where} answered: {rest.decode(errors="replace")}')
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError('connection closed in the middle of a reply')
            return data[:-2]
        if kind == b'*':
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise ConnectionError(f'not a Redis reply: {line[:40]!r}')

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Send the commands in one write and return their replies (errors as values)."""
        parts: list[bytes] = []
        for command in commands:
            parts.extend(_encode(command))
        try:
            self.sock.sendall(b''.join(parts))
            return [self._read() for _ in commands]
        except (OSError, ValueError) as e:
            self.broken = True
            raise AgentError(f'{self.where} failed: {e!r}') from e

    def close(self) -> None:
        """Close the socket."""
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


class Script:
    """A Lua script run by SHA (loaded with ``EVAL`` the first time a server lacks it)."""

    def __init__(self, client: Any, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        command = [self.sha, len(keys), *keys, *args]
        reply = self.client.pipeline([['EVALSHA', *command]])[0]
        if isinstance(reply, RedisReplyError) and 'NOSCRIPT' in str(reply):
            reply = self.client.pipeline([['EVAL', self.source, *command[1:]]])[0]
        return _raised(reply)


@dataclasses.dataclass(eq=False, repr=False)
class RespClient(Pipelining, IdlePool[RespConnection]):
    """A thread-safe pool of :class:`RespConnection` to one server.

    Args:
        host: Server host.
        port: Server port.
        db: Database number.
        password: Password for ``AUTH``.
        timeout: Seconds one operation may block.
    """

    host: str
    port: int
    _: dataclasses.KW_ONLY
    db: int = 0
    password: str | None = None
    timeout: float = 10.0
    _idle: list[RespConnection] = dataclasses.field(default_factory=list, init=False)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, init=False)
    _closed: bool = dataclasses.field(default=False, init=False)

    def connect(self, timeout: float | None = None, *, key: Any = '') -> RespConnection:
        """A new connection of its own (for blocking commands; ``key``: on a cluster)."""
        return RespConnection(
            self.host,
            self.port,
            db=self.db,
            password=self.password,
            timeout=timeout if timeout is not None else self.timeout,
        )

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Run the commands on a pooled connection; replies in order (errors as values)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        while conn is not None and conn.stale():
            # The server closed it while it was idle (it restarted ...): the command was
            # never sent on it, so another connection can take it safely.
            conn.close()
            with self._lock:
                conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.connect()
        try:
            replies = conn.pipeline(commands)
        except AgentError:
            conn.close()
            raise
        with self._lock:
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)
        return replies

    def refresh_quietly(self) -> None:
        """Nothing to do on one server (on a cluster: read the slot map again)."""
