"""RabbitMQ behind the :class:`~tether.faas._broker.Broker` interface (aio-pika).

Queues are durable and messages persistent, published with confirms (a publish returns
once RabbitMQ has the message) and ``mandatory`` (a message for a queue that does not
exist is an error, not silently dropped). Each consumer has its own channel, so closing
it returns exactly its unacknowledged messages to the queue. The connection is robust:
after RabbitMQ restarts it reconnects and resubscribes; messages that were delivered but
not acknowledged come back flagged ``redelivered``.

Channels are budgeted. RabbitMQ closes a whole connection, with every consumer on it,
when a client opens more channels than the ``channel_max`` negotiated for it (2047 by
default); so a consumer is refused (:class:`~tether.exceptions.FaasConnectionError`,
HTTP 503, retried by clients) once ``channel_budget`` consumer channels are open, and the
budget is kept below ``channel_max`` with room for the publishing channel and the
short-lived channels of :meth:`AmqpBroker.stats`. A refused consumer costs nobody else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from tether.exceptions import FaasConnectionError
from tether.faas._broker import Consumer, Delivery, OnMessage

__all__ = ['AmqpBroker']

logger = logging.getLogger(__name__)

_TIMEOUT = 15.0


# Channels kept out of the consumers' budget: the publishing channel, the stats channels
# (at most _STATS_CHANNELS at once), the control listener and a margin.
_STATS_CHANNELS = 4
_RESERVED = 1 + _STATS_CHANNELS + 11


class _AmqpConsumer:
    def __init__(self, channel: Any, release: Callable[[], None]) -> None:
        self.channel = channel
        self._release: Callable[[], None] | None = release

    async def ack(self, tags: Sequence[Any]) -> None:
        for message in tags:
            try:
                await message.ack()
            except Exception as e:  # the channel died: the broker will redeliver
                logger.debug('ack lost (%s): the message will be redelivered', e)

    async def close(self) -> None:
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.channel.close(), _TIMEOUT)
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class AmqpBroker:
    """Durable queues on a RabbitMQ server.

    Args:
        connection: An aio-pika robust connection.
        expiring_prefix: Queues whose name starts with this expire after
            ``expiry_s`` unused (the result queues of task groups).
        expiry_s: That expiry.
        channel_budget: Consumer channels open at once, at most (kept below the
            connection's ``channel_max`` minus the channels the broker needs itself).
    """

    # RabbitMQ's default max_message_size: the service builds no larger message.
    max_message_bytes = 128 * 2**20

    def __init__(
        self,
        connection: Any,
        channel: Any,
        expiring_prefix: str,
        expiry_s: float,
        channel_budget: int = 2000,
    ):
        self._connection = connection
        self._channel = channel
        self._declared: set[str] = set()
        self._expiring_prefix = expiring_prefix
        self._expiry_ms = int(expiry_s * 1000)
        self._wanted_budget = channel_budget
        self.consumers = 0
        self._stats_slots = asyncio.Semaphore(_STATS_CHANNELS)

    @classmethod
    async def connect(
        cls,
        url: str,
        expiry_s: float = 7 * 86400,
        expiring_prefix: str = '',
        channel_budget: int = 2000,
    ) -> AmqpBroker:
        import aio_pika

        try:
            connection = await aio_pika.connect_robust(url, timeout=_TIMEOUT)
            channel = await connection.channel(publisher_confirms=True)
        except Exception as e:
            raise FaasConnectionError(f'cannot connect to RabbitMQ at {_redact(url)}: {e}') from e
        return cls(connection, channel, expiring_prefix, expiry_s, channel_budget)

    @property
    def channel_budget(self) -> int:
        """Consumer channels allowed: the configured budget, within ``channel_max``."""
        channel_max = 0
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            channel_max = int(self._connection.transport.connection.connection_tune.channel_max)
        if channel_max <= 0:  # 0: no limit negotiated (or not connected now)
            channel_max = 2047  # RabbitMQ's default
        return max(0, min(self._wanted_budget, channel_max - _RESERVED))

    def _release(self) -> None:
        self.consumers -= 1

    def set_expiring_prefix(self, prefix: str) -> None:
        self._expiring_prefix = prefix

    def _arguments(self, name: str) -> dict[str, Any]:
        if self._expiring_prefix and name.startswith(self._expiring_prefix):
            return {'x-expires': self._expiry_ms}
        return {}

    async def _declare(self, channel: Any, name: str) -> Any:
        return await channel.declare_queue(name, durable=True, arguments=self._arguments(name))

    async def publish(self, queue: str, bodies: Sequence[bytes]) -> None:
        import aio_pika

        try:
            if queue not in self._declared:
                await asyncio.wait_for(self._declare(self._channel, queue), _TIMEOUT)
                self._declared.add(queue)
            exchange = self._channel.default_exchange
            await asyncio.wait_for(
                asyncio.gather(
                    *(
                        exchange.publish(
                            aio_pika.Message(
                                bytes(body), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
                            ),
                            routing_key=queue,
                            mandatory=True,
                        )
                        for body in bodies
                    ),
                ),
                _TIMEOUT,
            )
        except Exception as e:
            self._declared.discard(queue)
            raise FaasConnectionError(f'RabbitMQ did not take messages for {queue}: {e!r}') from e

    async def consume(self, queue: str, prefetch: int, on_message: OnMessage) -> Consumer:
        budget = self.channel_budget
        if self.consumers >= budget:
            raise FaasConnectionError(
                f'the service has {self.consumers} broker channels open, its budget of '
                f'{budget} (broker_channel_budget, within the channel_max RabbitMQ grants): '
                'try again later',
            )
        self.consumers += 1  # before the first await: concurrent calls see it
        channel = None
        try:
            channel = await asyncio.wait_for(self._connection.channel(), _TIMEOUT)
            await channel.set_qos(prefetch_count=max(1, prefetch))
            q = await self._declare(channel, queue)

            async def deliver(message: Any) -> None:
                result = on_message(Delivery(message.body, message, bool(message.redelivered)))
                if asyncio.iscoroutine(result):
                    await result

            await q.consume(deliver, no_ack=False)
        except BaseException as e:
            if channel is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(channel.close(), _TIMEOUT)
            self._release()
            if not isinstance(e, Exception):
                raise
            raise FaasConnectionError(f'cannot consume {queue} from RabbitMQ: {e!r}') from e
        return _AmqpConsumer(channel, self._release)

    async def delete(self, queue: str) -> None:
        self._declared.discard(queue)
        try:
            await self._channel.queue_delete(queue)
        except Exception as e:
            logger.debug('deleting queue %s: %s', queue, e)

    async def broadcast(self, topic: str, body: bytes) -> None:
        import aio_pika

        try:
            exchange = await asyncio.wait_for(self._fanout(self._channel, topic), _TIMEOUT)
            await asyncio.wait_for(
                exchange.publish(aio_pika.Message(bytes(body)), routing_key=''), _TIMEOUT
            )
        except Exception as e:
            raise FaasConnectionError(
                f'RabbitMQ did not take a broadcast on {topic}: {e!r}'
            ) from e

    async def _fanout(self, channel: Any, topic: str) -> Any:
        import aio_pika

        return await channel.declare_exchange(topic, aio_pika.ExchangeType.FANOUT, durable=True)

    async def listen(self, topic: str, on_message: Callable[[bytes], None]) -> Consumer:
        """A queue of this connection's own (exclusive, deleted with it) bound to the
        topic's fanout exchange; outside the consumers' budget (one per service)."""
        channel = await asyncio.wait_for(self._connection.channel(), _TIMEOUT)
        try:
            exchange = await self._fanout(channel, topic)
            q = await channel.declare_queue(exclusive=True, auto_delete=True)
            await q.bind(exchange)

            async def deliver(message: Any) -> None:
                on_message(message.body)

            await q.consume(deliver, no_ack=True)
        except Exception as e:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(), _TIMEOUT)
            raise FaasConnectionError(f'cannot listen to {topic} on RabbitMQ: {e!r}') from e
        return _AmqpConsumer(channel, lambda: None)

    async def stats(self, queue: str) -> tuple[int, int]:
        # A passive declaration of a missing queue closes its channel: a channel of its own
        # (one of _STATS_CHANNELS, outside the consumers' budget).
        async with self._stats_slots:
            return await self._stats(queue)

    async def _stats(self, queue: str) -> tuple[int, int]:
        channel = await asyncio.wait_for(self._connection.channel(), _TIMEOUT)
        try:
            q = await asyncio.wait_for(channel.declare_queue(queue, passive=True), _TIMEOUT)
            result = q.declaration_result
            return int(result.message_count or 0), int(result.consumer_count or 0)
        except Exception as e:
            logger.debug('queue %s: %r', queue, e)
            return 0, 0
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(), _TIMEOUT)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._connection.close(), _TIMEOUT)


def _redact(url: str) -> str:
    scheme, sep, rest = url.partition('://')
    creds, at, host = rest.rpartition('@')
    if not at:
        return url
    user = creds.split(':', 1)[0]
    return f'{scheme}{sep}{user}:***@{host}'
