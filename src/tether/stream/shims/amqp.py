"""RabbitMQ (AMQP 0-9-1) as a stream broker: one durable queue per topic.

:class:`AMQPPublisher` publishes persistent messages to the default exchange with the
topic as routing key, so each lands in the durable queue named after the topic (declared
by whichever side comes first); publisher confirms make :meth:`~AMQPPublisher.send_message`
return only once the broker has the message. :class:`AMQPSubscriber` consumes that queue
with manual acknowledgements and a prefetch window.

Delivery: messages are **kept** in the queue while no consumer runs (and across broker
restarts: queue durable, messages persistent) and delivered when one comes back.
Several subscribers of a topic share its messages (each goes to one of them: a work
queue). A message is acknowledged when the next one is asked for (or at ``close``); one
handed out but never acknowledged (the consumer was killed) goes back to the queue when
the connection drops (at-least-once). With ``max_length``, a full queue makes the broker
refuse new messages (``x-overflow: reject-publish``), which the publisher reports as
:class:`~tether.exceptions.StreamBackpressureError`; publisher and subscribers must then
pass the same ``max_length``.

A broker that is down or goes away raises :class:`~tether.exceptions.StreamBrokerError`
within ``timeout`` seconds (connections use AMQP heartbeats of ``heartbeat`` seconds).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

from tether._extras import import_extra
from tether._serve.loop import LoopThread
from tether.exceptions import (
    StreamBackpressureError,
    StreamBrokerError,
    StreamError,
    StreamTimeoutError,
)
from tether.stream.protocols import SubscriberIterator
from tether.stream.shims._base import Deadline, OneTopic, Shim, close_on_loop

__all__ = ['AMQPPublisher', 'AMQPSubscriber']

_POLL = 0.5


class _Base(Shim):
    def __init__(
        self,
        url: str = 'amqp://guest:guest@127.0.0.1:5672/',
        *,
        timeout: float = 10.0,
        heartbeat: int = 5,
        max_length: int | None = None,
    ) -> None:
        aio_pika = import_extra('aio_pika', 'the AMQP stream shims need aio-pika', 'amqp')
        self._aio_pika = aio_pika
        self.url = url
        self.timeout = timeout
        self.max_length = max_length
        self._queues: dict[str, Any] = {}
        self._loop = LoopThread('tether-amqp', timeout_error=StreamTimeoutError)
        sep = '&' if '?' in url else '?'
        try:
            self._connection: Any = self._run(
                aio_pika.connect(f'{url}{sep}heartbeat={heartbeat}', timeout=timeout),
                'connecting',
            )

            async def _open_channel() -> Any:
                return await self._connection.channel(publisher_confirms=True)

            self._channel: Any = self._run(_open_channel(), 'opening a channel')
        except BaseException:
            self._loop.stop()
            raise

    def _where(self) -> str:
        return repr(_redact(self.url))

    @property
    def namespace(self) -> str:
        """The stream's namespace, signed into its messages: the virtual host (``''``: ``/``)."""
        path = urllib.parse.urlsplit(self.url).path
        vhost = urllib.parse.unquote(path[1:]) if len(path) > 1 else '/'
        return '' if vhost == '/' else f'vhost {vhost}'

    def _run(self, coro: Any, what: str, timeout: float | None = None) -> Any:
        t = self.timeout if timeout is None else timeout
        try:
            return self._loop.run(coro, t)
        except StreamTimeoutError as e:
            raise StreamBrokerError(
                f'AMQP broker {_redact(self.url)}: {what} took over {t} s; is it up?',
            ) from e
        except StreamError:
            raise
        except Exception as e:
            if type(e).__name__ in ('DeliveryError', 'PublishError'):
                raise StreamBackpressureError(
                    f'AMQP broker {_redact(self.url)} refused a message while {what} (the '
                    f'queue is full: max_length={self.max_length})',
                ) from e
            raise StreamBrokerError(
                f'AMQP broker {_redact(self.url)}: {what} failed: {type(e).__name__}: {e}; '
                'is it up?',
            ) from e

    def _check(self, what: str) -> None:
        self._check_open()
        if self._connection.is_closed or self._channel.is_closed:
            raise StreamBrokerError(
                f'AMQP broker {_redact(self.url)}: connection lost while {what}; is it up?',
            )

    def _queue(self, topic: str) -> Any:
        queue = self._queues.get(topic)
        if queue is None:
            args = None
            if self.max_length is not None:
                args = {'x-max-length': self.max_length, 'x-overflow': 'reject-publish'}
            queue = self._run(
                self._channel.declare_queue(topic, durable=True, arguments=args),
                f'declaring queue {topic!r}',
            )
            self._queues[topic] = queue
        return queue

    def _release(self) -> None:
        close_on_loop(self._loop, self._connection, self._run)


def _redact(url: str) -> str:
    if '@' in url and '://' in url:
        scheme, rest = url.split('://', 1)
        return f'{scheme}://***@{rest.split("@", 1)[1]}'
    return url


class AMQPPublisher(_Base):
    """Publishes persistent messages to the durable queue of each topic.

    Args:
        url: AMQP URL, e.g. ``amqp://guest:guest@127.0.0.1:5672/``.
        timeout: Seconds a connection or a confirmed publish may take.
        heartbeat: AMQP heartbeat interval in seconds.
        max_length: Queue length limit (the broker refuses messages beyond it).
    """

    def send_message(self, topic: str, message: bytes) -> None:
        """Publish the message and wait for the broker's confirmation."""
        self._check(f'publishing to {topic!r}')
        self._queue(topic)
        aio_pika = self._aio_pika
        msg = aio_pika.Message(message, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        self._run(
            self._channel.default_exchange.publish(msg, routing_key=topic),
            f'publishing to {topic!r}',
        )

    def delete_topic(self, topic: str) -> None:
        """Delete the queue of ``topic`` and its messages."""
        self._check(f'deleting {topic!r}')
        self._run(self._channel.queue_delete(topic), f'deleting queue {topic!r}')
        self._queues.pop(topic, None)


class AMQPSubscriber(_Base, OneTopic, SubscriberIterator):
    """Consumes the durable queue of one topic with manual acknowledgements.

    Args:
        url: AMQP URL.
        topic: The topic.
        prefetch: Messages the broker sends ahead of acknowledgements.
        kwargs: Options of :class:`AMQPPublisher`.
    """

    def __init__(
        self,
        url: str,
        topic: str,
        *,
        prefetch: int = 8,
        **kwargs: Any,
    ) -> None:
        super().__init__(url, **kwargs)
        self.topic = topic
        self._unacked: Any = None
        self._inbox: asyncio.Queue[Any] | None = None

        async def _consume() -> None:
            self._inbox = asyncio.Queue()
            await self._channel.set_qos(prefetch_count=prefetch)
            await queue.consume(self._on_message)

        try:
            queue = self._queue(topic)
            self._run(_consume(), f'consuming {topic!r}')
        except BaseException:
            self.close()
            raise

    async def _on_message(self, message: Any) -> None:
        assert self._inbox is not None
        await self._inbox.put(message)

    def _ack(self) -> None:
        if self._unacked is not None:
            self._run(self._unacked.ack(), f'acknowledging on {self.topic!r}')
            self._unacked = None

    def next_message(self, timeout: float | None = None) -> bytes:
        """Acknowledge the previous message and return the next one."""
        self._check(f'reading {self.topic!r}')
        self._ack()
        inbox = self._inbox
        assert inbox is not None
        deadline = Deadline(timeout, _POLL, f'topic {self.topic!r}')
        while True:
            left = deadline.left()

            async def _get(wait: float = left) -> Any:
                try:
                    return await asyncio.wait_for(inbox.get(), wait)
                except TimeoutError:
                    return None

            msg = self._run(_get(), f'reading {self.topic!r}', left + 5.0)
            if msg is not None:
                self._unacked = msg
                return bytes(msg.body)
            self._check(f'reading {self.topic!r}')

    def close(self) -> None:
        """Acknowledge the last message handed out and close the connection."""
        if self._closed:
            return
        try:
            if not self._connection.is_closed:
                self._ack()
        except StreamError:
            pass
        finally:
            super().close()
