"""Forged stream events: a message names code, a host, a file or a directory.

Whoever can publish to a topic (a broker, anyone on an unauthenticated broker) writes
these. None of them may make the consumer import, call, connect to, create or delete
anything: each is refused with a ``tether.exceptions`` error, and the consumer stays
usable for the next message.

These consumers run without a stream key (``key=False``), in the unsigned modes (pinned,
open), where the checks below are all that stands; with a key (the default: the user's
key file) a forged message is refused as unsigned before any of them.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.security._stream_forge import (
    end_message,
    event_message,
    make_tattletale,
    queue_of,
    store_dict,
)
from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.connectors.redis import RedisConnector
from tether.exceptions import (
    ConnectorError,
    EventDecodeError,
    EventRefusedError,
    StreamError,
    UntrustedStoreError,
)
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream.hooks import MetadataFilter
from tether.stream.shims.queue import QueuePublisher, QueueSubscriber

LOCAL = 'tether.connectors.local.LocalConnector'
REDIS = 'tether.connectors.redis.RedisConnector'
FILE = 'tether.connectors.file.FileConnector'


def _use(consumer: StreamConsumer) -> Any:
    """What a consumer does with an item: take it and use it."""
    proxy = consumer.next()
    return repr(proxy), str(proxy)


# Code named by the key -----------------------------------------------------------------


@pytest.mark.parametrize('callable_path', ['os.system', 'builtins.exec', 'subprocess.getoutput'])
def test_key_type_naming_a_function_is_not_called(callable_path: str, tmp_path: Path) -> None:
    marker = tmp_path / 'pwned'
    command = f'open({str(marker)!r}, "w")' if 'exec' in callable_path else f'touch {marker}'
    store = Store('victim', LocalConnector(), register=True)
    message = event_message(
        store.config().model_dump(), {'type': callable_path, 'fields': [command]}
    )
    consumer = StreamConsumer(queue_of(message), key=False, timeout=1)
    with pytest.raises(EventRefusedError, match='not an allowlisted key type'):
        _use(consumer)
    assert not marker.exists()


def test_key_type_naming_a_module_does_not_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tattle = make_tattletale(tmp_path, monkeypatch)
    store = Store('victim', LocalConnector(), register=True)
    message = event_message(
        store.config().model_dump(), {'type': tattle.key_type, 'fields': ['x']}
    )
    with pytest.raises(EventRefusedError):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))
    assert not tattle.imported


@pytest.mark.parametrize('accept_unknown_stores', [None, True])
@pytest.mark.parametrize('field', ['connector_type', 'serializer', 'deserializer', 'multi'])
def test_store_config_naming_a_module_does_not_import_it(
    field: str,
    accept_unknown_stores: bool | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tattle = make_tattletale(tmp_path, monkeypatch)
    store = store_dict('forged', LOCAL, store_id='x')
    if field == 'connector_type':
        store['connector_type'] = tattle.connector_type
    elif field == 'multi':
        store['connector_type'] = 'tether.connectors.multi.MultiConnector'
        spec = {'type': tattle.connector_type, 'config': {}, 'policy': {}}
        store['connector_config'] = {'connectors': {'evil': spec}}
    else:
        store[field] = tattle.function
    message = event_message(store, {'type': 'tether.connectors.local.LocalKey', 'fields': ['k']})
    options: dict[str, Any] = (
        {} if accept_unknown_stores is None else {'accept_unknown_stores': True}
    )
    consumer = StreamConsumer(queue_of(message), key=False, timeout=1, **options)
    expected = EventRefusedError if accept_unknown_stores else UntrustedStoreError
    with pytest.raises(expected):
        _use(consumer)
    assert not tattle.imported


def test_deserializer_eval_is_refused_even_when_accepting_unknown_stores() -> None:
    store = Store('honest', LocalConnector(), register=True)
    key = store.put('1 + 1')
    config = store.config().model_dump() | {'name': 'forged', 'deserializer': 'builtins.eval'}
    message = event_message(
        config, {'type': 'tether.connectors.local.LocalKey', 'fields': [key.id]}
    )
    with pytest.raises(EventRefusedError, match=r"'builtins\.eval' is not an allowlisted"):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1, accept_unknown_stores=True))


# A host the attacker chooses -----------------------------------------------------------


class _Listener:
    """A TCP port that records whether anyone connected (the attacker's 'Redis')."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self.sock.close()


def test_store_config_pointing_at_another_host_is_refused() -> None:
    Store('frames', LocalConnector(), register=True)  # the consumer's own
    listener = _Listener()
    try:
        forged = store_dict(
            'elsewhere', REDIS, hostname='127.0.0.1', port=listener.port, retries=0
        )
        message = event_message(
            forged, {'type': 'tether.connectors.redis.RedisKey', 'fields': ['k']}
        )
        consumer = StreamConsumer(queue_of(message), key=False, timeout=1)
        with pytest.raises(UntrustedStoreError, match="store 'elsewhere'"):
            _use(consumer)
    finally:
        listener.close()
    assert listener.connections == 0


class _Payload:
    """What the attacker's Redis holds: unpickling it runs a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f'touch {self.marker}',))


def test_attackers_redis_with_a_pickled_payload_is_never_read(
    redis_client: Any, unique_prefix: str, tmp_path: Path
) -> None:
    marker = tmp_path / 'pwned'
    # The attacker's Redis (here: the shared one, under a prefix of the attacker's).
    attacker = Store('evil', RedisConnector('127.0.0.1', 6379, prefix=f'{unique_prefix}evil:'))
    key = attacker.put(_Payload(marker))
    forged = attacker.config().model_dump()
    attacker.close()
    mine = Store(
        'frames', RedisConnector('127.0.0.1', 6379, prefix=f'{unique_prefix}mine:'), register=True
    )
    try:
        message = event_message(
            forged, {'type': 'tether.connectors.redis.RedisKey', 'fields': list(key)}
        )
        consumer = StreamConsumer(queue_of(message), key=False, timeout=1)
        with pytest.raises(UntrustedStoreError):
            _use(consumer)
        assert not marker.exists()
    finally:
        mine.close()
        for k in redis_client.scan_iter(match=f'{unique_prefix}*'):
            redis_client.delete(k)


# Files and directories ------------------------------------------------------------------


def test_filtered_item_with_evict_cannot_delete_a_file_elsewhere(tmp_path: Path) -> None:
    Store('files', FileConnector(tmp_path / 'store'), register=True)  # the consumer's own
    victim = tmp_path / 'victim'
    victim.mkdir()
    precious = victim / 'precious'
    precious.write_text('keep me')
    forged = store_dict('victim-files', FILE, store_dir=str(victim))
    message = event_message(
        forged,
        {'type': 'tether.connectors.file.FileKey', 'fields': ['precious']},
        metadata={'kind': 'dropped'},
        evict=True,
    )
    consumer = StreamConsumer(
        queue_of(message), filter_=MetadataFilter(kind='kept'), key=False, timeout=1
    )
    with pytest.raises(UntrustedStoreError):
        consumer.next()
    assert precious.read_text() == 'keep me'


def test_evict_with_a_path_in_the_key_stays_in_the_store_directory(tmp_path: Path) -> None:
    mine = Store('files', FileConnector(tmp_path / 'store'), register=True)
    precious = tmp_path / 'precious'
    precious.write_text('keep me')
    message = event_message(
        mine.config().model_dump(),
        {'type': 'tether.connectors.file.FileKey', 'fields': ['../precious']},
        metadata={'kind': 'dropped'},
        evict=True,
    )
    consumer = StreamConsumer(
        queue_of(message), filter_=MetadataFilter(kind='kept'), key=False, timeout=1
    )
    with pytest.raises(ConnectorError, match='invalid file key'):
        consumer.next()
    assert precious.read_text() == 'keep me'


def test_store_config_cannot_create_directories(tmp_path: Path) -> None:
    target = tmp_path / 'made' / 'by' / 'attacker'
    forged = store_dict('files', FILE, store_dir=str(target))
    message = event_message(forged, {'type': 'tether.connectors.file.FileKey', 'fields': ['k']})
    with pytest.raises(UntrustedStoreError):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))
    assert not (tmp_path / 'made').exists()


# Which stores are accepted -------------------------------------------------------------


def test_store_registered_under_the_same_name_but_another_config_is_not_used(
    tmp_path: Path,
) -> None:
    Store('frames', FileConnector(tmp_path / 'mine'), register=True)
    forged = store_dict('frames', FILE, store_dir=str(tmp_path / 'theirs'))
    message = event_message(forged, {'type': 'tether.connectors.file.FileKey', 'fields': ['k']})
    with pytest.raises(UntrustedStoreError, match='identical config'):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))
    assert not (tmp_path / 'theirs').exists()


def test_key_of_another_connector_type_is_refused() -> None:
    store = Store('frames', LocalConnector(), register=True)
    message = event_message(
        store.config().model_dump(),
        {'type': 'tether.connectors.file.FileKey', 'fields': ['k']},
    )
    with pytest.raises(EventRefusedError, match=r'is not a tether\.connectors\.local\.LocalKey'):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))


def test_given_and_registered_stores_are_accepted() -> None:
    given = Store('given', LocalConnector())
    registered = Store('registered', LocalConnector(), register=True)
    q: Any = __import__('queue').Queue()
    with StreamProducer(QueuePublisher({'a': q, 'b': q}), {'a': given, 'b': registered}) as p:
        p.send('a', 'from given')
        p.send('b', 'from registered')
    consumer = StreamConsumer(
        QueueSubscriber(q, 'a'), stores=[given], end_events=2, key=False, timeout=1
    )
    assert list(consumer.iter_objects()) == ['from given', 'from registered']


def test_unknown_allowlisted_store_is_rebuilt_only_when_asked(tmp_path: Path) -> None:
    store = Store('elsewhere', FileConnector(tmp_path / 'd'))
    key = store.put('value')
    config = store.config().model_dump()
    store.close()  # this process no longer knows it
    message = event_message(
        config, {'type': 'tether.connectors.file.FileKey', 'fields': list(key)}
    )
    with pytest.raises(UntrustedStoreError):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))
    consumer = StreamConsumer(queue_of(message), key=False, timeout=1, accept_unknown_stores=True)
    assert consumer.next() == 'value'


def test_consumer_stays_usable_after_a_refusal_and_can_skip() -> None:
    store = Store('good', LocalConnector(), register=True)
    forged = event_message(store.config().model_dump(), {'type': 'os.system', 'fields': ['true']})
    q: Any = __import__('queue').Queue()
    q.put(forged)
    q.put(b'\x80\x04garbage')
    with StreamProducer(QueuePublisher({'t': q}), store) as producer:
        producer.send('t', 'good item')
    consumer = StreamConsumer(QueueSubscriber(q, 't'), key=False, timeout=1)
    with pytest.raises(EventRefusedError):
        consumer.next()
    with pytest.raises(EventDecodeError):
        consumer.next()
    assert consumer.next() == 'good item'
    with pytest.raises(StopIteration):
        consumer.next()

    q.put(forged)
    q.put(b'\x80\x04garbage')
    q.put(end_message())
    skipping = StreamConsumer(QueueSubscriber(q, 't'), key=False, timeout=1, skip_invalid=True)
    assert list(skipping) == []


def test_refusals_are_stream_errors() -> None:
    assert issubclass(UntrustedStoreError, EventRefusedError)
    assert issubclass(EventRefusedError, EventDecodeError)
    assert issubclass(EventDecodeError, StreamError)


def test_key_shape_is_checked_before_the_class_is_called() -> None:
    store = Store('good', LocalConnector(), register=True)
    message = event_message(
        store.config().model_dump(),
        {'type': 'tether.connectors.local.LocalKey', 'fields': ['a', 'b', 'c']},
    )
    with pytest.raises(EventDecodeError, match='has 1 fields'):
        _use(StreamConsumer(queue_of(message), key=False, timeout=1))


def test_refusal_does_not_repeat_secret_looking_values() -> None:
    forged = store_dict('elsewhere', REDIS, hostname='10.0.0.1', password='hunter2-secret')
    message = event_message(forged, {'type': 'tether.connectors.redis.RedisKey', 'fields': ['k']})
    with pytest.raises(UntrustedStoreError) as info:
        StreamConsumer(queue_of(message), key=False, timeout=1).next()
    assert 'hunter2' not in str(info.value)
    assert '10.0.0.1' in str(info.value)
