"""Authenticated stream events: forged, altered and replayed messages over real brokers.

With a stream key, producers sign every message and consumers refuse what is unsigned,
altered, signed with another key, or replayed; the key itself is never serialized.
"""

from __future__ import annotations

import json
import pickle
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_up
from tests.security._stream_forge import end_message, queue_of
from tests.stream._brokers import Broker
from tether.connectors.local import LocalConnector, LocalKey
from tether.exceptions import (
    ConfigError,
    EventAuthenticationError,
    EventDecodeError,
    EventRefusedError,
    EventReplayError,
)
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream import events as ev
from tether.stream.auth import ENV_KEY, ENV_KEY_FILE, Signer, StreamKey, Verifier, resolve_key

KEY = secrets.token_hex(16)
OTHER_KEY = secrets.token_hex(16)
PORTS = {'redis': 6379, 'redis_queue': 6379, 'nats': 4222, 'amqp': 5672}


class Recording:
    """A publisher that keeps a copy of what it sends (what a broker, or a sniffer, sees)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.namespace = getattr(inner, 'namespace', '')  # the stream it writes to
        self.sent: list[bytes] = []

    def send_message(self, topic: str, message: bytes) -> None:
        self.sent.append(bytes(message))
        self.inner.send_message(topic, message)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(params=['queue', 'redis', 'redis_queue', 'nats', 'amqp'])
def broker(request: pytest.FixtureRequest, unique_prefix: str) -> Iterator[Broker]:
    port = PORTS.get(request.param)
    if port is not None and not service_up(port):
        pytest.fail(f'the {request.param} broker is not running: run `make services`')
    b = Broker(request.param, unique_prefix)
    yield b
    b.close()


def _drain(consumer: StreamConsumer) -> list[str]:
    """Every outcome until the end of the stream: an item, or the error's class name."""
    outcomes: list[str] = []
    while True:
        try:
            outcomes.append(consumer.next_object())
        except StopIteration:
            return outcomes
        except EventDecodeError as e:
            outcomes.append(type(e).__name__)


def test_forged_altered_and_replayed_messages_are_refused_over_a_broker(
    broker: Broker, unique_prefix: str
) -> None:
    topic = broker.topic('auth')
    store = Store(f'auth-{unique_prefix}', LocalConnector(), register=True)
    subscriber = broker.subscriber(topic)
    recorder = Recording(broker.publisher())
    attacker = broker.publisher()  # anyone who can publish to the broker
    broker.ready(topic)
    producer = StreamProducer(recorder, {topic: store}, key=KEY)
    assert producer.signed

    producer.send(topic, 'first', metadata={'n': 1})
    genuine = recorder.sent[-1]
    key = ev.decode(genuine)[0].key  # type: ignore[union-attr]
    unsigned = ev.encode([ev.NewObjectEvent(topic, store.config().model_dump(), key, {}, False)])
    attacker.send_message(topic, genuine)  # replayed
    attacker.send_message(topic, genuine.replace(b'"n":1', b'"n":2'))  # altered
    attacker.send_message(topic, unsigned)  # unsigned
    attacker.send_message(topic, end_message(topic))  # an unsigned end of the stream
    other = ev.encode(
        [ev.NewObjectEvent(topic, store.config().model_dump(), key, {}, False)],
        signer=Signer(StreamKey(OTHER_KEY)),
    )
    attacker.send_message(topic, other)  # signed with another key
    producer.send(topic, 'second', metadata={'n': 2})
    producer.close()

    assert recorder.sent  # every message the producer sent is signed
    assert all(m.rstrip().endswith(b'"}') and b',"mac":"' in m for m in recorder.sent)
    assert all(KEY.encode() not in m for m in recorder.sent)
    with StreamConsumer(subscriber, key=KEY, timeout=10) as consumer:
        outcomes = _drain(consumer)
    assert sorted(outcomes) == sorted(
        ['first', 'second', 'EventReplayError'] + ['EventAuthenticationError'] * 4
    )


def test_consumer_without_a_key_still_pins_stores_of_signed_messages() -> None:
    store = Store('signed', LocalConnector(), register=True)
    publisher = Recording(_Sink())
    with StreamProducer(publisher, store, key=KEY) as producer:
        producer.send('t', 'item')
    consumer = StreamConsumer(queue_of(*publisher.sent), key=False, timeout=1)
    assert not consumer.authenticated
    assert not consumer.accept_unknown_stores
    assert list(consumer.iter_objects()) == ['item']


def test_unsigned_producer_to_a_consumer_with_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, KEY)
    store = Store('plain', LocalConnector(), register=True)
    publisher = Recording(_Sink())
    with StreamProducer(publisher, store, key=False) as producer:
        assert not producer.signed
        producer.send('t', 'item')
    consumer = StreamConsumer(queue_of(*publisher.sent), timeout=1)
    assert consumer.authenticated
    with pytest.raises(EventAuthenticationError, match='unsigned'):
        consumer.next()


def test_authenticated_producer_vouches_only_for_allowlisted_types() -> None:
    store = Store('local', LocalConnector())
    key = store.put('x')
    config = store.config().model_dump() | {'deserializer': 'builtins.eval', 'name': 'odd'}
    message = ev.encode(
        [ev.NewObjectEvent('t', config, key, {}, False)], signer=Signer(StreamKey(KEY))
    )
    consumer = StreamConsumer(queue_of(message), key=KEY, timeout=1)
    assert consumer.accept_unknown_stores
    with pytest.raises(EventRefusedError, match=r'builtins\.eval'):
        consumer.next()


class _Sink:
    def send_message(self, topic: str, message: bytes) -> None:
        pass

    def close(self) -> None:
        pass


# The MAC ---------------------------------------------------------------------------------


def _signed(key: str = KEY, topic: str = 't', signer: Signer | None = None) -> bytes:
    event = ev.NewObjectEvent(topic, Store('s').config().model_dump(), LocalKey('k'), {}, True)
    return ev.encode([event], signer=signer or Signer(StreamKey(key)))


@pytest.mark.parametrize(
    'mangle',
    [
        lambda m: m[:-3] + (b'1' if m[-3:-2] == b'0' else b'0') + b'"}',  # the MAC itself
        lambda m: m.replace(b'"evict":true', b'"evict":false'),
        lambda m: m.replace(b'"seq":0', b'"seq":7'),
        lambda m: m + b'{}',  # something after the MAC
        lambda m: m.replace(b',"mac":"', b',"mac" :"'),
        lambda m: m[: m.index(b',"mac":"')] + b'}',  # MAC removed
    ],
)
def test_any_change_to_a_signed_message_is_refused(mangle: Any) -> None:
    message = _signed()
    verifier = Verifier(StreamKey(KEY))
    with pytest.raises(EventAuthenticationError):
        ev.decode(mangle(message), verifier=verifier)
    assert ev.decode(message, verifier=verifier)  # the genuine one still passes


def test_another_key_is_named_in_the_error() -> None:
    with pytest.raises(EventAuthenticationError, match='another key') as info:
        ev.decode(_signed(OTHER_KEY), verifier=Verifier(StreamKey(KEY)))
    assert StreamKey(OTHER_KEY).kid in str(info.value)
    assert OTHER_KEY not in str(info.value)


def test_message_signed_for_one_topic_carrying_another() -> None:
    signer = Signer(StreamKey(KEY))
    doc = json.loads(_signed(signer=signer))
    doc['events'][0]['topic'] = 'other'
    del doc['mac']
    body = json.dumps(doc, separators=(',', ':')).encode()
    with pytest.raises(EventAuthenticationError, match="signed for topic 't'"):
        ev.decode(signer.seal(body), verifier=Verifier(StreamKey(KEY)))


# Replays -----------------------------------------------------------------------------------


def _auth(seq: int, sent: float = 1000.0, producer: str = 'p' * 32) -> dict[str, Any]:
    return {'producer': producer, 'ns': '', 'topic': 't', 'seq': seq, 'time': sent}


def test_each_sequence_number_is_accepted_once_within_the_window() -> None:
    v = Verifier(StreamKey(KEY), window=4, max_age=None)
    for seq in (0, 1, 5, 3):  # reordering within the window is fine
        v.check(_auth(seq), {'t'}, now=1000.0)
    for seq in (0, 3, 5, 1):  # 1 is more than 4 behind the newest (5): refused as well
        with pytest.raises(EventReplayError):
            v.check(_auth(seq), {'t'}, now=1000.0)
    v.check(_auth(4), {'t'}, now=1000.0)
    v.check(_auth(0, producer='q' * 32), {'t'}, now=1000.0)  # another producer


def test_old_and_future_messages_are_refused() -> None:
    v = Verifier(StreamKey(KEY), max_age=60, max_skew=5)
    with pytest.raises(EventReplayError, match='ago'):
        v.check(_auth(0, sent=1000.0), {'t'}, now=1061.0)
    with pytest.raises(EventReplayError, match='future'):
        v.check(_auth(1, sent=1010.0), {'t'}, now=1000.0)
    v.check(_auth(2, sent=1000.0), {'t'}, now=1059.0)


@pytest.mark.parametrize(
    'auth',
    [None, 'x', {'producer': 'p', 'topic': 't', 'seq': -1, 'time': 1.0}, {'seq': True}],
)
def test_malformed_auth_is_refused(auth: Any) -> None:
    with pytest.raises(EventAuthenticationError, match='auth'):
        Verifier(StreamKey(KEY)).check(auth, {'t'})


def test_forked_producer_signs_as_another_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    signer = Signer(StreamKey(KEY))
    first = signer.auth('t')
    monkeypatch.setattr('os.getpid', lambda: -7)  # what a forked child sees: another pid
    second = signer.auth('t')
    assert second['producer'] != first['producer']
    assert second['seq'] == first['seq'] == 0


def test_consumer_keeps_going_after_a_replay() -> None:
    signer = Signer(StreamKey(KEY))
    store = Store('s', LocalConnector(), register=True)
    key = store.put('v')
    first = ev.encode(
        [ev.NewObjectEvent('t', store.config().model_dump(), key, {}, False)], signer=signer
    )
    end = ev.encode([ev.EndOfStreamEvent('t')], signer=signer)
    consumer = StreamConsumer(queue_of(first, first, end), key=KEY, timeout=1)
    assert consumer.next() == 'v'
    with pytest.raises(EventReplayError):
        consumer.next()
    with pytest.raises(StopIteration):
        consumer.next()


# The key -----------------------------------------------------------------------------------


def test_key_is_resolved_from_argument_environment_or_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_KEY_FILE, raising=False)
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'config'))
    default = resolve_key(None)  # the user's key file, created on first use
    assert default is not None
    assert (tmp_path / 'config' / 'tether' / 'stream.key').exists()
    path = tmp_path / 'stream.key'
    path.write_text(OTHER_KEY + '\n')
    monkeypatch.setenv(ENV_KEY_FILE, str(path))
    from_file = resolve_key(None)
    assert from_file is not None
    assert from_file.kid == StreamKey(OTHER_KEY).kid
    monkeypatch.setenv(ENV_KEY, KEY)
    from_env = resolve_key(None)
    assert from_env is not None
    assert from_env.kid == StreamKey(KEY).kid
    assert resolve_key(False) is None
    assert resolve_key(OTHER_KEY).kid == StreamKey(OTHER_KEY).kid  # type: ignore[union-attr]
    monkeypatch.delenv(ENV_KEY)
    path.unlink()
    with pytest.raises(ConfigError, match='stream key file'):
        resolve_key(None)


def test_short_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match='at least 16 bytes'):
        StreamKey('secret')


def test_key_is_never_serialized() -> None:
    key = StreamKey(KEY)
    assert KEY not in repr(key)
    with pytest.raises(TypeError, match='never serialized'):
        pickle.dumps(key)
    producer = StreamProducer(_Sink(), Store('s'), key=key)
    with pytest.raises(TypeError):
        pickle.dumps(producer)
