"""ZeroMQ publish/subscribe as a stream "broker" (no broker process: peers connect).

:class:`ZMQPublisher` binds an ``XPUB`` socket; each :class:`ZMQSubscriber` connects a
``SUB`` socket to it and subscribes to its topic. Messages are two frames, the topic and
the event.

Delivery: messages sent while a subscriber is not connected are **lost** (ZeroMQ's
"slow joiner": call :meth:`ZMQPublisher.wait_for_subscribers` before sending to be sure
the subscribers are there). Every connected subscriber gets every message of its topic.
Backpressure: the publisher sets ``XPUB_NODROP``, so when a subscriber's queue (``hwm``
messages) is full, :meth:`~ZMQPublisher.send_message` blocks up to ``timeout`` seconds
and then raises :class:`~tether.exceptions.StreamBackpressureError` instead of dropping.
Several publishers can serve one topic if a subscriber connects to each
(``ZMQSubscriber(addresses=[...])``).

With no broker there is nothing to "stop" but the publisher: a subscriber whose
publisher disconnects raises :class:`~tether.exceptions.StreamBrokerError` on its next
read (ZeroMQ reports the disconnection through a socket monitor).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tether._extras import import_extra
from tether.exceptions import (
    StreamBackpressureError,
    StreamBrokerError,
    StreamTimeoutError,
)
from tether.stream.protocols import SubscriberIterator
from tether.stream.shims._base import OneTopic, Shim

__all__ = ['ZMQPublisher', 'ZMQSubscriber', 'ZeroMQPublisher', 'ZeroMQSubscriber']


def _zmq() -> Any:
    return import_extra('zmq', 'the ZeroMQ stream shims need pyzmq', 'zmq')


class ZMQPublisher(Shim):
    """Publishes messages on a bound ``XPUB`` socket.

    Args:
        address: Where to bind, e.g. ``tcp://127.0.0.1:5555`` (``tcp://127.0.0.1:*``
            picks a free port; read it back from :attr:`address`).
        hwm: Messages queued per subscriber before sends block.
        timeout: Seconds a send may block on a full subscriber before raising.
    """

    def __init__(self, address: str, *, hwm: int = 1000, timeout: float = 10.0) -> None:
        zmq = _zmq()
        self._zmq = zmq
        self._context = zmq.Context.instance()
        self._socket = self._context.socket(zmq.XPUB)
        self._socket.setsockopt(zmq.SNDHWM, hwm)
        self._socket.setsockopt(zmq.XPUB_NODROP, 1)
        self._socket.setsockopt(zmq.XPUB_VERBOSER, 1)  # every (un)subscription, to count
        self._socket.setsockopt(zmq.SNDTIMEO, int(timeout * 1000))
        self._socket.setsockopt(zmq.LINGER, 1000)
        self.timeout = timeout
        try:
            self._socket.bind(address)
        except zmq.ZMQError as e:
            self._socket.close(0)
            raise StreamBrokerError(f'cannot bind the ZeroMQ publisher to {address}: {e}') from e
        self.address: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._subscriptions: dict[bytes, int] = {}

    def __repr__(self) -> str:
        return f'ZMQPublisher({self.address!r})'

    def _drain_subscriptions(self, timeout_ms: int = 0) -> None:
        zmq = self._zmq
        while self._socket.poll(timeout_ms, zmq.POLLIN):
            frame = self._socket.recv()
            if frame[:1] == b'\x01':
                self._subscriptions[frame[1:]] = self._subscriptions.get(frame[1:], 0) + 1
            elif frame[:1] == b'\x00':
                self._subscriptions[frame[1:]] = self._subscriptions.get(frame[1:], 1) - 1
            timeout_ms = 0

    def subscribers(self, topic: str) -> int:
        """Return how many subscribers of ``topic`` are connected now."""
        self._drain_subscriptions()
        return max(0, self._subscriptions.get(topic.encode(), 0))

    def wait_for_subscribers(self, topic: str, count: int = 1, timeout: float = 10.0) -> None:
        """Block until ``count`` subscribers of ``topic`` are connected.

        Raises:
            StreamTimeoutError: if they are not there within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        key = topic.encode()
        while self._subscriptions.get(key, 0) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeoutError(
                    f'{self._subscriptions.get(key, 0)} of {count} subscribers of topic '
                    f'{topic!r} connected to {self.address} within {timeout} s',
                )
            self._drain_subscriptions(int(min(left, 0.1) * 1000))

    def send_message(self, topic: str, message: bytes) -> None:
        """Send the topic and message frames to the subscribers of ``topic``."""
        self._check_open()
        self._drain_subscriptions()
        try:
            self._socket.send_multipart([topic.encode(), message], copy=len(message) < 65536)
        except self._zmq.Again as e:
            raise StreamBackpressureError(
                f'a subscriber of topic {topic!r} on {self.address} stayed full for '
                f'{self.timeout} s (slow consumer)',
            ) from e
        except self._zmq.ZMQError as e:
            raise StreamBrokerError(f'ZeroMQ send on {self.address} failed: {e}') from e

    def _release(self) -> None:
        # Queued messages get ``LINGER`` = 1 s to leave.
        self._socket.close()


class ZMQSubscriber(Shim, OneTopic, SubscriberIterator):
    """Receives the messages of one topic from one or more ZeroMQ publishers.

    Args:
        address: Address of the publisher (or a list of addresses).
        topic: The topic.
        hwm: Messages queued before ZeroMQ stops reading from the publisher.
    """

    def __init__(
        self,
        address: str | Sequence[str],
        topic: str,
        *,
        hwm: int = 1000,
    ) -> None:
        zmq = _zmq()
        self._zmq = zmq
        self.addresses = [address] if isinstance(address, str) else list(address)
        self.topic = topic
        self._topic = topic.encode()
        self._context = zmq.Context.instance()
        self._socket = self._context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.RCVHWM, hwm)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._monitor = self._socket.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED,
        )
        self._socket.setsockopt(zmq.SUBSCRIBE, self._topic)
        for a in self.addresses:
            self._socket.connect(a)
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        self._connected = 0

    def __repr__(self) -> str:
        return f'ZMQSubscriber({self.addresses!r}, {self.topic!r})'

    def _monitor_event(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        event = recv_monitor_message(self._monitor)
        if event['event'] == self._zmq.EVENT_CONNECTED:
            self._connected += 1
        elif event['event'] == self._zmq.EVENT_DISCONNECTED:
            raise StreamBrokerError(
                f'the ZeroMQ publisher of topic {self.topic!r} at '
                f'{event["endpoint"].decode()} disconnected',
            )

    def next_message(self, timeout: float | None = None) -> bytes:
        """Return the next message of the topic."""
        self._check_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise StreamTimeoutError(f'no message on topic {self.topic!r} within {timeout} s')
            ready = dict(self._poller.poll(None if left is None else int(left * 1000) + 1))
            if self._socket in ready:
                topic, message = self._socket.recv_multipart(copy=True)
                if topic == self._topic:  # subscriptions match prefixes
                    return bytes(message)
            elif self._monitor in ready:  # messages already received come first
                self._monitor_event()

    def _release(self) -> None:
        self._socket.disable_monitor()
        self._monitor.close(0)
        self._socket.close(0)


class ZeroMQPublisher(ZMQPublisher):
    """ProxyStore's call shape: binds ``tcp://{address}:{port}``.

    Args:
        address: Interface to bind.
        port: TCP port.
    """

    def __init__(self, address: str, port: int) -> None:
        super().__init__(f'tcp://{address}:{port}')


class ZeroMQSubscriber(ZMQSubscriber):
    """ProxyStore's call shape: connects to ``tcp://{address}:{port}``.

    Args:
        address: Host of the publisher.
        port: TCP port of the publisher.
        topic: The topic to receive.
    """

    def __init__(self, address: str, port: int, *, topic: str = '') -> None:
        super().__init__(f'tcp://{address}:{port}', topic)
