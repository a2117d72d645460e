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
  gives it, so a consumer rebuilds the store with no configuration of its own.
* ``key`` is the connector key (a :class:`~typing.NamedTuple`): the import path of its
  class and its fields in order. Fields must be JSON values (str, int, float, bool, null,
  lists and dicts of them).
* ``metadata`` is the user's metadata: a JSON object.
* ``evict`` tells the consumer's proxy to evict the object once resolved.
* A message carries one event or, with batching, several (in the order sent).

:func:`decode` raises :class:`~tether.exceptions.EventDecodeError` on anything else:
bytes that are not UTF-8 JSON, another ``format``, an unknown ``version``, an unknown
event ``type``, or missing and ill-typed fields.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tether.exceptions import EventDecodeError, StreamError
from tether.store.config import StoreConfig, import_from_path, path_of

__all__ = [
    'EndOfStreamEvent',
    'Event',
    'FORMAT',
    'NewObjectEvent',
    'VERSION',
    'check_metadata',
    'decode',
    'decode_key',
    'encode',
    'encode_key',
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


@dataclasses.dataclass(frozen=True)
class EndOfStreamEvent:
    """The producer closed the topic: no more objects follow from it."""

    topic: str
    type: Literal['end_of_stream'] = 'end_of_stream'


Event = NewObjectEvent | EndOfStreamEvent


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


def encode_key(key: Any) -> dict[str, Any]:
    """Encode a connector key (a NamedTuple) as ``{"type": path, "fields": [...]}``."""
    if not (isinstance(key, tuple) and hasattr(key, '_fields')):
        raise StreamError(f'connector key {key!r} is not a NamedTuple; cannot put it in an event')
    fields = list(key)
    try:
        json.dumps(fields)
    except (TypeError, ValueError) as e:
        raise StreamError(f'connector key {key!r} has fields that are not JSON values') from e
    return {'type': path_of(type(key)), 'fields': fields}


def decode_key(data: Any) -> Any:
    """Rebuild a connector key from :func:`encode_key`'s output."""
    if (
        not isinstance(data, dict)
        or not isinstance(data.get('type'), str)
        or not isinstance(data.get('fields'), list)
    ):
        raise EventDecodeError(f'bad key in stream event: {data!r}')
    try:
        cls = import_from_path(data['type'])
        return cls(*data['fields'])
    except Exception as e:
        raise EventDecodeError(f'cannot rebuild key {data!r} of a stream event: {e}') from e


def _event_dict(event: Event) -> dict[str, Any]:
    if isinstance(event, EndOfStreamEvent):
        return {'type': event.type, 'topic': event.topic}
    return {
        'type': event.type,
        'topic': event.topic,
        'store': event.store_config,
        'key': encode_key(event.key),
        'metadata': event.metadata,
        'evict': event.evict,
    }


def encode(events: Sequence[Event]) -> bytes:
    """Encode one or more events as one broker message."""
    doc = {'format': FORMAT, 'version': VERSION, 'events': [_event_dict(e) for e in events]}
    return json.dumps(doc, separators=(',', ':')).encode()


def _field(d: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in d:
        raise EventDecodeError(f'stream event {d!r} has no {name!r} field')
    value = d[name]
    if not isinstance(value, kind):
        raise EventDecodeError(f'field {name!r} of stream event {d!r} has the wrong type')
    return value


def _decode_event(d: Any) -> Event:
    if not isinstance(d, dict):
        raise EventDecodeError(f'stream event {d!r} is not a JSON object')
    kind = _field(d, 'type', str)
    topic = _field(d, 'topic', str)
    if kind == 'end_of_stream':
        return EndOfStreamEvent(topic)
    if kind == 'new_object':
        store = _field(d, 'store', dict)
        try:
            StoreConfig.model_validate(store)
        except Exception as e:
            raise EventDecodeError(f'bad store config in stream event: {e}') from e
        return NewObjectEvent(
            topic=topic,
            store_config=store,
            key=decode_key(_field(d, 'key', dict)),
            metadata=_field(d, 'metadata', dict),
            evict=_field(d, 'evict', bool),
        )
    raise EventDecodeError(
        f'unknown stream event type {kind!r} (this tether knows new_object, end_of_stream)'
    )


def decode(message: bytes | bytearray | memoryview | str) -> list[Event]:
    """Decode a broker message into its events.

    Raises:
        EventDecodeError: if the message is not a stream message of a known version.
    """
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
    return [_decode_event(e) for e in events]
