"""Broker shims: a Publisher and a Subscriber per message broker.

| module | classes | while a consumer is down |
|---|---|---|
| :mod:`~tether.stream.shims.queue` | ``QueuePublisher``, ``QueueSubscriber`` | kept (in process) |
| :mod:`~tether.stream.shims.multiprocessing` | ``MultiprocessingQueuePublisher`` ... | kept |
| :mod:`~tether.stream.shims.redis` | ``RedisPublisher``, ``RedisSubscriber`` | lost |
| :mod:`~tether.stream.shims.redis` | ``RedisQueuePublisher``, ``RedisQueueSubscriber`` | kept |
| :mod:`~tether.stream.shims.zmq` | ``ZMQPublisher``, ``ZMQSubscriber`` | lost |
| :mod:`~tether.stream.shims.nats` | ``NatsPublisher``, ``NatsSubscriber`` | lost |
| :mod:`~tether.stream.shims.nats` | ``JetStreamPublisher``, ``JetStreamSubscriber`` | kept |
| :mod:`~tether.stream.shims.amqp` | ``AMQPPublisher``, ``AMQPSubscriber`` | kept |
| :mod:`~tether.stream.shims.mqtt` | ``MQTTPublisher``, ``MQTTSubscriber`` | lost (kept: session) |

Each module imports its broker client only when used; ``docs/stream.md`` details them.
"""

from __future__ import annotations

__all__: list[str] = []
