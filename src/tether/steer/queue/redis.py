"""Queues through a Redis server: the Thinker and the task server may run anywhere.

Requests go to one Redis list and results to one list per topic, all named under
``prefix``.

**Restarts.** The client never carries on silently with a server that lost its data. Each
process that uses the queues registers in a hash, ``<prefix>_writers``, a field of its
own holding the number of messages it has pushed: every push is one small Lua script
(the ``RPUSH`` and the count's ``HINCRBY``, atomic, one command). A reader moves each
message it takes to an in-flight list of its own (``BLMOVE``, emptied every so many
messages), so a message taken in the instant the connection died is found there, not
lost. Each new connection checks the
server's ``run_id``. After a restart (a new ``run_id``) the process reads its field back:

* the field is there and counts every message the process pushed: the server kept its
  data (``appendonly yes``, or a snapshot taken since the last push). The client carries
  on; a push whose reply was lost with the connection is not pushed again if the count
  shows it arrived, so nothing is lost and nothing is sent twice;
* the field is gone, or counts fewer messages: the server came back without (all of)
  the queues' data. The call raises :class:`~tether.exceptions.SteerQueueError` naming
  the tasks of this process that have no result yet, and so does every later call,
  instead of waiting forever for results that are gone.

A lost connection (the server stopped, restarting) is retried for ``reconnect_timeout``
seconds before it is reported the same way; a server that was never reached raises at
once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from tether._clock import SYSTEM_CLOCK, Clock
from tether.exceptions import ConfigError, SteerQueueError, SteerTimeoutError
from tether.steer.queue.base import _DEFAULT_MAX_AGE, BaseQueues

__all__ = ['RedisQueues']

logger = logging.getLogger(__name__)

_SHOWN_IDS = 10  # task ids named in an error (the count is always given)

# A push and its count, atomically (KEYS: list, writers hash; ARGV: message, writer).
_PUSH = "redis.call('RPUSH', KEYS[1], ARGV[1]) return redis.call('HINCRBY', KEYS[2], ARGV[2], 1)"
# A reader's in-flight list is emptied once it holds this many messages or bytes.
_INFLIGHT_MESSAGES = 64
_INFLIGHT_BYTES = 1 << 20


class RedisQueues(BaseQueues):
    """Queues in a Redis server.

    Args:
        topics: Result topics (``'default'`` is always added).
        hostname: Redis host.
        port: Redis port.
        prefix: Prefix of the Redis keys: use a unique one per campaign.
        serialization_method: Only ``'pickle'``.
        keep_inputs: Whether results carry their inputs back by default.
        proxystore_name: Store name (or dict topic -> name) for values over the threshold.
        proxystore_threshold: Bytes (or dict topic -> bytes) over which values are proxied.
        password: Redis password, if the server wants one. Kept in memory only.
        secret: Key to sign and check messages with (see :class:`BaseQueues`; by default
            the user's queue key; ``False``: unsigned).
        max_age: Oldest signed message accepted, in seconds.
        reconnect_timeout: Seconds a call waits for a server that went away (a restart)
            to come back before it raises :class:`~tether.exceptions.SteerQueueError`.
        clock: The clock of the reconnection waits and read deadlines (tests pass a
            ``tether.testing.FakeClock``).
        cluster: The server is a node of a Redis Cluster. Every key of the queues has the
            hash tag ``{prefix}`` (one slot, so the push script runs on one shard), and the
            restart check becomes a count check on each new connection to the master
            that holds the queues (a restart or a failover to a replica that missed
            messages this process pushed raises, as above).
    """

    def __init__(  # noqa: PLR0917 (Colmena's positional order)
        self,
        topics: Collection[str] = (),
        hostname: str = '127.0.0.1',
        port: int = 6379,
        prefix: str = 'steer',
        serialization_method: str = 'pickle',
        keep_inputs: bool = True,
        proxystore_name: str | Mapping[str, str | None] | None = None,
        proxystore_threshold: int | Mapping[str, int | None] | None = None,
        *,
        password: str | None = None,
        secret: bytes | str | Literal[False] | None = None,
        max_age: float | None = _DEFAULT_MAX_AGE,
        reconnect_timeout: float = 60.0,
        clock: Clock = SYSTEM_CLOCK,
        cluster: bool = False,
    ) -> None:
        if cluster and '{' in prefix:
            raise ConfigError(f'queues on a Redis Cluster need a prefix without "{{": {prefix!r}')
        super().__init__(
            topics,
            serialization_method,
            keep_inputs,
            proxystore_name,
            proxystore_threshold,
            secret=secret,
            max_age=max_age,
        )
        self._queue_id = f'redis:{prefix}'
        self.hostname = hostname
        self.port = port
        self.prefix = prefix
        self.reconnect_timeout = reconnect_timeout
        self.clock = clock
        self.cluster = cluster
        self._password = password
        self._run_id: str | None = None
        self._broken: str | None = None
        self._client: Any = None
        self._push_script: Any = None
        self._pid = 0
        self._client_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._new_readers()
        # This process's field in <prefix>_writers and the messages it pushed; the first
        # process's field (inherited by forked children) vouches for a child that has
        # not registered yet.
        self._writer = ''
        self._written = 0
        self._registered = False
        self._anchor: str | None = None

    def __repr__(self) -> str:
        return f'RedisQueues({self.hostname}:{self.port}, prefix={self.prefix!r})'

    def _new_readers(self) -> None:
        """Forget the readers' state (a new process reads with lists of its own)."""
        self._pop_locks: dict[str, threading.Lock] = {}
        self._held: dict[str, bytes] = {}  # per list: the last message this reader took
        self._inflight: set[str] = set()  # the in-flight lists this reader made
        self._inflight_load: dict[str, list[int]] = {}  # per list: its messages, bytes

    # Connection ------------------------------------------------------------------------

    def _on_connect(self, connection: Any) -> None:
        connection.on_connect()
        if self.cluster:
            self._check_shard(connection)
            return
        connection.send_command('INFO', 'server')
        info = connection.read_response()
        text = info.decode() if isinstance(info, bytes) else str(info)
        lines = [ln for ln in text.splitlines() if ln.startswith('run_id:')]
        run_id = lines[0].split(':', 1)[1].strip() if lines else None
        if self._run_id is not None and run_id != self._run_id:
            self._check_kept(connection, run_id)
        self._run_id = run_id
        if not self._registered:
            # Before the first push of this process; HSETNX keeps a count already there.
            connection.send_command('HSETNX', self._key('writers'), self._writer, 0)
            connection.read_response()
            self._registered = True
            if self._anchor is None:
                self._anchor = self._writer

    def _check_shard(self, connection: Any) -> None:
        """On a cluster: whether the master holding the queues has every message this
        process pushed (any node's run_id tells nothing: a failover changes the node)."""
        import redis

        self._run_id = self._run_id or 'cluster'  # reached: a lost node is waited for
        field = self._writer if self._registered else self._anchor
        if field is not None:
            connection.send_command('HGET', self._key('writers'), field)
            try:
                reply = connection.read_response()
            except redis.ResponseError:
                return  # MOVED: this node does not hold the queues (a replica, a seed)
            kept = 0 if reply is None else int(reply)
            if self._registered and kept < self._written:
                self._broken = (
                    f'the Redis Cluster master holding queues {self.prefix!r} (at '
                    f'{connection.host}:{connection.port}) has {kept} of the '
                    f'{self._written} messages this process sent (restarted or failed '
                    'over without them)'
                )
                connection.disconnect()
                raise SteerQueueError(self._lost_message())
        if not self._registered:
            connection.send_command('HSETNX', self._key('writers'), self._writer, 0)
            try:
                connection.read_response()
            except redis.ResponseError:
                return  # not the queues' master: registered on the connection that is
            self._registered = True
            if self._anchor is None:
                self._anchor = self._writer

    def _check_kept(self, connection: Any, run_id: str | None) -> None:
        """After a restart: carry on if the server kept every message, else fail."""
        field = self._writer if self._registered else self._anchor
        kept: int | None = None
        if field is not None:
            connection.send_command('HGET', self._key('writers'), field)
            reply = connection.read_response()
            kept = None if reply is None else int(reply)
        where = f'the Redis server at {self.hostname}:{self.port}'
        if field is None or (kept is not None and kept >= self._written):
            logger.warning(
                '%s restarted (run_id %s -> %s) and kept the data of queues %r: carrying on',
                where,
                self._run_id,
                run_id,
                self.prefix,
            )
            return
        if kept is None:
            self._broken = (
                f'{where} restarted (run_id changed) while queues {self.prefix!r} were in '
                'use, and came back without their data (it keeps nothing on disk, or its '
                'last save predates them): tasks and results it held are lost'
            )
        else:
            self._broken = (
                f'{where} restarted (run_id changed) while queues {self.prefix!r} were in '
                f'use, and came back with an older copy of their data: {self._written - kept} '
                f'of the {self._written} messages this process sent are lost (make Redis '
                'save every write: appendonly yes, appendfsync always)'
            )
        connection.disconnect()
        raise SteerQueueError(self._lost_message())

    def _lost_message(self) -> str:
        ids = self.active_task_ids()
        named = ', '.join(ids[:_SHOWN_IDS]) + (', ...' if len(ids) > _SHOWN_IDS else '')
        return (
            f'{self._broken}; {len(ids)} task(s) sent by this process have no result yet '
            f'and may never get one{f" ({named})" if ids else ""}. Resubmit them, or make '
            'Redis persistent (appendonly yes).'
        )

    def _redis(self) -> Any:
        if self._broken is not None:
            raise SteerQueueError(self._lost_message())
        with self._client_lock:
            if self._client is None or self._pid != os.getpid():
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                from tether.connectors.redis_client import make_client

                if self._pid != os.getpid():  # a new process: a writer of its own
                    self._writer = f'{os.getpid()}-{secrets.token_hex(6)}'
                    self._written = 0
                    self._registered = False
                    self._new_readers()
                self._pid = os.getpid()
                # (one server: the restart check reads this server's run_id; a cluster:
                # each new connection to the queues' master checks the count)
                self._client = make_client(
                    self.hostname,
                    self.port,
                    cluster=self.cluster,
                    password=self._password,
                    retry=Retry(NoBackoff(), 0),
                    socket_timeout=None,
                    redis_connect_func=self._on_connect,
                )
                # One command, as RPUSH was (EVALSHA; loaded again by redis-py after a
                # restart emptied the server's script cache).
                self._push_script = self._client.register_script(_PUSH)
            return self._client

    def _call(self, what: str, fn: Callable[[Any, bool], Any]) -> Any:
        """Run ``fn(client, retried)``, reconnecting while the server comes back.

        ``retried`` is true on an attempt after a lost connection (the previous one may
        or may not have reached the server).
        """
        import redis

        deadline: float | None = None
        pause = 0.05
        retried = False
        while True:
            client = self._redis()
            try:
                return fn(client, retried)
            except SteerQueueError:
                raise
            except (
                redis.ConnectionError,
                redis.TimeoutError,
                redis.exceptions.ClusterDownError,
                redis.exceptions.TryAgainError,
            ) as e:
                now = self.clock.monotonic()
                if deadline is None:
                    deadline = now + self.reconnect_timeout
                    if self._run_id is not None:
                        logger.warning(
                            'lost the Redis server at %s:%d while trying to %s (queues %r): '
                            'reconnecting for up to %s s',
                            self.hostname,
                            self.port,
                            what,
                            self.prefix,
                            self.reconnect_timeout,
                        )
                if self._run_id is None or now >= deadline:
                    self._broken = (
                        f'lost the Redis server at {self.hostname}:{self.port} while trying '
                        f'to {what} (queues {self.prefix!r}): {e}'
                    )
                    raise SteerQueueError(self._lost_message()) from e
                self.clock.sleep(min(pause, deadline - now))
                pause = min(pause * 2, 1.0)
                retried = True
            except redis.RedisError as e:
                self._broken = (
                    f'the Redis server at {self.hostname}:{self.port} failed to {what} '
                    f'(queues {self.prefix!r}): {e}'
                )
                raise SteerQueueError(self._lost_message()) from e

    def _push(self, key: str, message: bytes, what: str) -> None:
        """``RPUSH`` and count it (one script); never twice after a lost reply."""
        with self._write_lock:

            def push(client: Any, retried: bool) -> None:
                writers = self._key('writers')
                if retried:
                    count = client.hget(writers, self._writer)
                    if count is not None and int(count) > self._written:
                        return  # the lost attempt had arrived
                self._push_script(keys=[key, writers], args=[message, self._writer])

            self._call(what, push)
            self._written += 1

    def _key(self, name: str) -> str:
        if self.cluster:  # one hash slot for every key of the queues
            return f'{{{self.prefix}}}_{name}'
        return f'{self.prefix}_{name}'

    def _pop(self, key: str, timeout: float | None, what: str) -> bytes:
        """Take the next message of ``key``, moving it to this reader's in-flight list.

        ``BLMOVE`` (one command, as ``BLPOP`` was) puts it at the head of that list: if
        the connection is lost before its reply arrives, the retry finds it there
        instead of losing it. The list is emptied (with the take that follows) once it
        holds ``_INFLIGHT_MESSAGES`` messages or ``_INFLIGHT_BYTES`` bytes.
        """
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        with self._client_lock:
            lock = self._pop_locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            raise SteerTimeoutError(f'no {what} within {timeout} s (queues {self.prefix!r})')
        try:
            load = self._inflight_load.setdefault(key, [0, 0])

            def pop(client: Any, retried: bool) -> Any:
                inflight = f'{key}_inflight_{self._writer}'
                if retried:
                    held = client.lindex(inflight, 0)
                    if held is not None and held != self._held.get(key):
                        return held  # moved for this reader, its reply lost: not lost
                # BLMOVE with timeout 0 blocks forever; a timeout is a float in seconds.
                # After a reconnection, only what is left of it.
                left = 0 if deadline is None else max(deadline - self.clock.monotonic(), 0.001)
                if load[0] < _INFLIGHT_MESSAGES and load[1] < _INFLIGHT_BYTES:
                    return client.blmove(key, inflight, left, 'LEFT', 'LEFT')
                pipe = client.pipeline(transaction=False)
                pipe.delete(inflight)  # what this reader took before: all handed on
                pipe.blmove(key, inflight, left, 'LEFT', 'LEFT')
                message = pipe.execute()[1]
                load[0] = load[1] = 0
                return message

            message = self._call(f'read {what}', pop)
            if message is None:
                raise SteerTimeoutError(f'no {what} within {timeout} s (queues {self.prefix!r})')
            self._held[key] = message
            load[0] += 1
            load[1] += len(message)
            self._inflight.add(f'{key}_inflight_{self._writer}')
            return bytes(message)
        finally:
            lock.release()

    # Transport -------------------------------------------------------------------------

    def _send_request(self, message: bytes) -> None:
        self._push(self._key('requests'), message, 'send a task request')

    def _get_request(self, timeout: float | None) -> bytes:
        return self._pop(self._key('requests'), timeout, 'task request')

    def _send_result(self, message: bytes, topic: str) -> None:
        self._push(self._key(f'result_{topic}'), message, 'send a result')

    def _get_result(self, topic: str, timeout: float | None) -> bytes:
        return self._pop(self._key(f'result_{topic}'), timeout, f'result on topic {topic!r}')

    def connect(self) -> None:
        """Connect now (and remember the server's identity); raises if it is unreachable."""
        self._call('connect', lambda c, _: c.ping())

    def flush(self) -> None:
        """Delete this prefix's queues from Redis: the lists, every reader's in-flight
        lists and the other processes' counts."""
        lists = [self._key('requests')] + [self._key(f'result_{t}') for t in self.topics]
        # Glob characters of the prefix match themselves only.
        pattern = re.sub(r'([\\*?\[\]])', r'\\\1', self.prefix) + '_*_inflight_*'

        def flush(client: Any, retried: bool) -> None:
            inflight = list(client.scan_iter(match=pattern, count=1000))
            pipe = client.pipeline(transaction=True)
            pipe.delete(*lists, *inflight, self._key('writers'))
            pipe.hset(self._key('writers'), self._writer, self._written)
            pipe.execute()

        with self._write_lock:
            self._call('flush the queues', flush)
            for load in self._inflight_load.values():
                load[0] = load[1] = 0

    def close(self) -> None:
        """Close this process's connections, once the proxied inputs of the finished
        tasks are deleted (see ``finish_evictions()``; raises if one could not be)."""
        self.finish_evictions()
        with self._client_lock:
            inflight = self._inflight
            self._new_readers()
            if self._client is not None:
                if inflight and self._broken is None and self._pid == os.getpid():
                    with contextlib.suppress(Exception):  # what was read was handed on
                        self._client.delete(*inflight)
                self._client.close()
                self._client = None

    def _after_fork_in_child(self) -> None:
        super()._after_fork_in_child()
        self._client_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._new_readers()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state['_client'] = None
        state['_push_script'] = None
        state['_client_lock'] = None
        state['_write_lock'] = None
        for name in ('_pop_locks', '_held', '_inflight', '_inflight_load'):
            state.pop(name, None)
        state['_pid'] = 0  # a copy is another writer, with a count of its own
        state['_registered'] = False
        # Secrets stay in this process: a pickled queue reconnects with no password.
        state['_password'] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._new_readers()
        self._client_lock = threading.Lock()
        self._write_lock = threading.Lock()
