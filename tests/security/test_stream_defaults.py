"""Stream trust by default: the user's key file, topic-bound replays, endpoint homes.

A seed program runs with only its imports changed because every process of the user
finds the same key in the user's key file; a message replayed onto another topic is
refused; an ``EndpointConnector`` config pointing at someone else's directory is pinned
out or refused like any other config.
"""

from __future__ import annotations

import os
import queue
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.security._stream_forge import event_message
from tether.connectors.endpoint import EndpointConnector, EndpointKey
from tether.connectors.local import LocalConnector
from tether.exceptions import (
    ConfigError,
    ConnectorError,
    EventAuthenticationError,
    EventReplayError,
    UntrustedStoreError,
)
from tether.store import Store
from tether.stream import StreamConsumer, StreamProducer
from tether.stream import events as ev
from tether.stream.auth import (
    ENV_KEY,
    ENV_KEY_FILE,
    Signer,
    StreamKey,
    default_key_file,
    resolve_key,
)
from tether.stream.shims.mqtt import mqtt_topic_matches
from tether.stream.shims.nats import nats_subject_matches
from tether.stream.shims.queue import QueuePublisher, QueueSubscriber


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh XDG config directory and no stream key in the environment."""
    home = tmp_path / 'xdg'
    monkeypatch.setenv('XDG_CONFIG_HOME', str(home))
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_KEY_FILE, raising=False)
    return home


def test_the_user_key_file_is_created_private_on_first_use(config_home: Path) -> None:
    path = config_home / 'tether' / 'stream.key'
    assert default_key_file() == path
    assert not path.exists()
    first = resolve_key(None)
    assert first is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(path.read_text().strip()) == 64
    again = resolve_key(None)
    assert again is not None
    assert again.kid == first.kid
    assert [p.name for p in path.parent.iterdir()] == ['stream.key']  # no temporary left


def test_a_relative_xdg_config_home_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('XDG_CONFIG_HOME', 'relative/dir')
    assert default_key_file() == tmp_path / '.config' / 'tether' / 'stream.key'


_KID = """
    import sys, time
    from tether.stream.auth import resolve_key
    while time.time() < float(sys.argv[1]):
        pass
    print(resolve_key(None).kid)
"""


def test_processes_racing_to_create_the_key_file_share_one_key(config_home: Path) -> None:
    import time

    start = str(time.time() + 1.0)  # released together, so they race on the creation
    env = {**os.environ}
    procs = [
        subprocess.Popen(
            [sys.executable, '-c', textwrap.dedent(_KID), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    kids = {out.strip() for out, _ in outs}
    assert len(kids) == 1
    key = resolve_key(None)
    assert key is not None
    assert kids == {key.kid}


def test_a_key_file_others_can_read_is_refused(config_home: Path) -> None:
    assert resolve_key(None) is not None
    path = default_key_file()
    path.chmod(0o640)
    with pytest.raises(ConfigError, match='readable by you only'):
        resolve_key(None)
    path.chmod(0o600)
    assert resolve_key(None) is not None


@pytest.mark.skipif(os.getuid() != 0, reason='needs root to give the file to another user')
def test_a_key_file_of_another_user_is_refused(config_home: Path) -> None:
    assert resolve_key(None) is not None
    os.chown(default_key_file(), 65534, 65534)
    with pytest.raises(ConfigError, match='must belong to you'):
        resolve_key(None)


def test_producers_and_consumers_sign_by_default(config_home: Path) -> None:
    store = Store('signed-by-default', LocalConnector(), register=True)
    q: queue.Queue[bytes] = queue.Queue()
    with StreamProducer(QueuePublisher({'t': q}), store) as producer:
        assert producer.signed
        producer.send('t', 'hello', evict=False)
    messages = [q.get_nowait() for _ in range(2)]
    assert all(b'"mac":"' in m for m in messages)
    for m in messages:
        q.put(m)
    q.put(event_message(store.config().model_dump(), {'type': 'x', 'fields': []}))
    consumer = StreamConsumer(QueueSubscriber(q, 't'), timeout=1)
    assert consumer.authenticated
    assert consumer.next_object() == 'hello'
    with pytest.raises(StopIteration):
        consumer.next()
    forged = StreamConsumer(QueueSubscriber(q, 't'), timeout=1)
    with pytest.raises(EventAuthenticationError, match='unsigned'):
        forged.next()  # a forged, unsigned message: refused before anything is parsed
    store.close()


# A signed message replayed onto another topic ------------------------------------------

KEY = StreamKey('k' * 32)


def _signed_end(topic: str) -> bytes:
    return ev.encode([ev.EndOfStreamEvent(topic)], signer=Signer(KEY))


def _subscriber(topic: str | None, *messages: bytes) -> QueueSubscriber:
    q: queue.Queue[bytes] = queue.Queue()
    for m in messages:
        q.put(m)
    return QueueSubscriber(q, topic)


def test_a_message_replayed_onto_another_topic_is_refused() -> None:
    consumer = StreamConsumer(
        _subscriber('orders', _signed_end('audit'), _signed_end('orders')), key=KEY, timeout=1
    )
    with pytest.raises(EventReplayError, match="signed for topic 'audit'"):
        consumer.next()
    with pytest.raises(StopIteration):  # its own topic's end of stream is accepted
        consumer.next()


def test_topics_given_to_the_consumer_override_the_shim() -> None:
    messages = (_signed_end('a'), _signed_end('b'))
    consumer = StreamConsumer(_subscriber(None, *messages), key=KEY, timeout=1, topics=['b'])
    with pytest.raises(EventReplayError, match='another topic'):
        consumer.next()
    with pytest.raises(StopIteration):
        consumer.next()
    # A shim that names no topic, and no topics given: the topic cannot be checked.
    unchecked = StreamConsumer(_subscriber(None, _signed_end('z')), key=KEY, timeout=1)
    with pytest.raises(StopIteration):
        unchecked.next()


@pytest.mark.parametrize(
    ('pattern', 'topic', 'matches'),
    [
        ('a/b', 'a/b', True),
        ('a/b', 'a/c', False),
        ('a/+', 'a/c', True),
        ('a/+', 'a/c/d', False),
        ('a/#', 'a', True),
        ('a/#', 'a/c/d', True),
        ('#', 'x/y', True),
        ('+/b', 'a/b', True),
        ('a', 'a/b', False),
    ],
)
def test_mqtt_topic_filters(pattern: str, topic: str, matches: bool) -> None:
    assert mqtt_topic_matches(pattern, topic) is matches


@pytest.mark.parametrize(
    ('pattern', 'subject', 'matches'),
    [
        ('a.b', 'a.b', True),
        ('a.b', 'a.c', False),
        ('a.*', 'a.c', True),
        ('a.*', 'a.c.d', False),
        ('a.>', 'a.c.d', True),
        ('a.>', 'a', False),
        ('*.b', 'a.b', True),
    ],
)
def test_nats_subjects(pattern: str, subject: str, matches: bool) -> None:
    assert nats_subject_matches(pattern, subject) is matches


# EndpointConnector homes from untrusted configs -----------------------------------------


def _endpoint_home(tmp_path: Path, name: str) -> tuple[Path, Any]:
    from tether.endpoint import EndpointConfig

    home = tmp_path / name
    home.mkdir(mode=0o700)
    return home, EndpointConfig.create('site', home)


def test_a_pinned_consumer_refuses_another_endpoint_home(tmp_path: Path) -> None:
    mine, config = _endpoint_home(tmp_path, 'mine')
    store = Store('endpoint-pinned', EndpointConnector(['site'], home=str(mine)))
    theirs = dict(store.config().model_dump())
    theirs['connector_config'] = {**theirs['connector_config'], 'home': str(tmp_path / 'x')}
    key = {'type': 'tether.connectors.endpoint.EndpointKey', 'fields': ['o', config.uuid]}
    q: queue.Queue[bytes] = queue.Queue()
    q.put(event_message(theirs, key))
    q.put(event_message(store.config().model_dump(), key))
    consumer = StreamConsumer(QueueSubscriber(q, 't'), stores=store, key=False, timeout=1)
    with pytest.raises(UntrustedStoreError, match='endpoint-pinned'):
        consumer.next()
    assert consumer.next_event().key == EndpointKey('o', config.uuid)


def test_an_endpoint_home_others_can_write_is_refused(tmp_path: Path) -> None:
    home, _ = _endpoint_home(tmp_path, 'shared')
    home.chmod(0o777)
    connector = EndpointConnector.from_config({'endpoints': ['site'], 'home': str(home)})
    with pytest.raises(ConnectorError, match='writable by you only'):
        connector.put(b'x')


@pytest.mark.skipif(os.getuid() != 0, reason='needs root to give a directory to another user')
def test_an_endpoint_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    home, config = _endpoint_home(tmp_path, 'theirs')
    os.chown(config.folder(home), 65534, 65534)
    connector = EndpointConnector(['site'], home=str(home))
    with pytest.raises(ConnectorError, match='must belong to you'):
        connector.exists(EndpointKey('o', config.uuid))
