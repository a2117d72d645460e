"""Steering queues sign every message by default and refuse unsigned, altered and replayed ones.

Queue messages are pickles: whoever can write to the campaign's Redis lists could run code
in the task server and the Thinker. Here a writer to Redis (a plain redis-py client)
pushes unsigned messages, altered ones, messages signed with another key, and genuine
messages replayed twice, onto another topic, or onto another campaign's queues: each is
refused before anything in it is unpickled, the task server keeps serving, and a replayed
request never runs twice.
"""

from __future__ import annotations

import pickle
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tests.steer import _tasks
from tether.exceptions import (
    ConfigError,
    KillSignalError,
    SteerAuthenticationError,
    SteerReplayError,
)
from tether.steer import LocalTaskServer, Result, _pack
from tether.steer._auth import ENV_KEY, ENV_KEY_FILE, default_key_file
from tether.steer.queue import PipeQueues, RedisQueues
from tether.testing.steer import serving

KEY = 'steer-test-key-0123456789abcdef'


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh XDG config directory and no queue key in the environment."""
    home = tmp_path / 'xdg'
    monkeypatch.setenv('XDG_CONFIG_HOME', str(home))
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_KEY_FILE, raising=False)
    return home


@pytest.fixture
def redis_client(redis_available: None) -> Any:
    import redis

    client = redis.Redis(REDIS_HOST, REDIS_PORT)
    yield client
    client.close()


@pytest.fixture
def make_queues(redis_available: None) -> Iterator[Any]:
    made: list[RedisQueues] = []

    def make(prefix: str | None = None, **kwargs: Any) -> RedisQueues:
        q = RedisQueues(
            topics=['a', 'b'],
            hostname=REDIS_HOST,
            port=REDIS_PORT,
            prefix=prefix or f'steer-sec-{uuid.uuid4().hex}',
            **kwargs,
        )
        made.append(q)
        return q

    yield make
    for q in made:
        q.flush()
        q.close()


def _request(method: str, *args: Any) -> Result:
    result = Result(method=method, topic='a')
    result.inputs = _pack.pack_inputs(args, {})
    return result


def test_queues_sign_by_default_with_a_private_user_key(
    config_home: Path, make_queues: Any
) -> None:
    path = config_home / 'tether' / 'steer.key'
    assert default_key_file() == path
    queues = make_queues()
    assert queues.signed
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    other = make_queues(prefix=queues.prefix)
    assert other._sealer is not None
    assert queues._sealer is not None
    assert other._sealer.key.kid == queues._sealer.key.kid
    # A pickled copy carries no key: it resolves the same user key where it is loaded.
    blob = pickle.dumps(queues)
    assert path.read_bytes().strip() not in blob
    copy = pickle.loads(blob)
    assert copy.signed
    assert copy._sealer.key.kid == queues._sealer.key.kid
    # ... and one made unsigned stays unsigned.
    assert not pickle.loads(pickle.dumps(make_queues(secret=False))).signed
    with pytest.raises(ConfigError, match='at least 16 bytes'):
        make_queues(secret='short')


def test_a_private_key_file_is_required(config_home: Path, make_queues: Any) -> None:
    path = default_key_file()
    path.parent.mkdir(parents=True)
    path.write_text('x' * 64)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match='readable by you only'):
        make_queues()


def test_unsigned_altered_and_foreign_messages_are_refused(
    make_queues: Any, redis_client: Any
) -> None:
    queues = make_queues(secret=KEY)
    key = f'{queues.prefix}_result_a'
    genuine = queues._encode(Result(method='add', topic='a'), 'result/a')
    unsigned = make_queues(prefix=queues.prefix, secret=False)._encode(
        Result(method='add', topic='a'),
        'result/a',
    )
    altered = genuine[:-1] + bytes([genuine[-1] ^ 1])
    foreign = make_queues(prefix=queues.prefix, secret=KEY + 'x')._encode(
        Result(method='add', topic='a'),
        'result/a',
    )
    redis_client.rpush(key, unsigned, altered, foreign)
    with pytest.raises(SteerAuthenticationError, match='unsigned'):
        queues.get_result('a', timeout=10)
    with pytest.raises(SteerAuthenticationError, match='altered'):
        queues.get_result('a', timeout=10)
    with pytest.raises(SteerAuthenticationError, match='another queue key: it claims key id'):
        queues.get_result('a', timeout=10)
    # An unsigned queue refuses a signed message it cannot check.
    unsigned_reader = make_queues(prefix=queues.prefix, secret=False)
    redis_client.rpush(key, genuine)
    with pytest.raises(SteerAuthenticationError, match='secret=False'):
        unsigned_reader.get_result('a', timeout=10)


def test_replayed_results_are_refused(make_queues: Any, redis_client: Any) -> None:
    queues = make_queues(secret=KEY)
    with serving(LocalTaskServer(queues, [_tasks.add], num_workers=1)):
        queues.send_inputs(1, 2, method='add', topic='a')
        # Intercept the genuine result as an attacker with access to Redis would.
        _, message = redis_client.blpop([f'{queues.prefix}_result_a'], timeout=60)
        redis_client.rpush(f'{queues.prefix}_result_a', message, message)
        redis_client.rpush(f'{queues.prefix}_result_b', message)
        assert queues.get_result('a', timeout=10).value == 3
        with pytest.raises(SteerReplayError, match='already read'):
            queues.get_result('a', timeout=10)
        with pytest.raises(SteerReplayError, match=r'signed for .*result/a.*, not for .*result/b'):
            queues.get_result('b', timeout=10)
    # Onto another campaign's queues (same key, other prefix): refused too.
    other = make_queues(secret=KEY)
    redis_client.rpush(f'{other.prefix}_result_a', message)
    with pytest.raises(SteerReplayError, match='another topic or queue'):
        other.get_result('a', timeout=10)


def test_old_messages_are_refused(make_queues: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from tether.steer import _auth

    queues = make_queues(secret=KEY, max_age=60)
    sent = time.time() - 3600
    monkeypatch.setattr(_auth.time, 'time', lambda: sent)
    old = queues._encode(Result(method='add', topic='a'), 'result/a')
    monkeypatch.undo()
    with pytest.raises(SteerReplayError, match='max_age=60'):
        queues._decode(old, 'result/a', 'test')


def test_the_task_server_drops_refused_requests_and_runs_a_replay_once(
    make_queues: Any,
    redis_client: Any,
    tmp_path: Path,
) -> None:
    queues = make_queues(secret=KEY)
    runs = tmp_path / 'runs'
    genuine = queues._encode(_request('append_line', str(runs)), 'requests')
    unsigned = b'TSQ1' + pickle.dumps(_request('append_line', str(runs)))
    with serving(LocalTaskServer(queues, [_tasks.append_line], num_workers=1)):
        redis_client.rpush(f'{queues.prefix}_requests', unsigned, genuine, genuine)
        assert queues.get_result('a', timeout=60).value == 1
        queues.send_kill_signal()
        with pytest.raises(KillSignalError):
            queues.get_result('a', timeout=60)
    assert runs.read_text() == 'ran\n'  # once: neither the unsigned nor the replay ran


def test_pipe_queues_are_signed_too() -> None:
    queues = PipeQueues(secret=KEY)
    other = PipeQueues(secret=KEY)
    message = queues._encode(Result(method='add'), 'requests')
    assert queues._decode(message, 'requests', 'test') is not None
    with pytest.raises(SteerReplayError):
        other._decode(message, 'requests', 'test')  # another pair of pipes
