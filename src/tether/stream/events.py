"""The stream event format: what travels through the broker.

A broker message is one UTF-8 JSON document (never pickle), self-describing and
versioned::

    {
      "format": "tether.stream",
      "version": 1,
      "events": [
        {
          "type": "new_object",
          "topic": "sim-frames",
          "store": {"name": "...", "connector_type": "...", "connector_config": {...}},
          "key": {"type": "tether.connectors.redis.RedisKey", "fields": ["tether:ab12"]},
          "metadata": {"step": 3},
          "evict": true
        },
        {"type": "end_of_stream", "topic": "sim-frames"}
      ]
    }

* ``store`` is the store's :class:`~tether.store.StoreConfig` as ``model_dump()``
  gives it. A consumer uses it to find the store among those it accepts (see
  :class:`~tether.stream.StreamConsumer`: by default the stores it was given or has
  registered with an identical config).
* ``key`` is the connector key (a :class:`~typing.NamedTuple`): the import path of its
  class and its fields in order. Fields must be JSON values (str, int, float, bool, null,
  lists and dicts of them) or keys themselves (a ``MultiKey`` holds its connector's key),
  encoded the same way. Only allowlisted key classes are rebuilt
  (:mod:`tether.store.allowlist`); nothing else a message names is imported or called.
* ``metadata`` is the user's metadata: a JSON object.
* ``evict`` tells the consumer's proxy to evict the object once resolved.
* A message carries one event or, with batching, several (in the order sent), all of
  one topic.
* A signed message (see :mod:`tether.stream.auth`) adds an ``auth`` object and ends
  with a ``mac`` field.

:func:`decode` raises :class:`~tether.exceptions.EventDecodeError` on anything else:
bytes that are not UTF-8 JSON, another ``format``, an unknown ``version``, an unknown
event ``type``, or missing and ill-typed fields; its subclass
:class:`~tether.exceptions.EventRefusedError` for a key type that is not allowlisted,
and :class:`~tether.exceptions.EventAuthenticationError` (with a verifier) for
unsigned, altered or replayed messages.

Events are JSON, never pickle: decoding one runs no code it names. That does not make a
message harmless: it still names a store (a host, a directory) and a key. What a
consumer does with them, and what to configure, is in ``docs/security.md``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tether.exceptions import (
    EventDecodeError,
    EventRefusedError,
    StreamError,
    UntrustedTypeError,
)
from tether.store import allowlist
from tether.store.config import StoreConfig, path_of

if TYPE_CHECKING:
    from tether.stream.auth import Signer, Verifier

__all__ = [
    'EndOfStreamEvent',
    'Event',
    'EventBatch',
    'FORMAT',
    'InlineObjectEvent',
    'NewObjectEvent',
    'NewObjectKeyEvent',
    'VERSION',
    'bytes_to_event',
    'check_metadata',
    'decode',
    'decode_key',
    'dict_to_event',
    'encode',
    'encode_key',
    'event_to_bytes',
    'event_to_dict',
]

FORMAT = 'tether.stream'
VERSION = 1


@dataclasses.dataclass(frozen=True)
class NewObjectEvent:
    """An object was put in a store and is ready to be consumed.

    Attributes:
        topic: The topic it was sent to.
        store_config: The config of the store that holds it (``model_dump()`` form).
        key: The connector key of the object.
        metadata: The user's metadata.
        evict: Whether the consumer's proxy evicts the object once resolved.
    """

    topic: str
    store_config: dict[str, Any]
    key: Any
    metadata: dict[str, Any]
    evict: bool
    type: Literal['new_object'] = 'new_object'

    @classmethod
    def from_key(
        cls,
        key: Any,
        *,
        evict: bool,
        metadata: dict[str, Any],
        store_config: Any,
        topic: str,
    ) -> NewObjectEvent:
        """ProxyStore's constructor: ``store_config`` may be a ``StoreConfig`` or its dict."""
        dump = getattr(store_config, 'model_dump', None)
        config = dump() if dump is not None else dict(store_config)
        return cls(topic, config, key, metadata, evict)

    def get_key(self) -> Any:
        """The connector key of the object (ProxyStore's accessor for :attr:`key`)."""
        return self.key


@dataclasses.dataclass(frozen=True)
class EndOfStreamEvent:
    """The producer closed the topic: no more objects follow from it."""

    topic: str
    type: Literal['end_of_stream'] = 'end_of_stream'


@dataclasses.dataclass(frozen=True)
class InlineObjectEvent:
    """An object sent inside the event (its topic is mapped to no store).

    Decoding the object runs the deserializer (pickle) on bytes from the broker, so a
    consumer accepts these events only when told to (``accept_inline=True``) or when
    messages are signed with a stream key (see :class:`~tether.stream.StreamConsumer`).

    Attributes:
        topic: The topic it was sent to.
        data: The object, serialized with :func:`tether.serialize.serialize`.
        metadata: The user's metadata.
    """

    topic: str
    data: bytes
    metadata: dict[str, Any]
    type: Literal['inline_object'] = 'inline_object'


Event = NewObjectEvent | EndOfStreamEvent | InlineObjectEvent


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return ``metadata`` as a dict after checking it survives JSON unchanged in kind.

    Raises:
        StreamError: if it is not a mapping with string keys and JSON values.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise StreamError(f'stream metadata must be a dict, not {type(metadata).__name__}')
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StreamError(
            f'stream metadata must be JSON-serializable (str keys; str, int, float, bool, '
            f'None, lists and dicts): {e}',
        ) from e
    if not all(isinstance(k, str) for k in metadata):
        raise StreamError('stream metadata keys must be strings')
    return dict(metadata)


_MAX_KEY_DEPTH = 4


def _is_key(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, '_fields')


def _encode_field(value: Any, depth: int) -> Any:
    if _is_key(value):
        return encode_key(value, _depth=depth + 1)
    if isinstance(value, dict) and set(value) == {'type', 'fields'}:
        raise StreamError(
            f'key field {value!r} looks like an encoded key; it would not round-trip'
        )
    return value


def encode_key(key: Any, *, _depth: int = 0) -> dict[str, Any]:
    """Encode a connector key (a NamedTuple) as ``{"type": path, "fields": [...]}``.

    Fields that are keys themselves are encoded the same way.
    """
    if not _is_key(key):
        raise StreamError(f'connector key {key!r} is not a NamedTuple; cannot put it in an event')
    if _depth > _MAX_KEY_DEPTH:
        raise StreamError(f'connector key {key!r} nests keys more than {_MAX_KEY_DEPTH} deep')
    fields = [_encode_field(v, _depth) for v in key]
    try:
        json.dumps(fields)
    except (TypeError, ValueError) as e:
        raise StreamError(f'connector key {key!r} has fields that are not JSON values') from e
    return {'type': path_of(type(key)), 'fields': fields}


def _decode_field(value: Any, depth: int) -> Any:
    if isinstance(value, dict) and set(value) == {'type', 'fields'}:
        return decode_key(value, _depth=depth + 1)
    return value


def decode_key(data: Any, *, _depth: int = 0) -> Any:
    """Rebuild a connector key from :func:`encode_key`'s output.

    Only key classes on the allowlist (:mod:`tether.store.allowlist`) are rebuilt; the
    class is called with the fields only after its path was found there.

    Raises:
        EventDecodeError: if ``data`` is not an encoded key, or does not fit its class.
        EventRefusedError: if its class is not an allowlisted key type.
    """
    if (
        not isinstance(data, dict)
        or not isinstance(data.get('type'), str)
        or not isinstance(data.get('fields'), list)
    ):
        raise EventDecodeError(f'bad key in stream event: {str(data)[:200]}')
    if _depth > _MAX_KEY_DEPTH:
        raise EventDecodeError(f'key in stream event nests more than {_MAX_KEY_DEPTH} deep')
    try:
        cls = allowlist.resolve('key', data['type'])
    except UntrustedTypeError as e:
        raise EventRefusedError(f'refused a stream event: {e}') from e
    fields = [_decode_field(v, _depth) for v in data['fields']]
    if len(fields) != len(cls._fields):
        raise EventDecodeError(
            f'key {data["type"]} has {len(cls._fields)} fields, the stream event gives '
            f'{len(fields)}: {str(fields)[:200]}',
        )
    return cls(*fields)


def _event_dict(event: Event) -> dict[str, Any]:
    if isinstance(event, EndOfStreamEvent):
        return {'type': event.type, 'topic': event.topic}
    if isinstance(event, InlineObjectEvent):
        return {
            'type': event.type,
            'topic': event.topic,
            'data': base64.b64encode(event.data).decode('ascii'),
            'metadata': event.metadata,
        }
    return {
        'type': event.type,
        'topic': event.topic,
        'store': event.store_config,
        'key': encode_key(event.key),
        'metadata': event.metadata,
        'evict': event.evict,
    }


def encode(events: Sequence[Event], *, signer: Signer | None = None) -> bytes:
    """Encode one or more events (of one topic, when signed) as one broker message.

    Args:
        events: The events.
        signer: Signs the message (see :mod:`tether.stream.auth`).
    """
    doc: dict[str, Any] = {
        'format': FORMAT,
        'version': VERSION,
        'events': [_event_dict(e) for e in events],
    }
    if signer is not None:
        topics = {e.topic for e in events}
        if len(topics) != 1:
            raise StreamError(f'a signed message carries events of one topic, not {topics}')
        doc['auth'] = signer.auth(topics.pop())
    body = json.dumps(doc, separators=(',', ':'), allow_nan=False).encode()
    return body if signer is None else signer.seal(body)


def _field(d: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in d:
        raise EventDecodeError(f'stream event {d!r} has no {name!r} field')
    value = d[name]
    if not isinstance(value, kind):
        raise EventDecodeError(f'field {name!r} of stream event {d!r} has the wrong type')
    return value


# Store configs already validated (by repr, which tells JSON values apart): a stream
# repeats the same few configs, and validating each costs more than decoding the event.
_valid_stores: dict[str, None] = {}


def _check_store(store: dict[str, Any]) -> None:
    marker = repr(store)
    if marker in _valid_stores:
        return
    try:
        StoreConfig.model_validate(store)
    except Exception as e:
        raise EventDecodeError(f'bad store config in stream event: {e}') from e
    if len(_valid_stores) >= 256:
        _valid_stores.pop(next(iter(_valid_stores)))
    _valid_stores[marker] = None


def _decode_event(d: Any) -> Event:
    if not isinstance(d, dict):
        raise EventDecodeError(f'stream event {d!r} is not a JSON object')
    kind = _field(d, 'type', str)
    topic = _field(d, 'topic', str)
    if kind == 'end_of_stream':
        return EndOfStreamEvent(topic)
    if kind == 'inline_object':
        try:
            data = base64.b64decode(_field(d, 'data', str), validate=True)
        except ValueError as e:
            raise EventDecodeError(f'inline object of stream event is not base64: {e}') from e
        return InlineObjectEvent(topic=topic, data=data, metadata=_field(d, 'metadata', dict))
    if kind == 'new_object':
        store = _field(d, 'store', dict)
        _check_store(store)
        return NewObjectEvent(
            topic=topic,
            store_config=store,
            key=decode_key(_field(d, 'key', dict)),
            metadata=_field(d, 'metadata', dict),
            evict=_field(d, 'evict', bool),
        )
    raise EventDecodeError(
        f'unknown stream event type {kind!r} (this tether knows new_object, inline_object, '
        'end_of_stream)'
    )


def decode(
    message: bytes | bytearray | memoryview | str,
    *,
    verifier: Verifier | None = None,
) -> list[Event]:
    """Decode a broker message into its events.

    Args:
        message: The message.
        verifier: Checks the message's MAC (before parsing it) and replays.

    Raises:
        EventDecodeError: if the message is not a stream message of a known version.
        EventRefusedError: if an event's key type is not allowlisted.
        EventAuthenticationError: with a verifier: unsigned, altered, another key.
        EventReplayError: with a verifier: already seen, too old, or from the future.
    """
    if verifier is not None:
        raw = message.encode() if isinstance(message, str) else bytes(message)
        message = verifier.open(raw)
    try:
        doc = json.loads(bytes(message) if not isinstance(message, str) else message)
    except (UnicodeDecodeError, ValueError) as e:
        preview = bytes(message[:40]) if not isinstance(message, str) else message[:40]
        raise EventDecodeError(
            f'message {preview!r}... is not a tether stream event (not UTF-8 JSON): {e}',
        ) from e
    if not isinstance(doc, dict) or doc.get('format') != FORMAT:
        raise EventDecodeError(
            f'message is not a tether stream event (format must be {FORMAT!r}): {str(doc)[:80]}',
        )
    version = doc.get('version')
    if version != VERSION:
        raise EventDecodeError(
            f'stream event version {version!r} is not supported (this tether reads version '
            f'{VERSION}); upgrade the older side',
        )
    events = doc.get('events')
    if not isinstance(events, list):
        raise EventDecodeError('stream message has no "events" list')
    decoded = [_decode_event(e) for e in events]
    if verifier is not None:
        verifier.check(doc.get('auth'), {e.topic for e in decoded})
    return decoded


# ProxyStore's event batch API --------------------------------------------------------------

NewObjectKeyEvent = NewObjectEvent
"""ProxyStore's name for an event naming an object by store and key (tether's only kind)."""


@dataclasses.dataclass(frozen=True)
class EventBatch:
    """Several events of one topic, sent as one broker message.

    Attributes:
        topic: The topic of every event.
        events: The events, in the order sent.
    """

    topic: str
    events: list[Event]
    type: Literal['event_batch'] = 'event_batch'

    def __post_init__(self) -> None:
        others = {e.topic for e in self.events} - {self.topic}
        if others:
            raise StreamError(
                f'an event batch of topic {self.topic!r} holds events of {sorted(others)}',
            )


def event_to_dict(event: Event | EventBatch) -> dict[str, Any]:
    """Return the JSON form of an event or batch (what :func:`dict_to_event` reads)."""
    if isinstance(event, EventBatch):
        return {
            'type': event.type,
            'topic': event.topic,
            'events': [_event_dict(e) for e in event.events],
        }
    return _event_dict(event)


def dict_to_event(data: dict[str, Any]) -> Event | EventBatch:
    """Rebuild an event or batch from :func:`event_to_dict`'s form, validating it.

    Raises:
        EventDecodeError: if ``data`` is not a valid event.
        EventRefusedError: if it names a key type that is not allowlisted.
    """
    if isinstance(data, dict) and data.get('type') == 'event_batch':
        topic = _field(data, 'topic', str)
        events = [_decode_event(e) for e in _field(data, 'events', list)]
        try:
            return EventBatch(topic, events)
        except StreamError as e:
            raise EventDecodeError(str(e)) from e
    return _decode_event(data)


def event_to_bytes(event: Event | EventBatch) -> bytes:
    """Encode an event or batch as one broker message (see :func:`encode`)."""
    if isinstance(event, EventBatch):
        return encode(event.events)
    return encode([event])


def bytes_to_event(message: bytes | bytearray | memoryview | str) -> Event | EventBatch:
    """Decode a broker message: its event, or an :class:`EventBatch` if it holds several.

    A batch of one event comes back as that event (the message format does not tell
    them apart).

    Raises:
        EventDecodeError: as :func:`decode` does (also for a message with no events).
    """
    events = decode(message)
    if not events:
        raise EventDecodeError('stream message holds no events')
    if len(events) == 1:
        return events[0]
    try:
        return EventBatch(events[0].topic, events)
    except StreamError as e:
        raise EventDecodeError(str(e)) from e
