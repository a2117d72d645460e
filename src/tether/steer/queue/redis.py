"""Queues through a Redis server: the Thinker and the task server may run anywhere.

Requests go to one Redis list and results to one list per topic, all named under
``prefix``. The client never reconnects silently to a server that lost its data: each new
connection checks the server's ``run_id`` and a change (a restart, which empties a server
that keeps nothing on disk) raises :class:`~tether.exceptions.SteerQueueError` naming the
tasks that were in flight, instead of waiting forever for results that are gone.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from typing import Any, Literal

from tether.exceptions import SteerQueueError, SteerTimeoutError
from tether.steer.queue.base import _DEFAULT_MAX_AGE, BaseQueues

__all__ = ['RedisQueues']


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
    ) -> None:
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
        self._password = password
        self._run_id: str | None = None
        self._broken: str | None = None
        self._client: Any = None
        self._pid = 0
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f'RedisQueues({self.hostname}:{self.port}, prefix={self.prefix!r})'

    # Connection ------------------------------------------------------------------------

    def _on_connect(self, connection: Any) -> None:
        connection.on_connect()
        connection.send_command('INFO', 'server')
        info = connection.read_response()
        text = info.decode() if isinstance(info, bytes) else str(info)
        lines = [ln for ln in text.splitlines() if ln.startswith('run_id:')]
        run_id = lines[0].split(':', 1)[1].strip() if lines else None
        if self._run_id is None:
            self._run_id = run_id
        elif run_id != self._run_id:
            self._broken = (
                f'the Redis server at {self.hostname}:{self.port} restarted (run_id changed) '
                f'while queues {self.prefix!r} were in use: tasks and results it held are lost'
            )
            connection.disconnect()
            raise SteerQueueError(self._lost_message())

    def _lost_message(self) -> str:
        return (
            f'{self._broken}; {self.active_count} task(s) sent by this process have no result '
            'yet and may never get one. Resubmit them, or make Redis persistent.'
        )

    def _redis(self) -> Any:
        import os

        if self._broken is not None:
            raise SteerQueueError(self._lost_message())
        with self._client_lock:
            if self._client is None or self._pid != os.getpid():
                import redis
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                self._pid = os.getpid()
                self._client = redis.Redis(
                    host=self.hostname,
                    port=self.port,
                    password=self._password,
                    retry=Retry(NoBackoff(), 0),
                    socket_timeout=None,
                    redis_connect_func=self._on_connect,  # type: ignore[arg-type]
                )
            return self._client

    def _call(self, what: str, fn: Any) -> Any:
        import redis

        client = self._redis()
        try:
            return fn(client)
        except SteerQueueError:
            raise
        except redis.RedisError as e:
            self._broken = (
                f'lost the Redis server at {self.hostname}:{self.port} while trying to {what} '
                f'(queues {self.prefix!r}): {e}'
            )
            raise SteerQueueError(self._lost_message()) from e

    def _key(self, name: str) -> str:
        return f'{self.prefix}_{name}'

    def _pop(self, key: str, timeout: float | None, what: str) -> bytes:
        # BLPOP with timeout 0 blocks forever; a timeout is a float in seconds.
        wait = 0 if timeout is None else max(timeout, 0.001)
        reply = self._call(f'read {what}', lambda c: c.blpop([key], timeout=wait))
        if reply is None:
            raise SteerTimeoutError(f'no {what} within {timeout} s (queues {self.prefix!r})')
        message: bytes = reply[1]
        return message

    # Transport -------------------------------------------------------------------------

    def _send_request(self, message: bytes) -> None:
        self._call('send a task request', lambda c: c.rpush(self._key('requests'), message))

    def _get_request(self, timeout: float | None) -> bytes:
        return self._pop(self._key('requests'), timeout, 'task request')

    def _send_result(self, message: bytes, topic: str) -> None:
        self._call('send a result', lambda c: c.rpush(self._key(f'result_{topic}'), message))

    def _get_result(self, topic: str, timeout: float | None) -> bytes:
        return self._pop(self._key(f'result_{topic}'), timeout, f'result on topic {topic!r}')

    def connect(self) -> None:
        """Connect now (and remember the server's identity); raises if it is unreachable."""
        self._call('connect', lambda c: c.ping())

    def flush(self) -> None:
        """Delete this prefix's queues from Redis."""
        keys = [self._key('requests')] + [self._key(f'result_{t}') for t in self.topics]
        self._call('flush the queues', lambda c: c.delete(*keys))

    def close(self) -> None:
        """Close this process's connections, once the proxied inputs of the finished
        tasks are deleted (see :meth:`finish_evictions`; raises if one could not be)."""
        self.finish_evictions()
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _after_fork_in_child(self) -> None:
        super()._after_fork_in_child()
        self._client_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state['_client'] = None
        state['_client_lock'] = None
        # Secrets stay in this process: a pickled queue reconnects with no password.
        state['_password'] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._client_lock = threading.Lock()
