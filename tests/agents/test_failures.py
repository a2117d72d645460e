"""Failures every caller hears about, and keys that do not outlive their use (issue 25,
item 23)."""

from __future__ import annotations

import concurrent.futures
import pathlib
import uuid
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.agents import Behavior, Manager, action
from tether.agents.exchange import ThreadExchange
from tether.agents.launcher import ProcessLauncher, ThreadLauncher
from tether.agents.message import error_info, rebuild_error
from tether.exceptions import (
    ActionError,
    AgentConfigError,
    AgentCrashedError,
    MailboxClosedError,
)


class Exits(Behavior):
    @action
    def exit(self, code: int) -> None:
        raise SystemExit(code)

    @action
    def interrupt(self) -> None:
        raise KeyboardInterrupt

    @action
    async def aexit(self) -> None:
        raise SystemExit('async bye')

    @action
    async def ainterrupt(self) -> None:
        raise KeyboardInterrupt

    @action
    def ok(self) -> str:
        return 'still here'


@pytest.mark.parametrize('kind', ['thread', 'redis'])
def test_system_exit_and_keyboard_interrupt_in_actions_are_answered(
    make_exchange: Any, kind: str
) -> None:
    with Manager(make_exchange(kind), ThreadLauncher()) as manager:
        handle = manager.launch(Exits())
        calls = {
            'builtins.SystemExit': [handle.exit(3), handle.aexit()],
            'builtins.KeyboardInterrupt': [handle.interrupt(), handle.ainterrupt()],
        }
        for type_name, futures in calls.items():
            for future in futures:
                error = future.exception(30)
                # Never raised as such at the caller (it would stop the caller's program).
                assert isinstance(error, ActionError)
                assert error.type_name == type_name
        assert 'async bye' in str(calls['builtins.SystemExit'][1].exception(30))
        assert handle.ok().result(30) == 'still here'  # the agent keeps serving


def test_an_exit_described_by_a_peer_is_never_raised_as_such() -> None:
    for exc in (SystemExit(1), KeyboardInterrupt(), GeneratorExit()):
        rebuilt = rebuild_error(error_info(exc), allow_pickle=True)
        assert isinstance(rebuilt, ActionError)
        assert rebuilt.type_name == f'builtins.{type(exc).__name__}'
    rebuilt = rebuild_error(error_info(ValueError('x')), allow_pickle=False)
    assert type(rebuilt) is ValueError


def test_crashed_error_says_whether_the_action_had_started() -> None:
    error = rebuild_error(
        error_info(AgentCrashedError('never ran', False), with_pickle=False), allow_pickle=False
    )
    assert isinstance(error, AgentCrashedError)
    assert error.started is False
    assert str(error) == 'never ran'
    assert AgentCrashedError('ran').started is True


def test_a_journal_tells_started_from_waiting_requests(tmp_path: pathlib.Path) -> None:
    from tether.agents._journal import Journal, read_lost_started

    path = str(tmp_path / 'agent.inflight')
    journal = Journal(path)
    journal.started('client-a', 1, 'work')
    journal.started('client-a', 2, 'work', waiting=True)
    journal.started('client-a', 3, 'work', waiting=True)
    journal.running('client-a', 2)  # a slot freed: it starts
    assert read_lost_started(path) == [
        ('client-a', 1, 'work', True),
        ('client-a', 2, 'work', True),
        ('client-a', 3, 'work', False),
    ]
    journal.close()


class BadSetup(Behavior):
    def on_setup(self) -> None:
        raise ValueError('the database is unreachable')

    @action
    def work(self) -> int:
        return 1


@pytest.mark.parametrize(
    ('kind', 'launcher'),
    [('thread', ThreadLauncher), ('redis', ProcessLauncher)],
)
def test_callers_of_an_agent_whose_on_setup_raised_are_told_why(
    make_exchange: Any, kind: str, launcher: Any, tmp_path: pathlib.Path
) -> None:
    exchange = make_exchange(kind)
    agent_id = exchange.register_agent(BadSetup)
    waiting = exchange.get_handle(agent_id).work()  # sent before the agent starts
    with Manager(exchange, launcher(restart=1)) as manager:
        manager.launch(BadSetup(), agent_id=agent_id, state_dir=str(tmp_path))
        with pytest.raises(MailboxClosedError, match='on_setup') as info:
            waiting.result(60)
        assert 'the database is unreachable' in str(info.value)
        assert "action 'work'; it was not run" in str(info.value)
        manager.wait(agent_id, timeout=60)
        # A caller that comes later is told too.
        with pytest.raises(MailboxClosedError, match='the database is unreachable'):
            exchange.get_handle(agent_id).work()
    assert not list(tmp_path.glob('*.failed'))


def test_a_manager_given_an_executor_says_a_launcher_is_needed() -> None:
    exchange = ThreadExchange()
    with concurrent.futures.ThreadPoolExecutor() as pool:
        with pytest.raises(AgentConfigError, match='ThreadLauncher') as info:
            Manager(exchange, pool)  # type: ignore[arg-type]
        assert isinstance(info.value, TypeError)
        assert 'ProcessLauncher' in str(info.value)
        assert 'executor' in str(info.value)
        with pytest.raises(AgentConfigError, match=r"launchers\['cpu'\]"):
            Manager(exchange, launchers={'cpu': pool})  # type: ignore[dict-item]
        with Manager(exchange) as manager, pytest.raises(AgentConfigError, match='launcher'):
            manager.launch(Exits(), launcher=pool)  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match='exchange'):
        Manager(object())  # type: ignore[arg-type]


def _ttls(prefix: str) -> dict[str, int]:
    import redis

    client = redis.Redis(REDIS_HOST, REDIS_PORT)
    try:
        return {k.decode(): int(client.ttl(k)) for k in client.scan_iter(match=f'{prefix}*')}
    finally:
        client.close()


def test_status_secret_and_address_keys_expire_or_are_removed(
    make_exchange: Any, agent_prefix: str
) -> None:
    exchange = make_exchange('hybrid', secret_env=f'UNSET_{uuid.uuid4().hex}')
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Exits())
        assert handle.ok().result(60) == 'still here'
        ttls = _ttls(agent_prefix)
        # While it runs: the agent's address and the shared secret expire unless the
        # processes that use them keep them alive; its mailbox stays.
        assert 0 < ttls[f'{agent_prefix}addr:{handle.agent_id}'] <= 30
        assert ttls[f'{agent_prefix}secret'] > 0
        assert ttls[f'{agent_prefix}st:{handle.agent_id}'] == -1
        manager.shutdown(handle, timeout=60)
    exchange.close()
    ttls = _ttls(agent_prefix)
    assert not [k for k in ttls if ':addr:' in k]  # removed at shutdown
    # What is left (terminated states, the secret) expires.
    assert ttls
    assert all(ttl > 0 for ttl in ttls.values()), ttls


def test_a_client_mailbox_expires_with_its_process(make_exchange: Any, agent_prefix: str) -> None:
    exchange = make_exchange('redis')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Exits())
        assert handle.ok().result(30) == 'still here'
        client_id = handle._mailbox().id
        ttls = _ttls(agent_prefix)
        # The agent's mailbox stays while it is active; this process's mailbox for
        # answers lives while its listener refreshes it.
        assert ttls[f'{agent_prefix}st:{handle.agent_id}'] == -1
        assert 0 < ttls[f'{agent_prefix}st:{client_id}'] <= 60
        # What waits in a client mailbox nobody listens to expires with it.
        orphan = exchange.register_client()
        exchange.get_handle(orphan).ok()  # a message that waits in its list
        ttls = _ttls(agent_prefix)
        assert 0 < ttls[f'{agent_prefix}st:{orphan}'] <= 60
        assert 0 < ttls[f'{agent_prefix}mb:{orphan}'] <= 60
