"""The hosted exchange's guarantees: authentication, isolation between users, sharing and
its revocation, per-user limits (clear errors, and backpressure for the rate), TLS."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.agents import Manager
from tether.agents.exchange import HttpExchange, MailboxStatus
from tether.agents.exchange.hosted import (
    HostedExchangeServer,
    UserLimits,
    UserRecord,
    hash_token,
    load_users,
)
from tether.agents.launcher import ThreadLauncher
from tether.exceptions import (
    AgentError,
    AuthenticationError,
    ConfigError,
    FrameTooLargeError,
    UnknownMailboxError,
    WireConnectionError,
)
from tether.testing import FakeClock
from tether.testing._agent_behaviors import Echo

TIMEOUT = 30.0
Connect = Callable[[str], HttpExchange]


def _users(**limits: UserLimits) -> dict[str, UserRecord]:
    names = ['alice', 'bob', 'carol', *limits]
    return {n: UserRecord(n, hash_token(f'token-{n}'), limits.get(n, UserLimits())) for n in names}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> Iterator[HostedExchangeServer]:
    limits = {
        'small': UserLimits(
            max_mailboxes=2, max_message_bytes=2000, max_queued_bytes=3000, max_connections=1
        ),
        'slow': UserLimits(messages_per_second=1.0, burst=2),
    }
    with HostedExchangeServer(_users(**limits), clock=clock) as srv:
        yield srv


@pytest.fixture
def connect(server: HostedExchangeServer) -> Iterator[Connect]:
    made: list[HttpExchange] = []

    def make(user: str) -> HttpExchange:
        exchange = HttpExchange(server.url, token=f'token-{user}')
        made.append(exchange)
        return exchange

    yield make
    for exchange in made:
        exchange.close()


def test_a_wrong_or_missing_token_is_refused(
    server: HostedExchangeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(AuthenticationError, match='401'):
        HttpExchange(server.url, token='not-a-token').status('agent-x')
    monkeypatch.delenv('TETHER_EXCHANGE_TOKEN', raising=False)
    with pytest.raises(AuthenticationError, match='no token'):
        HttpExchange(server.url).status('agent-x')


def test_another_users_mailbox_is_not_readable_writable_or_enumerable(connect: Connect) -> None:
    alice, bob = connect('alice'), connect('bob')
    agent_id = alice.register_agent(Echo)
    assert alice.user == 'alice'
    assert bob.user == 'bob'
    assert alice.status(agent_id) is MailboxStatus.ACTIVE
    # Not enumerable: bob neither discovers it nor learns that it exists.
    assert bob.discover(Echo) == []
    assert bob.status(agent_id) is MailboxStatus.MISSING
    # Not writable.
    with pytest.raises(UnknownMailboxError):
        bob.get_handle(agent_id).echo(1)
    with pytest.raises(UnknownMailboxError):
        bob.transport().send_raw(agent_id, b'hostile')
    # Not readable, and bob cannot end it or take its id.
    with pytest.raises(UnknownMailboxError):
        bob.transport().listen(agent_id, lambda message: None)
    with pytest.raises(UnknownMailboxError):
        bob.terminate(agent_id)
    with pytest.raises(AgentError, match='taken'):
        bob.transport().register(agent_id, None)
    with pytest.raises(UnknownMailboxError):
        bob.share(agent_id, 'bob')
    assert alice.status(agent_id) is MailboxStatus.ACTIVE


def test_sharing_an_agent_and_revoking_it(connect: Connect) -> None:
    alice, bob, carol = connect('alice'), connect('bob'), connect('carol')
    with Manager(alice, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        agent_id = handle.agent_id
        alice.share(agent_id, 'bob')
        assert bob.discover(Echo) == [agent_id]
        assert bob.status(agent_id) is MailboxStatus.ACTIVE
        assert bob.get_handle(agent_id).echo('to bob').result(TIMEOUT) == 'to bob'
        assert carol.discover(Echo) == []
        with pytest.raises(UnknownMailboxError):
            carol.get_handle(agent_id).echo(1)
        alice.unshare(agent_id, 'bob')
        assert bob.discover(Echo) == []
        assert bob.status(agent_id) is MailboxStatus.MISSING
        with pytest.raises(UnknownMailboxError):
            bob.get_handle(agent_id).echo(1)
        assert handle.echo('alice still').result(TIMEOUT) == 'alice still'


def test_the_mailbox_count_is_limited(connect: Connect) -> None:
    small = connect('small')
    first = small.register_agent(Echo)
    small.register_agent(Echo)
    with pytest.raises(AgentError, match='max_mailboxes = 2'):
        small.register_agent(Echo)
    small.terminate(first)  # frees one
    small.register_agent(Echo)


def test_an_oversized_message_is_refused_clearly(connect: Connect) -> None:
    small = connect('small')
    agent_id = small.register_agent(Echo)
    with pytest.raises(FrameTooLargeError, match='max_message_bytes = 2000'):
        small.transport().send_raw(agent_id, b'x' * 2001)
    small.transport().send_raw(agent_id, b'x' * 1500)


def test_an_oversized_frame_is_refused_from_its_header(server: HostedExchangeServer) -> None:
    """A client that ignores the limit is disconnected before the server reads the body."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    ws = connect(
        server.url, additional_headers={'Authorization': 'Bearer token-small'}, legacy=True
    )
    try:
        ws.recv()  # hello
        ws.send(b'\x00' * 100_000)
        with pytest.raises(ConnectionClosed) as info:
            ws.recv()
        assert info.value.rcvd is not None
        assert info.value.rcvd.code == 1009
    finally:
        ws.close()


def test_queued_bytes_are_limited_per_mailbox(connect: Connect) -> None:
    small = connect('small')
    agent_id = small.register_agent(Echo)  # nobody listens: messages wait
    small.transport().send_raw(agent_id, b'x' * 1500)
    small.transport().send_raw(agent_id, b'x' * 1500)
    with pytest.raises(AgentError, match='max_queued_bytes = 3000'):
        small.transport().send_raw(agent_id, b'x' * 10)


def test_the_rate_limit_makes_the_sender_wait(
    server: HostedExchangeServer, clock: FakeClock, connect: Connect
) -> None:
    slow = connect('slow')
    agent_id = slow.register_agent(Echo)
    transport = slow.transport()
    transport.send_raw(agent_id, b'1')
    transport.send_raw(agent_id, b'2')  # the burst
    sent = threading.Event()

    def third() -> None:
        transport.send_raw(agent_id, b'3')
        sent.set()

    thread = threading.Thread(target=third)
    thread.start()
    clock.wait_for_sleepers(1)  # the server holds the third send: no error, it waits
    assert not sent.is_set()
    assert server.throttled == 1
    clock.advance(1.0)
    assert sent.wait(TIMEOUT)
    thread.join(TIMEOUT)


def test_tls(tmp_path: Path) -> None:
    from tether._serve.tls import make_self_signed, write_private

    cert, key = make_self_signed('localhost', ['127.0.0.1'])
    write_private(tmp_path / 'cert.pem', cert)
    write_private(tmp_path / 'key.pem', key)
    other, _ = make_self_signed('localhost', ['127.0.0.1'])
    write_private(tmp_path / 'other.pem', other)
    with HostedExchangeServer(
        _users(), cert_file=tmp_path / 'cert.pem', key_file=tmp_path / 'key.pem'
    ) as server:
        assert server.url.startswith('wss://')
        exchange = HttpExchange(server.url, token='token-alice', ca_file=tmp_path / 'cert.pem')
        try:
            with Manager(exchange, ThreadLauncher()) as manager:
                assert manager.launch(Echo()).echo(b'secret').result(TIMEOUT) == b'secret'
        finally:
            exchange.close()
        with pytest.raises(WireConnectionError, match='certificate'):
            HttpExchange(server.url, token='token-alice', ca_file=tmp_path / 'other.pem').status(
                'x'
            )


def test_a_users_file_with_an_unknown_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / 'users.toml'
    path.write_text('[users.ann]\ntoken_sha256 = "ab"\nmax_mailbox = 3\n')
    with pytest.raises(ConfigError, match='max_mailbox'):
        load_users(path)
    path.write_text('[defaults]\nburst = 0\n')
    with pytest.raises(ConfigError, match='burst'):
        load_users(path)


def test_terminated_mailboxes_are_forgotten_beyond_a_bound(connect: Connect) -> None:
    from tether.agents.exchange._hosted_server import TOMBSTONES

    small = connect('small')  # max_mailboxes = 2
    first = small.register_agent(Echo)
    small.terminate(first)
    assert small.status(first) is MailboxStatus.TERMINATED
    for _ in range(TOMBSTONES * 2):
        small.terminate(small.register_agent(Echo))
    assert small.status(first) is MailboxStatus.MISSING  # its record did not pile up


def test_connections_are_limited(connect: Connect) -> None:
    small = connect('small')  # max_connections = 1
    assert small.user == 'small'
    with pytest.raises(AgentError, match='max_connections = 1'):
        small.make_transport()  # a second connection of the same user
    assert small.status('agent-x') is MailboxStatus.MISSING  # the first still serves


def test_a_long_termination_reason_is_cut_not_fatal(connect: Connect) -> None:
    from tether.exceptions import MailboxClosedError

    alice = connect('alice')
    agent_id = alice.register_agent(Echo)
    alice.terminate(agent_id, reason='é' * 5000)  # its JSON is six times longer
    with pytest.raises(MailboxClosedError, match='terminated'):
        alice.transport().send_raw(agent_id, b'x')
    assert alice.status(agent_id) is MailboxStatus.TERMINATED
