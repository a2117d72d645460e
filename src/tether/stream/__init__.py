"""ProxyStream: metadata through a message broker, bulk data through a Store.

A :class:`StreamProducer` puts each object in a store and publishes a small event (the
store's config, the key, user metadata) through a broker; a :class:`StreamConsumer` turns
events back into lazy proxies, so a process that only routes work never touches the
bytes::

    from tether.store import Store
    from tether.connectors.redis import RedisConnector
    from tether.stream import StreamConsumer, StreamProducer
    from tether.stream.shims.redis import RedisPublisher, RedisSubscriber

    store = Store('frames', RedisConnector('localhost', 6379))
    subscriber = RedisSubscriber('localhost', 6379, 'frames')
    with StreamProducer(RedisPublisher('localhost', 6379), {'frames': store}) as producer:
        producer.send('frames', b'...', metadata={'step': 1})
    for proxy in StreamConsumer(subscriber, stores=store):
        ...                                   # bytes move only when proxy is used

A consumer acts only on events naming a store it accepts (``stores=``, stores registered
in its process, or, with a stream key or ``accept_unknown_stores=True``, stores rebuilt
from the event), and imports nothing an event names unless allowlisted.

Broker shims live in :mod:`tether.stream.shims`; the event format in
:mod:`tether.stream.events`; signed events in :mod:`tether.stream.auth`; filters, samplers
and aggregators in :mod:`tether.stream.hooks`.
"""

from __future__ import annotations

from tether.stream._consumer import StreamConsumer
from tether.stream._producer import StreamProducer
from tether.stream.protocols import Publisher, Subscriber, TopicSubscriber

__all__ = ['Publisher', 'StreamConsumer', 'StreamProducer', 'Subscriber', 'TopicSubscriber']
