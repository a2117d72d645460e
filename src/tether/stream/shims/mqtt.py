"""MQTT (Mosquitto and other brokers) as a stream broker.

:class:`MQTTPublisher` publishes each message on the MQTT topic named after the stream
topic, at QoS 1 by default, waiting for the broker's ``PUBACK``. :class:`MQTTSubscriber`
subscribes to it.

Delivery: every subscriber connected at the time gets every message. While a subscriber
is down its messages are **lost**, unless it uses a persistent session
(``session_id='...'``, reused when it restarts, and ``qos=1``): the broker then **keeps**
QoS 1 messages for it (Mosquitto keeps up to ``max_queued_messages``, 1000 by default,
then drops) and replays them when it reconnects. Acknowledgements are manual: a message
is acknowledged when the next one is asked for (or at ``close``), so with a persistent
session a message handed out to a consumer that was killed is delivered again
(at-least-once). Backpressure: at most ``buffer`` messages wait in the subscriber; when
the buffer is full the client stops reading and the broker queues (and past its limit,
drops) instead.

A broker that is down or goes away raises :class:`~tether.exceptions.StreamBrokerError`
within ``timeout`` seconds (the publisher) or on the next read (the subscriber sees the
disconnection at once).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

from tether._extras import import_extra
from tether.exceptions import StreamBrokerError
from tether.stream.protocols import SubscriberIterator
from tether.stream.shims._base import AtHost, Deadline, OneTopic

__all__ = ['MQTTPublisher', 'MQTTSubscriber', 'mqtt_topic_matches']

_POLL = 0.5


def mqtt_topic_matches(pattern: str, topic: str) -> bool:
    """Whether the MQTT topic filter ``pattern`` (``+`` one level, ``#`` the rest) matches."""
    want, have = pattern.split('/'), topic.split('/')
    for i, level in enumerate(want):
        if level == '#':
            return True
        if i >= len(have) or (level != '+' and level != have[i]):
            return False
    return len(want) == len(have)


class _Base(AtHost):
    def __init__(
        self,
        hostname: str = '127.0.0.1',
        port: int = 1883,
        *,
        qos: int = 1,
        timeout: float = 10.0,
        keepalive: int = 5,
        session_id: str | None = None,
        manual_ack: bool = False,
    ) -> None:
        mqtt = import_extra('paho.mqtt.client', 'the MQTT stream shims need paho-mqtt', 'mqtt')
        self._mqtt = mqtt
        super().__init__(hostname, port)
        self.qos = qos
        self.timeout = timeout
        self._connected = threading.Event()
        self._lost: str | None = None
        self._ever_connected = False
        self._client: Any = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=session_id or f'tether-{uuid.uuid4().hex}',
            clean_session=session_id is None,
            manual_ack=manual_ack,
        )
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        # Set before connecting: a persistent session replays kept messages at once.
        self._client.on_message = getattr(self, '_on_message', None)
        self._client.on_subscribe = getattr(self, '_on_subscribe', None)
        self._client.reconnect_delay_set(1, 1)
        try:
            self._client.connect(hostname, port, keepalive=keepalive)
        except OSError as e:
            raise StreamBrokerError(
                f'cannot connect to the MQTT broker at {self._at}: {e}; is it up?',
            ) from e
        self._client.loop_start()
        if not self._connected.wait(timeout):
            self._client.loop_stop()
            raise StreamBrokerError(
                f'the MQTT broker at {self._at} did not accept the connection within '
                f'{timeout} s ({self._lost or "no answer"})',
            )

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self._lost = f'connection refused: {reason}'
        elif not self._ever_connected:  # after a disconnection the shim stays failed
            self._ever_connected = True
            self._connected.set()

    def _on_disconnect(
        self,
        client: Any,
        userdata: Any,
        flags: Any,
        reason: Any,
        props: Any,
    ) -> None:
        self._connected.clear()
        if not self._closed:
            self._lost = f'disconnected: {reason}'

    def _check(self, what: str) -> None:
        self._check_open()
        if self._lost is not None:
            raise StreamBrokerError(
                f'MQTT broker at {self._at} {self._lost} while {what}; is it up?',
            )

    def _release(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


class MQTTPublisher(_Base):
    """Publishes messages to an MQTT broker.

    Args:
        hostname: Broker host.
        port: Broker port.
        **kwargs: ``qos``, the MQTT quality of service (0: at most once, 1: at least
            once); ``timeout``, seconds to connect and to wait for a QoS 1
            acknowledgement; ``keepalive``, the MQTT keep-alive interval in seconds.
    """

    def __init__(self, hostname: str = '127.0.0.1', port: int = 1883, **kwargs: Any) -> None:
        super().__init__(hostname, port, **kwargs)

    def send_message(self, topic: str, message: bytes) -> None:
        """Publish the message and wait until the broker acknowledged it (QoS 1)."""
        self._check(f'publishing to {topic!r}')
        mqtt = self._mqtt
        info = self._client.publish(topic, message, qos=self.qos)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise StreamBrokerError(
                f'MQTT broker at {self._at} refused a message on '
                f'{topic!r}: {mqtt.error_string(info.rc)}',
            )
        deadline = time.monotonic() + self.timeout
        while not info.is_published():
            self._check(f'publishing to {topic!r}')
            if time.monotonic() > deadline:
                raise StreamBrokerError(
                    f'MQTT broker at {self._at} did not acknowledge a '
                    f'message on {topic!r} within {self.timeout} s',
                )
            info.wait_for_publish(0.2)


class MQTTSubscriber(_Base, OneTopic, SubscriberIterator):
    """Receives the messages of one MQTT topic.

    Args:
        hostname: Broker host.
        port: Broker port.
        topic: The topic (MQTT wildcards ``+`` and ``#`` allowed).
        qos: Quality of service of the subscription.
        session_id: Client id of a persistent session (messages kept while down).
        buffer: Messages buffered in this process before the client stops reading.
        kwargs: Options of :class:`MQTTPublisher`.
    """

    _matches = staticmethod(mqtt_topic_matches)

    def __init__(
        self,
        hostname: str,
        port: int,
        topic: str,
        *,
        qos: int = 1,
        session_id: str | None = None,
        buffer: int = 1000,
        **kwargs: Any,
    ) -> None:
        self.topic = topic
        self._inbox: queue.Queue[Any] = queue.Queue(buffer)
        self._subscribed = threading.Event()
        self._unacked: Any = None
        super().__init__(
            hostname,
            port,
            qos=qos,
            session_id=session_id,
            manual_ack=True,
            **kwargs,
        )
        rc, _ = self._client.subscribe(topic, qos=qos)
        if rc != self._mqtt.MQTT_ERR_SUCCESS or not self._subscribed.wait(self.timeout):
            self.close()
            raise StreamBrokerError(
                f'the MQTT broker at {self._at} did not confirm the subscription to '
                f'{topic!r} within {self.timeout} s',
            )

    def _on_subscribe(self, *args: Any) -> None:
        self._subscribed.set()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        while not self._closed:
            try:
                self._inbox.put((message.payload, message.mid, message.qos), timeout=_POLL)
                return
            except queue.Full:
                continue

    def _ack(self) -> None:
        if self._unacked is not None:
            mid, qos = self._unacked
            self._unacked = None
            if qos > 0:
                self._client.ack(mid, qos)
                self._wait_written()

    def _wait_written(self) -> None:
        # paho writes from its network thread; wait (bounded) until the PUBACK left, so
        # a consumer killed right after is not handed the acknowledged message again.
        out = getattr(self._client, '_out_packet', None)
        deadline = time.monotonic() + 1.0
        while out and time.monotonic() < deadline and self._lost is None:
            time.sleep(0.0005)

    def next_message(self, timeout: float | None = None) -> bytes:
        """Acknowledge the previous message and return the next one."""
        self._ack()
        deadline = Deadline(timeout, _POLL, f'topic {self.topic!r}')
        while True:
            try:
                payload, mid, qos = self._inbox.get_nowait()
            except queue.Empty:
                pass
            else:
                self._unacked = (mid, qos)
                return bytes(payload)
            self._check(f'reading {self.topic!r}')
            try:
                payload, mid, qos = self._inbox.get(timeout=deadline.left())
            except queue.Empty:
                continue
            self._unacked = (mid, qos)
            return bytes(payload)

    def close(self) -> None:
        """Acknowledge the last message handed out and disconnect."""
        if not self._closed and self._lost is None:
            self._ack()
        super().close()

    def forget_session(self) -> None:
        """Close, and make the broker drop this subscriber's persistent session.

        The broker keeps a session (and queues messages for it) until a client with the
        same id connects with a clean session, which this does.
        """
        self.close()
        mqtt = self._mqtt
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self._client._client_id.decode(),
            clean_session=True,
        )
        try:
            client.connect(self.hostname, self.port)
            client.loop(self.timeout)  # sends CONNECT, reads CONNACK
            client.disconnect()
        except OSError as e:
            raise StreamBrokerError(
                f'cannot reach the MQTT broker at {self._at} to drop a session: {e}',
            ) from e
