"""Connector for Redis, or any server that speaks the Redis protocol (KeyDB, Valkey ...).

Values go to and from the server over connections of tether's own
(``tether.connectors._redis_conn``): written from their own memory with a vectored send,
read straight into one buffer (``tether.connectors._redis_io``); a batch is one round trip.
redis-py (with hiredis when installed) serves the other commands (waiting for a key,
clearing a prefix).

With ``cluster=True`` the server is one node of a Redis Cluster: keys spread over its
shards by hash slot (a key's readiness token and chunks share its slot through a hash tag),
a batch is split by shard and the parts sent in parallel, and ``MOVED``/``ASK`` replies and
failed-over masters are followed (``tether.connectors._redis_route``).

Values over ``chunk_size`` (4 MiB by default) are stored as a Redis list of chunks of
(almost) equal size, pushed onto a temporary key and renamed to the key once complete
(readers see all of it or nothing). Not only because a Redis string holds at most 512 MB:
Redis's allocator (jemalloc) serves allocations of 8 MiB and more from an arena that
returns their memory to the kernel as soon as they are freed, so a 10 MB string costs the
server a page fault per 4 KB page when it is stored, and again for the reply buffer of
every GET (about half the server's time for such values). Chunks under 4 MiB reuse the
memory of earlier ones.

Credentials are never part of ``RedisConnector.config()``, so they never travel in a
proxy, a store config or a stream event. A connector rebuilt from a config finds its
password (see :class:`RedisConnector`) in the environment variable or secret file the
config names (``password_env``, ``password_file``), else in a connector of this process
that was given the password for the same server and user.

A server that is down or stops answering gives a :class:`~tether.exceptions.ConnectorError`
after a bounded number of retries (``retries`` attempts with exponential back-off, each
bounded by ``connect_timeout``/``socket_timeout``); once the server is back, the same
connector works again without being rebuilt.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Self, TypeVar

from tether.connectors._context import ClosingContext
from tether.connectors._redis_auth import (
    check_clear_prefix,
    redact_url,
    resolve_password,
)
from tether.connectors._redis_conn import RawPool
from tether.connectors._redis_io import Decoded, Packer, ReplyReader, raise_first, split
from tether.connectors._redis_request import Errors, Requester
from tether.connectors._redis_route import Router
from tether.connectors._util import glob_escape, total_size
from tether.connectors.base import ConnectorBase, Decode
from tether.connectors.config import ConfiguredConnector, ConnectorConfigModel, secret_field
from tether.connectors.redis_client import import_redis, make_client, retry_options
from tether.exceptions import ConfigError, ConnectorClosedError
from tether.serialize import BytesLike, deserialize

__all__ = ['RedisConnector', 'RedisConnectorConfig', 'RedisKey']

# 4 MiB less room for Redis's own headers, so that a chunk (its list node, the query or
# reply buffer that carries it) fits one 4 MiB allocation.
_DEFAULT_CHUNK = 4 * 1024 * 1024 - 1024
_R = TypeVar('_R')
_READY = ':ready'
_WRITING = ':writing'
# Renames the chunks pushed onto KEYS[1] to KEYS[2] (without the temporary key's expiry)
# if all ARGV[1] of them are there; else deletes them (the server refused one: its error
# reply says why).
# A chunked value is pushed onto '<key>:writing', which _BEGIN makes (a fresh list of one
# empty marker, with its expiry, in one step: a writer that dies midway leaves a key that
# expires) and _PUBLISH renames to the key once every chunk is there (the marker dropped).
_BEGIN = (
    b"redis.call('DEL', KEYS[1]) redis.call('RPUSH', KEYS[1], '') "
    b"return redis.call('EXPIRE', KEYS[1], ARGV[1])"
)
_PUBLISH = (
    b"if redis.call('LLEN', KEYS[1]) == tonumber(ARGV[1]) + 1 then "
    b"redis.call('LPOP', KEYS[1]) "
    b"redis.call('RENAME', KEYS[1], KEYS[2]) "
    b"return redis.call('PERSIST', KEYS[2]) end "
    b"redis.call('DEL', KEYS[1]) "
    b"return redis.error_reply('ERR a chunk of the value was refused: nothing stored')"
)
_READY_TTL = 24 * 3600


class RedisKey(NamedTuple):
    """Key of an object in a :class:`RedisConnector`: the Redis key."""

    redis_key: str


class RedisConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`RedisConnector` (see its arguments; ``password`` is
    never dumped)."""

    hostname: str = 'localhost'
    port: int = 6379
    db: int = 0
    username: str | None = None
    password: str | None = secret_field()
    password_env: str | None = None
    password_file: str | None = None
    ssl: bool = False
    prefix: str = 'tether:'
    socket_timeout: float = 30.0
    connect_timeout: float = 2.0
    retries: int = 3
    max_connections: int | None = None
    chunk_size: int = _DEFAULT_CHUNK
    clear: bool = False
    cluster: bool = False


class RedisConnector(ConfiguredConnector, ClosingContext, ConnectorBase[RedisKey]):
    """A connector that stores objects in a Redis server.

    Args:
        hostname: Host of the Redis server.
        port: Port of the Redis server.
        db: Database number.
        username: User for ``AUTH`` (Redis 6 ACLs), if any.
        password: Password for ``AUTH``, for this process only: it is never in
            :meth:`config`, and it is remembered (in memory) for connectors rebuilt in
            this process for the same server and user.
        password_env: Name of an environment variable holding the password (kept in
            :meth:`config`, so rebuilt connectors read it in their own process).
        password_file: A file holding the password (surrounding whitespace ignored; kept
            in :meth:`config` by path).
        ssl: Connect with TLS.
        prefix: Prefix of every key this connector writes (handy for counting or
            clearing a run's keys with ``SCAN``).
        socket_timeout: Seconds a single read or write may block.
        connect_timeout: Seconds a connection attempt may take.
        retries: Attempts after the first when the server cannot be reached.
        max_connections: Size of the connection pool (default: unbounded).
        chunk_size: Values larger than this are stored as a list of chunks of at most
            this size (see the module's documentation; Redis refuses strings over 512 MB).
        clear: Delete every key that starts with ``prefix`` (literally, never as a glob)
            when :meth:`close` is called; refused with an empty prefix.
        cluster: The server is a node of a Redis Cluster (see the module's
            documentation); ``db`` must then be 0 and ``prefix`` hold no ``{``.
    """

    def __init__(
        self,
        hostname: str = 'localhost',
        port: int = 6379,
        *,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        password_env: str | None = None,
        password_file: str | None = None,
        ssl: bool = False,
        prefix: str = 'tether:',
        socket_timeout: float = 30.0,
        connect_timeout: float = 2.0,
        retries: int = 3,
        max_connections: int | None = None,
        chunk_size: int = _DEFAULT_CHUNK,
        clear: bool = False,
        cluster: bool = False,
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
            raise ValueError(f'chunk_size must be a positive number of bytes, got {chunk_size!r}')
        if cluster and '{' in prefix:
            raise ConfigError(
                f'a RedisConnector on a cluster needs a prefix without "{{" (got {prefix!r}): '
                'the connector puts its own hash tag after the prefix',
            )
        redis = import_redis('RedisConnector')
        self.hostname = hostname
        self.port = port
        self.db = db
        self.username = username
        self.password_env = password_env
        self.password_file = password_file
        self.ssl = ssl
        self.prefix = prefix
        self.socket_timeout = socket_timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.max_connections = max_connections
        self.chunk_size = chunk_size
        self.clear = clear
        self.cluster = cluster
        if clear:
            check_clear_prefix(prefix)
        self._redis_mod = redis
        self._password = resolve_password(
            (hostname, port, db, username), password, password_env, password_file
        )
        kwargs: dict[str, Any] = {
            'username': username,
            'password': self._password,
            'socket_timeout': socket_timeout,
            'socket_connect_timeout': connect_timeout,
            **retry_options(redis, retries),
        }
        if max_connections is not None:
            kwargs['max_connections'] = max_connections
        if cluster:
            kwargs['ssl'] = ssl
            self._client: Any = make_client(hostname, port, cluster=True, db=db, **kwargs)
        else:
            if ssl:
                kwargs['connection_class'] = redis.SSLConnection
            pool = redis.ConnectionPool(host=hostname, port=port, db=db, **kwargs)
            self._client = make_client(connection_pool=pool)

        self._settle()
        # (the closure must not hold self: no cycle)
        settings, password = self.settings, self._password

        def raw_pool(host: str, port: int) -> RawPool:
            return RawPool(redis, host, port, settings, password)

        self._router = Router(self._client, cluster, raw_pool, hostname, port)
        self._raw = Requester(redis, self._router, retries, f'Redis at {hostname}:{port}')
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        cluster = ', cluster=True' if self.cluster else ''
        return f'RedisConnector(hostname={self.hostname!r}, port={self.port}{cluster})'

    def __reduce__(self) -> Any:
        raise TypeError(
            'a RedisConnector is not pickled (it holds a connection pool and maybe a '
            'password): pickle a proxy or a StoreConfig, which rebuild it',
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Self:
        """Build a connector from a ``redis://[user:password@]host[:port][/db]`` URL.

        ``rediss://`` turns TLS on. The URL's password is used in this process only, as
        with ``password=``: :meth:`config` never contains it.
        """
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ('redis', 'rediss'):
            raise ConfigError(f'not a redis:// or rediss:// URL: {redact_url(url)!r}')
        db = parts.path.strip('/')
        try:
            options: dict[str, Any] = {
                'hostname': parts.hostname or 'localhost',
                'port': parts.port or 6379,
                'db': int(db) if db else 0,
            }
        except ValueError as e:
            raise ConfigError(f'bad Redis URL {redact_url(url)!r}: {e}') from e
        if parts.username:
            options['username'] = urllib.parse.unquote(parts.username)
        if parts.password is not None:
            options['password'] = urllib.parse.unquote(parts.password)
        if parts.scheme == 'rediss':
            options['ssl'] = True
        return cls(**(options | kwargs))

    def _errors(self, what: str) -> Errors:
        if self._closed:
            raise ConnectorClosedError(f'{self!r} is closed')
        return Errors(self._redis_mod, f'Redis at {self.hostname}:{self.port}', what, self.retries)

    def close(self, clear: bool | None = None) -> None:
        """Disconnect the pool; delete this prefix's keys first if ``clear``.

        Clearing deletes only the keys that start with ``prefix`` literally (glob
        characters in the prefix match themselves only).

        Raises:
            ConfigError: if asked to clear with an empty prefix (that would delete every
                key of the database, other applications' included); nothing is deleted
                and the connector stays open.
        """
        if self._closed:
            return
        if self.clear if clear is None else clear:
            check_clear_prefix(self.prefix)
            with self._errors('clear'):
                self._clear_prefix()
        self._closed = True
        self._router.close()
        if not self.cluster:  # (a pool given to redis.Redis is not closed with it)
            self._client.connection_pool.disconnect()
        self._client.close()

    def _clear_prefix(self) -> None:
        prefix = self.prefix.encode()
        pattern = glob_escape(self.prefix) + '*'
        scan = self._client.scan_iter(match=pattern, count=1000)
        keys = (k for k in scan if k.startswith(prefix))  # the server's glob, double-checked
        for batch in _batched(keys, 1000):
            self._client.delete(*batch)

    config_model = RedisConnectorConfig
    settings: RedisConnectorConfig

    def _key(self) -> RedisKey:
        if self.cluster:
            # A hash tag: the key, its chunks' temporary key and its readiness token
            # share one slot (the scripts and renames that use them together need it).
            return RedisKey(f'{self.prefix}{{{os.urandom(16).hex()}}}')
        return RedisKey(f'{self.prefix}{os.urandom(16).hex()}')  # (as new_id, no UUID)

    def evict(self, key: RedisKey) -> None:
        """Delete the object under ``key`` (and its readiness token, see :meth:`wait`)."""
        name = key.redis_key
        self._small('evict', name, b'DEL', name, name + _READY)

    def exists(self, key: RedisKey) -> bool:
        """Return whether ``key`` is stored."""
        return bool(self._small('exists', key.redis_key, b'EXISTS', key.redis_key))

    def _small(self, what: str, name: str, *command: bytes | str) -> Any:
        # One small command about key ``name`` on the raw path (tether's own connections:
        # no redis-py connection to open, at interpreter exit too; routed on a cluster).
        packer = Packer()
        packer.command(*command)

        def read(reader: ReplyReader) -> Any:
            return raise_first([reader.simple()])[0]

        with self._errors(what):
            return self._raw.request(name, packer, read)

    def get(self, key: RedisKey) -> BytesLike | None:
        """Return the bytes under ``key`` (a writable buffer) or ``None``."""
        with self._errors('get'):
            value: memoryview | None = self._get_direct(key.redis_key)
            return value

    def get_decoded(self, key: RedisKey) -> tuple[Any, int] | None:
        """Return the object under ``key``, deserialized, and its stored size; or ``None``.

        For stores that use tether's serializer: when the serializer offers the object's
        own memory for the value (:func:`tether.serialize.direct_target`, a value
        serialized as ``bytes``), the value is read from the socket straight into it, never
        into a buffer that is then copied.
        """
        with self._errors('get'):
            value = self._get_direct(key.redis_key, decode=True)
        if value is None:
            return None
        if isinstance(value, Decoded):
            return value.obj, value.nbytes
        return deserialize(value), value.nbytes

    def get_object(
        self, key: RedisKey, decode: Decode, own_format: bool
    ) -> tuple[Any, int] | None:
        """The object under ``key`` (with tether's serializer: :meth:`get_decoded`)."""
        if own_format:
            return self.get_decoded(key)
        return super().get_object(key, decode, own_format)

    def get_objects(
        self, keys: Sequence[RedisKey], decode: Decode, own_format: bool
    ) -> list[tuple[Any, int] | None]:
        """The objects under ``keys`` (with tether's serializer: :meth:`get_decoded_batch`)."""
        if own_format:
            return self.get_decoded_batch(keys)
        return super().get_objects(keys, decode, own_format)

    def _get_direct(self, name: str, *, decode: bool = False, chunks: bool = False) -> Any:
        # One GET, its reply read straight from the socket into one preallocated buffer.
        # A value stored in chunks is a list: GET answers WRONGTYPE and the chunks are
        # read with LRANGE, one round trip more for values over chunk_size only. (A key
        # that changed type in between is asked once more; then WRONGTYPE is raised.)
        # ``chunks``: the key is known to hold a list (start with LRANGE).
        value: Any = None
        for i in range(int(chunks), int(chunks) + 3):
            packer = Packer()
            if i % 2:
                packer.command(b'LRANGE', name, b'0', b'-1')
            else:
                packer.command(b'GET', name)
            value = self._raw.request(name, packer, _READERS[decode, bool(i % 2)])
            if not isinstance(value, Exception):
                return value
        raise value  # neither a string nor a list

    def get_batch(self, keys: Sequence[RedisKey]) -> list[BytesLike | None]:
        """Return the bytes under each key: one round trip per server (in parallel on a
        cluster's shards), each value read straight into its own buffer."""
        return list(self._get_many([k.redis_key for k in keys], decode=False))

    def get_decoded_batch(self, keys: Sequence[RedisKey]) -> list[tuple[Any, int] | None]:
        """:meth:`get_decoded` of each key, in one round trip per server."""
        out: list[tuple[Any, int] | None] = []
        for value in self._get_many([k.redis_key for k in keys], decode=True):
            if value is None:
                out.append(None)
            elif isinstance(value, Decoded):
                out.append((value.obj, value.nbytes))
            else:
                out.append((deserialize(value), value.nbytes))
        return out

    def _get_many(self, names: list[str], *, decode: bool) -> list[Any]:
        if not names:
            return []
        with self._errors('get_batch'):
            values = self._raw.per_key(
                names,
                lambda packer, i: packer.command(b'GET', names[i]),
                lambda reader, i: reader.bulk(decode=decode),
            )
            for i, value in enumerate(values):
                if isinstance(value, Exception):
                    # A value stored in chunks (a list: WRONGTYPE), or a key whose slot
                    # moved: read it alone, as get does.
                    chunks = str(value).startswith('WRONGTYPE')
                    values[i] = self._get_direct(names[i], decode=decode, chunks=chunks)
        return values

    def _set_parts(self, name: str, parts: Sequence[BytesLike]) -> None:
        # One vectored send from the caller's buffers.
        views = [memoryview(p).cast('B') for p in parts]
        size = sum(v.nbytes for v in views)
        packer = Packer()
        if size <= self.chunk_size:
            packer.array(3)
            packer.arg(b'SET')
            packer.arg(name)
            packer.bulk(views)
            replies = 1  # +OK
        else:
            # A list of chunks, one RPUSH each onto a temporary key (one command with
            # every chunk, or a transaction, would hold the whole value twice in the
            # server until it ran: twice slower at 100 MB), renamed to the key by a
            # script once every chunk is there, so that readers see all or nothing. The
            # temporary key is deleted first: a retry after a dropped connection starts
            # over.
            # The temporary key is made with its expiry before any chunk (_BEGIN), so the
            # one of a writer that dies midway expires.
            count = -(-size // self.chunk_size)
            temp = name + _WRITING
            packer.command(b'EVAL', _BEGIN, b'1', temp, b'%d' % _READY_TTL)
            for chunk in split(views, count):
                packer.array(3)
                packer.arg(b'RPUSH')
                packer.arg(temp)
                packer.bulk(chunk)
            packer.command(b'EVAL', _PUBLISH, b'2', temp, name, b'%d' % count)
            replies = count + 2  # the two scripts, each RPUSH

        def read(reader: ReplyReader) -> None:
            # Every reply is read before an error is raised: the connection stays in step.
            raise_first([reader.simple() for _ in range(replies)])

        self._raw.request(name, packer, read)

    def put(self, data: BytesLike) -> RedisKey:
        """Store ``data`` and return its key."""
        return self.put_parts([data])

    def put_parts(self, parts: Sequence[BytesLike]) -> RedisKey:
        """Store the concatenation of ``parts`` (sent without joining) and return its key."""
        key = self._key()
        with self._errors('put'):
            self._set_parts(key.redis_key, parts)
        return key

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[RedisKey]:
        """Store each item's parts as one value, in one round trip; return the keys.

        The SET commands of the whole batch go out in one send per server (on a cluster,
        to its shards in parallel), each value from its own buffers (never joined);
        values over ``chunk_size`` are stored in chunks, one round trip each.
        """
        keys = [self._key() for _ in batch]
        names = [k.redis_key for k in keys]
        small = [i for i, parts in enumerate(batch) if total_size(parts) <= self.chunk_size]

        def add(packer: Packer, i: int) -> None:
            packer.array(3)
            packer.arg(b'SET')
            packer.arg(names[small[i]])
            packer.bulk([memoryview(p).cast('B') for p in batch[small[i]]])

        with self._errors('put_batch'):
            replies = self._raw.per_key(
                [names[i] for i in small], add, lambda reader, i: reader.simple()
            )
            redo = set(range(len(batch))) - set(small)
            for i, reply in zip(small, replies, strict=True):
                if isinstance(reply, Exception):
                    if not self.cluster:
                        raise reply
                    redo.add(i)  # its shard went away or its slot moved: stored alone
            for i in sorted(redo):
                self._set_parts(names[i], batch[i])
        return keys

    def put_batch(self, datas: Sequence[BytesLike]) -> list[RedisKey]:
        """Store each item, in one round trip per server, and return the keys."""
        return self.put_parts_batch([[d] for d in datas])

    def new_key(self, data: BytesLike | None = None) -> RedisKey:
        """Reserve a fresh key (``data`` is not stored: :meth:`set` stores it)."""
        return self._key()

    def set(self, key: RedisKey, data: BytesLike) -> None:
        """Store ``data`` under ``key`` and wake the processes blocked in :meth:`wait`."""
        with self._errors('set'):
            self._set_parts(key.redis_key, [data])
            ready = key.redis_key + _READY
            pipe = self._client.pipeline(transaction=False)
            pipe.lpush(ready, b'1')
            pipe.expire(ready, _READY_TTL)
            pipe.execute()

    def wait(self, key: RedisKey, timeout: float | None = None) -> bool:
        """Block until :meth:`set` has stored ``key``; return whether it has.

        Waiters block in the server (``BLMOVE`` of a one-token list ``<key>:ready`` onto
        itself, so every waiter sees the token), not in a polling loop. Each blocking call
        is bounded by ``socket_timeout``; ``timeout=None`` waits without limit.
        """
        ready = key.redis_key + _READY
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._errors('wait'):
            while True:
                if self._client.exists(key.redis_key):
                    return True
                remaining = 5.0 if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return False
                block = max(0.01, min(remaining, 5.0, self.socket_timeout / 2))
                if self._client.blmove(ready, ready, block, 'RIGHT', 'LEFT') is not None:
                    return True  # the token is pushed only after the value is stored

    @property
    def client(self) -> Any:
        """The underlying redis-py client (a ``redis.Redis``, or a
        ``redis.cluster.RedisCluster`` with ``cluster=True``)."""
        return self._client


def _value_reader(decode: bool, chunks: bool) -> Callable[[ReplyReader], Any]:
    # The reply of a GET (or of an LRANGE, ``chunks``): the value, None, or a WRONGTYPE
    # error returned (not raised: the caller asks again with the other command).
    def read(reader: ReplyReader) -> Any:
        value = reader.array_joined(decode=decode) if chunks else reader.bulk(decode=decode)
        if isinstance(value, Exception) and not str(value).startswith('WRONGTYPE'):
            raise value  # (a cluster's redirection is followed by request)
        return value

    return read


_READERS = {(d, c): _value_reader(d, c) for d in (False, True) for c in (False, True)}


def _batched(it: Iterator[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in it:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch
