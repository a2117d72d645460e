"""Authenticated stream events: HMAC-signed messages and replay protection.

With a **stream key** configured, a :class:`~tether.stream.StreamProducer` signs every
message it publishes and a :class:`~tether.stream.StreamConsumer` refuses messages that
are unsigned, altered, signed with another key, or replayed. The key is a shared secret
of at least 16 bytes, resolved where it is used and never serialized:

1. the ``key=`` argument of the producer or consumer (``key=False``: no key, even if
   the environment has one);
2. else ``$TETHER_STREAM_KEY`` (the key itself);
3. else ``$TETHER_STREAM_KEY_FILE`` (a file holding the key; surrounding whitespace is
   ignored);
4. else the user's key file, ``$XDG_CONFIG_HOME/tether/stream.key`` (by default
   ``~/.config/tether/stream.key``), created on first use with a random key (mode 0600,
   written atomically, so processes racing to create it all end up with the same key).
   Every process of the same user on a host (and on hosts that share the home directory)
   therefore signs and verifies with the same key without any configuration; the file is
   refused if other users can read or write it.

A consumer also checks that a message arrived on a topic its subscriber reads, and in
its stream: the topic and the stream's **namespace** are covered by the MAC, so a message
replayed onto another topic, or copied into another stream whose topic has the same name
(another key prefix of a Redis queue, another RabbitMQ virtual host, or a ``namespace=``
the application gave), is refused. The namespace is the producer's or consumer's
``namespace=`` if given, else what its shim says (:func:`shim_namespace`).

A signed message is the JSON document of :mod:`tether.stream.events` with an ``auth``
object (producer id, namespace, topic, sequence number, time, key id) and, last, a ``mac`` field:
``HMAC-SHA256(key, document without its mac)``, over the exact bytes sent, in hex.
Consumers check the MAC over the raw bytes before parsing anything, then the replay
rules:

* each producer (a random id per :class:`~tether.stream.StreamProducer`, renewed in a
  forked child) numbers its messages per topic; a consumer accepts each
  ``(producer, topic, seq)`` once, and refuses numbers more than ``window`` below the
  highest it has seen (so reordering within the window is fine);
* a message older than ``max_age`` seconds, or more than ``max_skew`` seconds in the
  future, is refused; this bounds replays to a consumer that has restarted (and so
  forgot what it saw). Durable brokers redeliver a restarted consumer's in-flight message,
  which is accepted again (at-least-once) as long as it is younger than ``max_age``.
"""

from __future__ import annotations

import hmac
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Literal

from tether import _keyfile, _keys
from tether._keys import ReplayWindow, Sequencer, SigningKey
from tether.exceptions import ConfigError, EventAuthenticationError, EventReplayError

__all__ = [
    'ENV_KEY',
    'ENV_KEY_FILE',
    'KeySpec',
    'MIN_KEY_BYTES',
    'Signer',
    'StreamKey',
    'Verifier',
    'default_key_file',
    'resolve_key',
    'shim_namespace',
]

ENV_KEY = 'TETHER_STREAM_KEY'
ENV_KEY_FILE = 'TETHER_STREAM_KEY_FILE'
MIN_KEY_BYTES = _keys.MIN_KEY_BYTES

KeySpec = str | bytes | Literal[False] | None
"""What ``key=`` accepts: the key, ``None`` (from the environment) or ``False`` (none)."""

_MAC_HEAD = b',"mac":"'
_MAC_LEN = 64
_MAC_TAIL = re.compile(rb',"mac":"([0-9a-f]{64})"\}\s*\Z')


class StreamKey(SigningKey):
    """A stream key: a secret that never leaves the process.

    It cannot be pickled or copied into a message; its ``repr`` shows only its key id (a
    hash, harmless to log) so that two sides can compare which key they use.
    """

    __slots__ = ()

    what = 'stream key'
    kid_label = b'tether-stream-key-id'

    def mac(self, data: bytes) -> str:
        """``HMAC-SHA256(key, data)`` in hex."""
        return self.hexdigest(data)


def resolve_key(key: KeySpec | StreamKey) -> StreamKey | None:
    """Resolve ``key=`` as documented above: argument, ``$TETHER_STREAM_KEY``, key file.

    Raises:
        ConfigError: if the key is too short or the key file cannot be read.
    """
    return _keys.resolve(
        key,
        StreamKey,
        env=ENV_KEY,
        env_file=ENV_KEY_FILE,
        default_file=default_key_file(),
        instead=(
            f'set ${ENV_KEY} or ${ENV_KEY_FILE}, or pass key=False to run without signed events'
        ),
    )


def default_key_file() -> Path:
    """The user's stream key file: ``$XDG_CONFIG_HOME/tether/stream.key``.

    ``$XDG_CONFIG_HOME`` defaults to ``~/.config`` (as the XDG base directory
    specification says, a relative value is ignored).
    """
    return _keyfile.config_dir() / 'stream.key'


def shim_namespace(shim: object) -> str:
    """The namespace of the stream a shim reads or writes: its ``namespace`` attribute.

    A shim whose broker names are the topic names (most) has none: ``''``. One that
    adds to them (a Redis queue's key prefix, a RabbitMQ virtual host) says so in a
    ``namespace`` attribute, the same on its publisher and its subscribers.

    Raises:
        ConfigError: the attribute is not a string.
    """
    namespace = getattr(shim, 'namespace', '')
    if not isinstance(namespace, str):
        raise ConfigError(
            f'{type(shim).__name__}.namespace must be a string, not {type(namespace).__name__}',
        )
    return namespace


class Signer:
    """Seals a producer's messages: an ``auth`` section and a trailing MAC.

    Args:
        key: The stream key.
        namespace: The namespace of the stream the messages are sent to.
    """

    def __init__(self, key: StreamKey, *, namespace: str = '') -> None:
        self.key = key
        self.namespace = namespace
        self._lock = threading.Lock()
        self._sequencer = Sequencer(16)

    def auth(self, topic: str) -> dict[str, Any]:
        """The ``auth`` section of the next message to ``topic``."""
        with self._lock:
            seq = self._sequencer.next(topic)  # a forked child is another producer
            return {
                'kid': self.key.kid,
                'producer': self._sequencer.sender,
                'ns': self.namespace,
                'topic': topic,
                'seq': seq,
                'time': time.time(),
            }

    def seal(self, body: bytes) -> bytes:
        """Append the MAC of ``body`` (a JSON object) as its last field."""
        if not body.endswith(b'}'):
            raise ValueError('can only seal a JSON object')
        return body[:-1] + _MAC_HEAD + self.key.mac(body).encode() + b'"}'


class Verifier:
    """Checks a consumer's messages: MAC first, then freshness and replays.

    Args:
        key: The stream key.
        namespace: The namespace of the stream read: a message signed for another one
            is refused.
        max_age: Oldest message accepted, in seconds (None: no limit).
        max_skew: How far in the future a message's time may be, in seconds.
        window: Sequence numbers accepted below the highest seen per producer and topic.
        max_streams: Producer-topic pairs remembered (least recently used forgotten).
    """

    def __init__(
        self,
        key: StreamKey,
        *,
        namespace: str = '',
        max_age: float | None = 3600.0,
        max_skew: float = 300.0,
        window: int = 4096,
        max_streams: int = 10_000,
    ) -> None:
        if window < 1 or max_streams < 1:
            raise ValueError('window and max_streams must be at least 1')
        self._window = ReplayWindow(window, max_streams)
        self.key = key
        self.namespace = namespace
        self.max_age = max_age
        self.max_skew = max_skew
        self.window = window
        self.max_streams = max_streams
        self._lock = threading.Lock()

    def open(self, message: bytes) -> bytes:
        """Return the signed body of ``message`` after checking its MAC.

        Raises:
            EventAuthenticationError: if it is unsigned, altered or signed with another key.
        """
        match = _MAC_TAIL.search(message[-(len(_MAC_HEAD) + _MAC_LEN + 8) :])
        if match is None:
            raise EventAuthenticationError(
                'refused an unsigned stream message: this consumer has a stream key, so '
                'every message must be signed by a producer with the same key',
            )
        cut = len(message) - len(match.group(0))
        body = message[:cut] + b'}'
        if not hmac.compare_digest(self.key.mac(body), match.group(1).decode()):
            raise EventAuthenticationError(
                f'refused a stream message whose MAC does not match: it was altered, or '
                f'signed with another key ({_claimed_kid(body)}; this consumer uses '
                f'{self.key.kid!r})',
            )
        return body

    def check(self, auth: Any, topics: set[str], now: float | None = None) -> None:
        """Check the ``auth`` section of a message whose MAC was verified.

        Raises:
            EventAuthenticationError: if the section is malformed or names other topics.
            EventReplayError: if the message was signed for another stream (namespace), was
                seen, or is too old or in the future.
        """
        if not isinstance(auth, dict):
            raise EventAuthenticationError('a signed stream message has no "auth" object')
        fields = _keys.header_fields(auth, ('producer', 'ns', 'topic'))
        if fields is None:
            raise EventAuthenticationError(
                f'malformed "auth" object in a stream message: {auth!r:.100}',
            )
        producer, namespace, topic, seq, sent = fields
        if topics - {topic}:
            raise EventAuthenticationError(
                f'a message signed for topic {topic!r} carries events of {sorted(topics)}',
            )
        if namespace != self.namespace:
            raise EventReplayError(
                f'refused a stream message signed for namespace {namespace!r} (topic '
                f'{topic!r}): this consumer reads namespace {self.namespace!r}. It was copied '
                'from another stream whose topic has the same name (another key prefix, '
                'virtual host or namespace=), or producer and consumer disagree on the '
                'namespace: give both the same prefix or namespace=',
            )
        now = time.time() if now is None else now
        if self.max_age is not None and now - sent > self.max_age:
            raise EventReplayError(
                f'refused a stream message sent {now - sent:.0f} s ago (max_age={self.max_age} '
                f's): producer {producer[:8]}, topic {topic!r}, seq {seq}',
            )
        if sent - now > self.max_skew:
            raise EventReplayError(
                f'refused a stream message dated {sent - now:.0f} s in the future (max_skew='
                f'{self.max_skew} s): check the clocks of producer and consumer',
            )
        self._once(producer, topic, seq)

    def _once(self, producer: str, topic: str, seq: int) -> None:
        with self._lock:
            if not self._window.accept(producer, topic, seq):
                raise EventReplayError(
                    f'refused a replayed stream message: producer {producer[:8]}, topic '
                    f'{topic!r}, seq {seq} was already accepted (or is more than '
                    f'{self.window} behind the newest)',
                )


def _claimed_kid(body: bytes) -> str:
    """The key id an unverified body claims, for error messages only."""
    try:
        kid = json.loads(body).get('auth', {}).get('kid') if len(body) < 1 << 20 else None
    except (ValueError, AttributeError):
        kid = None
    if isinstance(kid, str):
        return f'it claims key id {kid[:32]!r}'
    return 'it names no key id'
