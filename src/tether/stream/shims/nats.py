"""NATS as a stream broker: core pub/sub (fire and forget) and JetStream (durable).

**Core NATS** (:class:`NatsPublisher`, :class:`NatsSubscriber`): one subject per topic.
Every subscriber connected at the time gets every message (or, with a ``queue_group``,
one subscriber of the group does); messages sent while a subscriber is down are
**lost**. A subscriber that falls more than ``pending_limit`` messages behind has the
excess dropped by the client (NATS's "slow consumer" rule), so memory stays bounded.

**JetStream** (:class:`JetStreamPublisher`, :class:`JetStreamSubscriber`): each topic
is a JetStream stream (named ``tether_<topic>``) stored by the server; a subscriber is a
durable pull consumer. Messages are **kept** while consumers are down and delivered
when they return; consumers sharing a ``durable`` name share the messages. A message is
acknowledged when the next one is asked for (or at ``close``); one handed out but never
acknowledged (its consumer was killed) is delivered again after ``ack_wait`` seconds
(at-least-once).

The clients reconnect ``max_reconnect_attempts`` times, ``reconnect_time_wait`` seconds
apart; after that, or when a call's ``timeout`` passes, the shim raises
:class:`~tether.exceptions.StreamBrokerError`.
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any

from tether._extras import import_extra
from tether._serve.loop import LoopThread
from tether.exceptions import StreamBrokerError, StreamError, StreamTimeoutError
from tether.stream.protocols import SubscriberIterator
from tether.stream.shims._base import Deadline, OneTopic, Shim, close_on_loop

__all__ = [
    'JetStreamPublisher',
    'JetStreamSubscriber',
    'NatsPublisher',
    'NatsSubscriber',
    'nats_subject_matches',
    'stream_name',
]

_POLL = 0.5


def stream_name(topic: str) -> str:
    """Return the JetStream stream name used for ``topic``."""
    return 'tether_' + re.sub(r'[^A-Za-z0-9_-]', '_', topic)


def nats_subject_matches(pattern: str, subject: str) -> bool:
    """Whether the NATS subject ``pattern`` (``*`` one token, ``>`` the rest) matches."""
    want, have = pattern.split('.'), subject.split('.')
    for i, token in enumerate(want):
        if token == '>':
            return len(have) > i
        if i >= len(have) or (token != '*' and token != have[i]):
            return False
    return len(want) == len(have)


class _Client:
    """A NATS connection on a private event loop."""

    def __init__(
        self,
        servers: str | list[str],
        *,
        timeout: float,
        connect_timeout: float,
        max_reconnect_attempts: int,
        reconnect_time_wait: float,
    ) -> None:
        nats = import_extra('nats', 'the NATS stream shims need nats-py', 'nats')
        self.servers = servers
        self.timeout = timeout
        self._nats = nats
        self._loop = LoopThread(f'tether-nats-{servers}', timeout_error=StreamTimeoutError)

        self.last_error: Exception | None = None
        self._down_since: float | None = None

        async def _error(e: Exception) -> None:
            self.last_error = e

        try:
            self.nc: Any = self.run(
                nats.connect(
                    servers,
                    connect_timeout=connect_timeout,
                    max_reconnect_attempts=max_reconnect_attempts,
                    reconnect_time_wait=reconnect_time_wait,
                    allow_reconnect=True,
                    error_cb=_error,
                ),
                'connecting',
            )
        except BaseException:
            self._loop.stop()
            raise

    def __repr__(self) -> str:
        return repr(self.servers)

    def run(self, coro: Any, what: str, timeout: float | None = None) -> Any:
        t = self.timeout if timeout is None else timeout
        try:
            return self._loop.run(coro, t + 1.0)
        except StreamTimeoutError as e:
            raise StreamBrokerError(f'NATS at {self.servers}: {what} took over {t} s') from e
        except StreamError:
            raise
        except Exception as e:
            if type(e).__name__ == 'TimeoutError' and 'nats' in type(e).__module__:
                raise StreamTimeoutError(f'NATS at {self.servers}: {what} timed out') from e
            raise StreamBrokerError(
                f'NATS at {self.servers}: {what} failed: {type(e).__name__}: {e}; is the '
                'server up?',
            ) from e

    def check(self, what: str) -> None:
        if self.nc.is_closed:
            raise StreamBrokerError(
                f'NATS at {self.servers}: connection closed while {what} '
                f'(last error: {self.last_error!r}); is the server up?',
            )

    def check_alive(self, what: str) -> None:
        """Raise if the connection is closed or has been down for over ``timeout``."""
        self.check(what)
        if self.nc.is_connected:
            self._down_since = None
        elif self._down_since is None:
            self._down_since = time.monotonic()
        elif time.monotonic() - self._down_since > self.timeout:
            raise StreamBrokerError(
                f'NATS at {self.servers}: disconnected for over {self.timeout} s while '
                f'{what} (last error: {self.last_error!r}); is the server up?',
            )

    def wait_connected(self, what: str) -> None:
        """Wait (up to ``timeout``) while the client reconnects; raise if it cannot."""
        deadline = time.monotonic() + self.timeout
        while not self.nc.is_connected:
            self.check(what)
            if time.monotonic() > deadline:
                raise StreamBrokerError(
                    f'NATS at {self.servers}: not connected for {self.timeout} s while '
                    f'{what} (last error: {self.last_error!r}); is the server up?',
                )
            time.sleep(0.05)

    def close(self) -> None:
        close_on_loop(self._loop, self.nc, self.run)


class _Base(Shim):
    _shown = ('servers',)

    def __init__(
        self,
        servers: str | list[str] = 'nats://127.0.0.1:4222',
        *,
        timeout: float = 10.0,
        connect_timeout: float = 2.0,
        max_reconnect_attempts: int = 5,
        reconnect_time_wait: float = 0.5,
    ) -> None:
        self.servers = servers
        self._client = _Client(
            servers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_reconnect_attempts=max_reconnect_attempts,
            reconnect_time_wait=reconnect_time_wait,
        )


class _Subscriber(_Base, OneTopic, SubscriberIterator):
    _matches = staticmethod(nats_subject_matches)

    def _start(self, subscribe: Any, topic: str) -> Any:
        """Run a subscriber's ``subscribe`` coroutine; on failure, close the connection."""
        try:
            return self._client.run(subscribe, f'subscribing to {topic!r}')
        except BaseException:
            self._client.close()
            raise


class NatsPublisher(_Base):
    """Publishes messages on NATS subjects (one per topic).

    Args:
        servers: NATS server URL(s).
        timeout: Seconds a publish (and its flush to the server) may take.
        connect_timeout: Seconds a connection attempt may take.
        max_reconnect_attempts: Reconnections tried before giving up.
        reconnect_time_wait: Seconds between reconnections.
    """

    def send_message(self, topic: str, message: bytes) -> None:
        """Publish the message and flush it to the server."""
        self._check_open()
        self._client.wait_connected(f'publishing to {topic!r}')
        nc = self._client.nc

        async def _send() -> None:
            await nc.publish(topic, message)
            await nc.flush(timeout=self._client.timeout)

        _publish(self._client, _send(), topic)


class NatsSubscriber(_Subscriber):
    """Receives the messages of one NATS subject.

    Args:
        servers: NATS server URL(s).
        topic: The topic (subject; wildcards allowed).
        queue_group: Share the messages with the other subscribers of this group.
        pending_limit: Messages buffered before the client drops the excess.
        kwargs: Connection options of :class:`NatsPublisher`.
    """

    def __init__(
        self,
        servers: str | list[str],
        topic: str,
        *,
        queue_group: str = '',
        pending_limit: int = 65536,
        **kwargs: Any,
    ) -> None:
        super().__init__(servers, **kwargs)
        self.topic = topic
        nc = self._client.nc

        async def _subscribe() -> Any:
            sub = await nc.subscribe(topic, queue=queue_group, pending_msgs_limit=pending_limit)
            await nc.flush(timeout=self._client.timeout)
            return sub

        self._sub = self._start(_subscribe(), topic)

    def next_message(self, timeout: float | None = None) -> bytes:
        """Return the next message of the subject."""
        self._check_open()
        deadline = Deadline(timeout, _POLL, f'topic {self.topic!r}')
        while True:
            self._client.check_alive(f'reading {self.topic!r}')
            left = deadline.left()
            try:
                msg = self._client.run(self._sub.next_msg(timeout=left), 'reading', left)
            except StreamTimeoutError:
                continue
            return bytes(msg.data)


class JetStreamPublisher(_Base):
    """Publishes messages to JetStream streams (one stream per topic, durable).

    Args:
        servers: NATS server URL(s).
        max_msgs: Cap each stream at this many messages (oldest dropped; -1: no cap).
        kwargs: Connection options of :class:`NatsPublisher`.
    """

    def __init__(
        self,
        servers: str | list[str] = 'nats://127.0.0.1:4222',
        *,
        max_msgs: int = -1,
        **kwargs: Any,
    ) -> None:
        super().__init__(servers, **kwargs)
        self.max_msgs = max_msgs
        self._js = self._client.nc.jetstream(timeout=self._client.timeout)
        self._streams: set[str] = set()

    def _ensure_stream(self, topic: str) -> None:
        if topic not in self._streams:
            self._client.run(
                _add_stream(self._js, topic, self.max_msgs),
                f'creating the stream of {topic!r}',
            )
            self._streams.add(topic)

    def send_message(self, topic: str, message: bytes) -> None:
        """Publish the message and wait for JetStream to store it."""
        self._check_open()
        self._client.wait_connected(f'publishing to {topic!r}')
        self._ensure_stream(topic)
        _publish(
            self._client, self._js.publish(topic, message, timeout=self._client.timeout), topic
        )

    def delete_topic(self, topic: str) -> None:
        """Delete the stream of ``topic`` and its messages."""
        self._check_open()
        self._client.run(self._js.delete_stream(stream_name(topic)), f'deleting {topic!r}')
        self._streams.discard(topic)


def _publish(client: _Client, coro: Any, topic: str) -> None:
    try:
        client.run(coro, f'publishing to {topic!r}')
    except StreamTimeoutError as e:  # the server did not confirm: treat as gone
        raise StreamBrokerError(
            f'NATS at {client.servers} did not confirm a message on {topic!r} within '
            f'{client.timeout} s; is the server up?',
        ) from e


async def _add_stream(js: Any, topic: str, max_msgs: int) -> None:
    from nats.js.errors import BadRequestError

    with contextlib.suppress(BadRequestError):  # exists with another config: use it
        await js.add_stream(name=stream_name(topic), subjects=[topic], max_msgs=max_msgs)


class JetStreamSubscriber(_Subscriber):
    """Reads a JetStream stream through a durable pull consumer.

    Args:
        servers: NATS server URL(s).
        topic: The topic.
        durable: Name of the durable consumer; subscribers sharing it share messages.
        ack_wait: Seconds before a message handed out but not acknowledged is redelivered.
        kwargs: Connection options of :class:`NatsPublisher`.
    """

    def __init__(
        self,
        servers: str | list[str],
        topic: str,
        *,
        durable: str = 'tether',
        ack_wait: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(servers, **kwargs)
        from nats.js.api import ConsumerConfig

        self.topic = topic
        self.durable = durable
        js = self._client.nc.jetstream(timeout=self._client.timeout)
        self._unacked: Any = None

        async def _subscribe() -> Any:
            await _add_stream(js, topic, -1)
            return await js.pull_subscribe(
                topic,
                durable=durable,
                stream=stream_name(topic),
                config=ConsumerConfig(ack_wait=ack_wait),
            )

        self._sub = self._start(_subscribe(), topic)

    def _ack(self) -> None:
        if self._unacked is not None:
            self._client.run(self._unacked.ack(), f'acknowledging on {self.topic!r}')
            self._unacked = None

    def next_message(self, timeout: float | None = None) -> bytes:
        """Acknowledge the previous message and return the next one."""
        self._check_open()
        self._client.check(f'reading {self.topic!r}')
        self._ack()
        deadline = Deadline(timeout, 2 * _POLL, f'topic {self.topic!r}')
        while True:
            self._client.check_alive(f'reading {self.topic!r}')
            left = deadline.left()
            try:
                msgs = self._client.run(self._sub.fetch(1, timeout=left), 'reading', left)
            except StreamTimeoutError:
                continue
            if msgs:
                self._unacked = msgs[0]
                return bytes(msgs[0].data)

    def close(self) -> None:
        """Acknowledge the last message handed out and close the connection."""
        if self._closed:
            return
        try:
            if not self._client.nc.is_closed:
                self._ack()
        finally:
            super().close()
