"""Redis as a stream broker: pub/sub (fire and forget) and streams (durable queues).

**Pub/sub** (:class:`RedisPublisher`, :class:`RedisSubscriber`): ``PUBLISH`` to a channel
named after the topic. Every subscriber connected at the time gets every message (fan
out); messages published while a subscriber is down or not yet subscribed are **lost**.
Redis disconnects a subscriber that falls too far behind (``client-output-buffer-limit
pubsub``, 32 MB by default), so a slow consumer cannot make anyone buffer without bound;
the subscriber then raises :class:`~tether.exceptions.StreamBrokerError`.

**Queues** (:class:`RedisQueuePublisher`, :class:`RedisQueueSubscriber`): a Redis stream
per topic (``XADD``), read through a consumer group (``XREADGROUP``). Messages are
**kept** while consumers are down and delivered when they come back. Consumers of one
group share the messages (each goes to one of them); consumers in different groups each
get every message. A message is acknowledged (``XACK``) when the subscriber is asked for
the next one or closed, so a consumer killed while handling a message gets it again when
it restarts under the same ``consumer`` name (at-least-once: at most the one in-flight
message is repeated per crash). Entries stay in the stream until trimmed: pass
``maxlen`` to cap it (the oldest entries are dropped, read or not) or delete the stream
key when done. The key prefix (with the database number, if not 0) is the stream's
``namespace``: signed messages name it, so a message copied between two prefixes is
refused.

A server that is down or stops answering raises
:class:`~tether.exceptions.StreamBrokerError` after ``retries`` reconnection attempts, each
bounded by ``connect_timeout``/``socket_timeout``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tether.exceptions import StreamBrokerError
from tether.stream.protocols import SubscriberIterator
from tether.stream.shims._base import AtHost, Deadline, OneTopic

__all__ = [
    'RedisPublisher',
    'RedisQueuePublisher',
    'RedisQueueSubscriber',
    'RedisSubscriber',
]

_POLL = 1.0

logger = logging.getLogger(__name__)


@contextmanager
def _translate(what: str) -> Iterator[None]:
    import redis

    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise StreamBrokerError(f'{what}: Redis is unreachable ({e}); is the server up?') from e
    except redis.RedisError as e:
        raise StreamBrokerError(f'{what}: Redis refused: {e}') from e


def _namespace(prefix: str, db: int) -> str:
    # Queues of one topic name under two prefixes (or in two databases) are two streams.
    return prefix if db == 0 else f'{prefix} (db {db})'


class _Base(AtHost):
    def __init__(
        self,
        hostname: str,
        port: int,
        *,
        db: int = 0,
        password: str | None = None,
        socket_timeout: float = 10.0,
        connect_timeout: float = 2.0,
        retries: int = 2,
        cluster: bool = False,
    ) -> None:
        from tether.connectors.redis_client import import_redis, make_client, retry_options

        redis = import_redis('a Redis stream shim')
        super().__init__(hostname, port)
        self.db = db
        self.socket_timeout = socket_timeout
        self.cluster = cluster
        self._client = make_client(
            hostname,
            port,
            cluster=cluster,
            db=db,
            password=password,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            **retry_options(redis, retries),
        )


class RedisPublisher(_Base):
    """Publishes messages to Redis pub/sub channels (one channel per topic).

    Args:
        hostname: Redis host.
        port: Redis port.
        db: Database number.
        password: Password for ``AUTH``.
        socket_timeout: Seconds one command may block.
        connect_timeout: Seconds a connection attempt may take.
        retries: Reconnection attempts before raising.
        cluster: The server is a node of a Redis Cluster (a topic's stream lives on
            the shard of its key; pub/sub messages reach every node).
    """

    def send_message(self, topic: str, message: bytes) -> None:
        """``PUBLISH`` the message on channel ``topic``."""
        self._check_open()
        with _translate(f'publishing to topic {topic!r} at {self._at}'):
            self._client.publish(topic, message)


class RedisSubscriber(_Base, SubscriberIterator):
    """Receives the messages of Redis pub/sub channels.

    The subscription is confirmed by the server before the constructor returns, so
    every message published afterwards is received.

    Args:
        hostname: Redis host.
        port: Redis port.
        topics: The topic, or topics, to subscribe to.
        kwargs: Connection options of :class:`RedisPublisher`.
    """

    def __init__(
        self,
        hostname: str,
        port: int,
        topics: str | Sequence[str],
        **kwargs: Any,
    ) -> None:
        super().__init__(hostname, port, **kwargs)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        self._pubsub = self._client.pubsub()
        deadline = time.monotonic() + self.socket_timeout
        with _translate(f'subscribing to {self.topics} at {self._at}'):
            self._pubsub.subscribe(*self.topics)
            confirmed = 0
            while confirmed < len(self.topics):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StreamBrokerError(
                        f'Redis at {self._at} did not confirm the subscription to '
                        f'{self.topics} within {self.socket_timeout} s',
                    )
                msg = self._pubsub.get_message(timeout=min(left, _POLL))
                if msg is not None and msg['type'] == 'subscribe':
                    confirmed += 1

    def accepts_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of those this subscriber reads."""
        return topic in self.topics

    def next_message(self, timeout: float | None = None) -> bytes:
        """Return the next message of the subscribed channels."""
        self._check_open()
        deadline = Deadline(timeout, _POLL, f'topics {self.topics}')
        with _translate(f'reading topics {self.topics} at {self._at}'):
            while True:
                msg = self._pubsub.get_message(timeout=deadline.left())
                if msg is not None and msg['type'] in ('message', 'pmessage'):
                    return bytes(msg['data'])

    def _release(self) -> None:
        """Unsubscribe and close the connection."""
        try:
            self._pubsub.close()
        finally:
            self._client.close()


class RedisQueuePublisher(_Base):
    """Appends messages to Redis streams (one stream per topic, durable).

    Args:
        hostname: Redis host.
        port: Redis port.
        prefix: Prefix of the stream keys (key = prefix + topic).
        maxlen: Cap each stream near this many entries (oldest dropped, read or not).
        kwargs: Connection options of :class:`RedisPublisher`.
    """

    def __init__(
        self,
        hostname: str,
        port: int,
        *,
        prefix: str = 'tether-stream:',
        maxlen: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(hostname, port, **kwargs)
        self.prefix = prefix
        self.maxlen = maxlen

    @property
    def namespace(self) -> str:
        """The stream's namespace, signed into its messages: the key prefix (and db)."""
        return _namespace(self.prefix, self.db)

    def send_message(self, topic: str, message: bytes) -> None:
        """``XADD`` the message to the stream of ``topic``."""
        self._check_open()
        with _translate(f'appending to topic {topic!r} at {self._at}'):
            self._client.xadd(
                self.prefix + topic,
                {'m': message},
                maxlen=self.maxlen,
                approximate=True,
            )


class RedisQueueSubscriber(_Base, OneTopic, SubscriberIterator):
    """Reads a Redis stream through a consumer group, acknowledging what it handed out.

    On start, the consumer first re-reads the messages it was given but never
    acknowledged (it crashed while handling them), then reads new ones. A group created
    by its first consumer starts at the beginning of the stream, so messages sent before
    any consumer existed are delivered.

    Args:
        hostname: Redis host.
        port: Redis port.
        topic: The topic.
        group: Consumer group; consumers of one group share the messages.
        consumer: Name of this consumer in the group (reuse it when restarting).
        prefix: Prefix of the stream keys (as given to the publisher).
        kwargs: Connection options of :class:`RedisPublisher`.
    """

    def __init__(
        self,
        hostname: str,
        port: int,
        topic: str,
        *,
        group: str = 'tether',
        consumer: str = 'consumer-0',
        prefix: str = 'tether-stream:',
        **kwargs: Any,
    ) -> None:
        super().__init__(hostname, port, **kwargs)
        import redis

        self.topic = topic
        self.group = group
        self.consumer = consumer
        self.prefix = prefix
        self.key = prefix + topic
        self._unacked: bytes | None = None
        self._recovering = True
        with _translate(f'creating consumer group {group!r} on topic {topic!r}'):
            try:
                self._client.xgroup_create(self.key, group, id='0', mkstream=True)
            except redis.ResponseError as e:
                if 'BUSYGROUP' not in str(e):
                    raise

    @property
    def namespace(self) -> str:
        """The stream's namespace, which signed messages must name: the key prefix (and db)."""
        return _namespace(self.prefix, self.db)

    def _ack(self) -> None:
        if self._unacked is not None:
            self._client.xack(self.key, self.group, self._unacked)
            self._unacked = None

    def next_message(self, timeout: float | None = None) -> bytes:
        """Acknowledge the previous message and return the next one."""
        self._check_open()
        deadline = Deadline(timeout, _POLL, f'topic {self.topic!r}')
        with _translate(f'reading topic {self.topic!r} at {self._at}'):
            self._ack()
            while True:
                if self._recovering:
                    reply = self._client.xreadgroup(
                        self.group,
                        self.consumer,
                        {self.key: '0'},
                        count=1,
                    )
                    entries = reply[0][1] if reply else []
                    if entries and entries[0][1] is None:  # trimmed away while pending
                        self._client.xack(self.key, self.group, entries[0][0])
                        continue
                    if entries:
                        return self._take(entries[0])
                    self._recovering = False
                left = deadline.left()
                reply = self._client.xreadgroup(
                    self.group,
                    self.consumer,
                    {self.key: '>'},
                    count=1,
                    block=max(1, int(left * 1000)),
                )
                if reply and reply[0][1]:
                    return self._take(reply[0][1][0])

    def _take(self, entry: Any) -> bytes:
        entry_id, fields = entry
        self._unacked = entry_id
        return bytes(fields[b'm'])

    def close(self) -> None:
        """Acknowledge the last message handed out and close the connection."""
        if self._closed:
            return
        try:
            with _translate(f'acknowledging on topic {self.topic!r}'):
                self._ack()
        except StreamBrokerError as e:  # it will be delivered again (at-least-once)
            logger.warning('could not acknowledge the last message on closing: %s', e)
        finally:
            self._closed = True
            self._client.close()
