"""The event format: JSON, versioned, self-describing; garbage gives clear errors."""

from __future__ import annotations

import json

import pytest

from tether.connectors.redis import RedisKey
from tether.exceptions import EventDecodeError, StreamError
from tether.store import Store
from tether.stream import events as ev


def _event() -> ev.NewObjectEvent:
    config = Store('ev-store').config().model_dump()
    return ev.NewObjectEvent('t', config, RedisKey('tether:abc'), {'step': 3}, True)


def test_roundtrip_and_is_plain_json() -> None:
    events: list[ev.Event] = [_event(), ev.EndOfStreamEvent('t')]
    message = ev.encode(events)
    doc = json.loads(message)
    assert doc['format'] == 'tether.stream'
    assert doc['version'] == ev.VERSION
    assert doc['events'][0]['key'] == {
        'type': 'tether.connectors.redis.RedisKey',
        'fields': ['tether:abc'],
    }
    assert ev.decode(message) == events
    first = ev.decode(message)[0]
    assert isinstance(first, ev.NewObjectEvent)
    assert isinstance(first.key, RedisKey)


def _doc(**changes: object) -> bytes:
    doc = json.loads(ev.encode([_event()]))
    doc.update(changes)
    return json.dumps(doc).encode()


def _with_event(**changes: object) -> bytes:
    doc = json.loads(ev.encode([_event()]))
    doc['events'][0].update(changes)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ('message', 'match'),
    [
        (b'\x80\x04\x95pickle', 'not UTF-8 JSON'),
        (b'{"hello": 1}', 'format must be'),
        (b'[1, 2]', 'format must be'),
        (_doc(version=99), 'version 99 is not supported'),
        (_doc(events='x'), 'no "events" list'),
        (_with_event(type='new_thing'), "unknown stream event type 'new_thing'"),
        (_with_event(evict='yes'), "field 'evict'"),
        (_with_event(metadata=[1]), "field 'metadata'"),
        (_with_event(key={'type': 'no.such.Key', 'fields': []}), 'not an allowlisted key'),
        (_with_event(key={'type': 'tether.connectors.redis.RedisKey', 'fields': []}), '1 fields'),
        (_with_event(key='k'), "field 'key'"),
        (_with_event(store={'name': 'x'}), 'bad store config'),
    ],
)
def test_garbage_is_refused_clearly(message: bytes, match: str) -> None:
    with pytest.raises(EventDecodeError, match=match):
        ev.decode(message)


def test_missing_field() -> None:
    doc = json.loads(ev.encode([_event()]))
    del doc['events'][0]['topic']
    with pytest.raises(EventDecodeError, match="no 'topic' field"):
        ev.decode(json.dumps(doc))


@pytest.mark.parametrize('bad', [{'a': object()}, {'a': float('nan')}, {1: 'x'}, ['x']])
def test_metadata_must_be_json(bad: object) -> None:
    with pytest.raises(StreamError, match='metadata'):
        ev.check_metadata(bad)  # type: ignore[arg-type]


def test_key_must_be_a_namedtuple_of_json_values() -> None:
    with pytest.raises(StreamError, match='not a NamedTuple'):
        ev.encode_key(('a', 'b'))
    with pytest.raises(StreamError, match='not JSON values'):
        ev.encode_key(RedisKey(b'bytes'))  # type: ignore[arg-type]


def test_nested_keys_round_trip() -> None:
    from tether.connectors.local import LocalKey
    from tether.connectors.multi import MultiKey

    key = MultiKey('fast', LocalKey('abc'))
    encoded = ev.encode_key(key)
    assert encoded['fields'][1] == {'type': 'tether.connectors.local.LocalKey', 'fields': ['abc']}
    decoded = ev.decode_key(json.loads(json.dumps(encoded)))
    assert decoded == key
    assert isinstance(decoded.connector_key, LocalKey)


def test_key_fields_that_look_like_keys_are_refused() -> None:
    from tether.connectors.multi import MultiKey

    with pytest.raises(StreamError, match='looks like an encoded key'):
        ev.encode_key(MultiKey('a', {'type': 'x', 'fields': []}))


def test_stream_through_a_multi_connector_store() -> None:
    import queue

    from tether.connectors.local import LocalConnector
    from tether.connectors.multi import MultiConnector, Policy
    from tether.stream import StreamConsumer, StreamProducer
    from tether.stream.shims.queue import QueuePublisher, QueueSubscriber

    multi = MultiConnector({'fast': (LocalConnector(), Policy())})
    store = Store('multi-stream', multi, register=True)
    q: queue.Queue[bytes] = queue.Queue()
    with StreamProducer(QueuePublisher({'t': q}), store) as producer:
        producer.send('t', [1, 2, 3])
    assert list(StreamConsumer(QueueSubscriber(q, 't'), timeout=5).iter_objects()) == [[1, 2, 3]]
    store.close()
