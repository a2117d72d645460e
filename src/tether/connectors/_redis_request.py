"""Requests on the Redis connector's raw path: replies matched, retried, redirected.

:class:`Requester` sends a request (the commands of a :class:`~._redis_io.Packer`) on a
connection of tether's own to the server that holds its key
(:class:`~._redis_route.Router`) and reads the replies with the caller's function:

* RESP has no request ids, so replies are matched by count: a connection goes back to the
  pool only once exactly as many whole replies were read as commands were sent and no
  byte is left over (RESP2 sends nothing unasked), else it is dropped. A new connection
  (one per process after a fork) has nothing before its first request. (Each request
  used to start with an ``ECHO`` of a fresh nonce: a server command per request, 3-28%
  of a 1-100 KB round trip, checking what the count already guarantees.)
* every reply is read before an error is raised, so an error reply leaves the connection
  clean and it goes back to the pool; any other failure drops it;
* a dropped connection is retried with exponential back-off (the commands sent this way
  are idempotent); on a cluster, the slot map is read again and the key's shard asked
  again (a master that went away has a successor), ``MOVED`` refreshes the map and
  ``ASK`` asks the named shard once, after ``ASKING``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from tether.connectors._redis_conn import RawPool, send_all
from tether.connectors._redis_io import Packer, ReplyReader
from tether.connectors._redis_route import Router, redirect
from tether.exceptions import ConnectorError

__all__ = ['Errors', 'Requester']

_R = TypeVar('_R')


class Requester:
    """Raw requests of one connector (see the module's documentation).

    Args:
        redis: The ``redis`` module (its exceptions are raised).
        router: Where keys live.
        retries: Attempts after the first when a server cannot be reached.
        label: How errors name the server (``Redis at host:port``).
    """

    def __init__(self, redis: Any, router: Router, retries: int, label: str) -> None:
        self.redis = redis
        self.router = router
        self.retries = retries
        self.cluster = router.cluster
        self.label = label

    def request(self, name: str, packer: Packer, read: Callable[[ReplyReader], _R]) -> _R:
        """One request about key ``name`` to the server that holds it, following a
        cluster's redirections (``MOVED``: the slot map is read again; ``ASK``: the
        named shard is asked once, after ``ASKING``)."""
        if not self.cluster:  # (one server: no redirections)
            return self.round_trip(self.router.pool_for(name), packer, read)
        redis = self.redis
        pool = self.router.pool_for(name)
        asking = False
        for attempt in range(self.retries + 2):
            try:
                return self.round_trip(pool, packer, read, asking=asking)
            except redis.ResponseError as e:
                moved = redirect(e)
                if moved is None or attempt == self.retries + 1:
                    raise
                kind, host, port = moved
                if kind == 'MOVED':
                    self.router.refresh()
                pool, asking = self.router.pool(host, port), kind == 'ASK'
            except (redis.ConnectionError, redis.TimeoutError):
                # (One server is retried in round_trip.) The shard went away, the slot map
                # was read again, and the key's new shard is asked.
                if attempt == self.retries + 1:
                    raise
                self._backoff(attempt)
                pool, asking = self.router.pool_for(name), False
        raise ConnectorError(f'{self.label}: key {name!r} kept being redirected')

    def round_trip(
        self,
        pool: RawPool,
        packer: Packer,
        read: Callable[[ReplyReader], _R],
        *,
        asking: bool = False,
    ) -> _R:
        """Send ``packer``'s commands on a pooled connection of tether's own and read
        their replies with ``read``.

        RESP has no request ids: the replies are known to answer this request because
        the connection goes back to the pool only after exactly as many whole replies
        as commands were read, with no byte left over (else it is dropped and nothing
        is returned). Retried on a dropped connection
        (the commands sent this way are idempotent: SETs, pushing chunks onto a
        temporary key cleared first, GET and LRANGE); on a cluster, the slot map is read
        again instead and the error raised (the caller asks the key's shard again: a
        master that went away has a successor). Every reply is read before an error is
        raised, so an error reply leaves the connection clean; any other failure (a
        timeout, an interrupt mid-send) drops it.
        """
        redis = self.redis
        command = packer.finish()
        if asking:
            command = [b'*1\r\n$6\r\nASKING\r\n', *command]
        expected = packer.commands + (1 if asking else 0)
        attempts = 1 if self.cluster else self.retries + 1
        for attempt in range(attempts):
            try:
                conn = pool.get()
            except redis.AuthenticationError:
                raise  # (a retry would be refused the same way)
            except (redis.ConnectionError, redis.TimeoutError):
                self.router.refresh_after_error()
                if attempt + 1 == attempts:
                    raise
                self._backoff(attempt)
                continue
            reader = conn.reader
            reader.replies = 0
            try:
                send_all(conn.sock, command, redis)
                if asking:
                    reader.simple()
                result = read(reader)
                self._in_step(reader, expected, pool)
            except redis.ResponseError:
                if reader.replies == expected and reader.clean():
                    pool.release(conn)
                else:
                    conn.close()
                raise
            except (redis.ConnectionError, redis.TimeoutError):
                conn.close()
                self.router.refresh_after_error()
                if attempt + 1 == attempts:
                    raise
                self._backoff(attempt)
            except BaseException:
                conn.close()
                raise
            else:
                pool.release(conn)
                return result
        raise AssertionError('unreachable')  # pragma: no cover

    def per_key(
        self,
        names: Sequence[str],
        add: Callable[[Packer, int], None],
        read_one: Callable[[ReplyReader, int], Any],
    ) -> list[Any]:
        """One command per key (``add(packer, i)`` for ``names[i]``), one request per
        server (on a cluster, to its shards in parallel); each key's reply, as
        ``read_one(reader, i)`` reads it (error replies as exceptions, not raised).

        On a cluster, the keys of a shard that went away, and keys answered by a
        redirection, are sent once more after the slot map is read again; what still
        fails is returned as the exception (the caller retries those one by one).
        """
        redis = self.redis
        out: list[Any] = [None] * len(names)
        if not names:
            return out

        def send(group: tuple[RawPool, list[int]]) -> None:
            pool, idx = group
            packer = Packer()
            for i in idx:
                add(packer, i)

            def read(reader: ReplyReader) -> list[Any]:
                return [read_one(reader, i) for i in idx]

            try:
                replies = self.round_trip(pool, packer, read)
            except (redis.ConnectionError, redis.TimeoutError) as e:
                if not self.cluster:
                    raise
                replies = [e] * len(idx)
            for i, reply in zip(idx, replies, strict=True):
                out[i] = reply

        pending = list(range(len(names)))
        for attempt in range(2 if self.cluster else 1):
            groups = self.router.group([names[i] for i in pending])
            self.router.map(send, [(pool, [pending[j] for j in idx]) for pool, idx in groups])
            pending = [i for i in pending if _retry_in_cluster(out[i], redis)]
            if not pending:
                break
            self.router.refresh_after_error()
            self._backoff(attempt)
        return out

    def _backoff(self, attempt: int) -> None:
        time.sleep(min(1.0, 0.05 * 2**attempt))

    def _in_step(self, reader: ReplyReader, expected: int, pool: RawPool) -> None:
        """Check that the request's replies were read whole, and nothing more.

        Raises:
            ConnectorError: another count of replies was read, or bytes are left over
                (the connection is then dropped, and no data is returned).
        """
        if reader.replies != expected or not reader.clean():
            raise ConnectorError(
                f'Redis at {pool.host}:{pool.port}: {reader.replies} replies read for '
                f'{expected} commands, or bytes left over (the connection was out of '
                'step); it was dropped and nothing was returned',
            )


class Errors:
    """A context that raises redis-py's errors as :class:`~tether.exceptions.ConnectorError`
    saying what failed (a class, not a generator: it wraps every request).

    Args:
        redis: The ``redis`` module.
        label: How the message names the server (``Redis at host:port``).
        what: The operation (``get``, ``put`` ...).
        retries: The retries made before giving up, for the message.
    """

    __slots__ = ('label', 'redis', 'retries', 'what')

    def __init__(self, redis: Any, label: str, what: str, retries: int) -> None:
        self.redis = redis
        self.label = label
        self.what = what
        self.retries = retries

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if e is None:
            return
        redis, label, what = self.redis, self.label, self.what
        if isinstance(e, redis.AuthenticationError):
            raise ConnectorError(
                f'{label} refused the credentials during {what}: {e}. '
                'Check the username and password',
            ) from e
        if isinstance(e, redis.ConnectionError | redis.TimeoutError):
            raise ConnectorError(
                f'{label} unreachable during {what} after {self.retries} retries: {e}. '
                'Is the server running?',
            ) from e
        if isinstance(e, redis.RedisError):
            raise ConnectorError(f'{label} failed during {what}: {e}') from e
        if isinstance(e, OSError):
            raise ConnectorError(f'I/O error talking to {label} ({what}): {e}') from e


def _retry_in_cluster(reply: Any, redis: Any) -> bool:
    if isinstance(reply, redis.ConnectionError | redis.TimeoutError):
        return True
    return isinstance(reply, redis.ResponseError) and redirect(reply) is not None
