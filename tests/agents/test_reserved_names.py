"""Action names that a handle or a behavior already uses are refused when the class is
defined, and nothing a behavior defines breaks its agent (issue 25, item 24)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.agents import RESERVED_ACTION_NAMES, Behavior, Handle, Manager, action
from tether.agents.exchange import ThreadExchange
from tether.exceptions import AgentError, BehaviorDefinitionError


@pytest.mark.parametrize('name', ['describe', 'ping', 'shutdown', 'status', 'action'])
def test_an_action_named_like_a_handle_method_is_refused_at_definition(name: str) -> None:
    def method(self: Any) -> str:
        return 'shadowed'

    with pytest.raises(BehaviorDefinitionError, match=f'action {name!r}.*reserved') as info:
        type('Clash', (Behavior,), {name: action(method)})
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, AgentError)
    assert 'Clash' in str(info.value)


def test_an_action_renamed_to_a_reserved_name_is_refused() -> None:
    with pytest.raises(BehaviorDefinitionError, match="'ping'"):

        class Renamed(Behavior):
            @action(name='ping')
            def my_ping(self) -> str:
                return 'mine'


def test_a_subclass_cannot_add_a_reserved_action() -> None:
    class Base(Behavior):
        @action
        def work(self) -> int:
            return 1

    with pytest.raises(BehaviorDefinitionError, match='agent_id'):

        class Child(Base):
            @action
            def agent_id(self) -> str:  # type: ignore[override]
                return 'x'


def test_every_public_name_of_a_handle_and_of_behavior_is_reserved() -> None:
    handle_names = {n for n in dir(Handle) if not n.startswith('_')} | {'agent_id', 'exchange'}
    behavior_names = {n for n in dir(Behavior) if not n.startswith('_')}
    assert handle_names <= RESERVED_ACTION_NAMES
    assert behavior_names <= RESERVED_ACTION_NAMES


class Overrides(Behavior):
    """Plain methods (not actions) that reuse names the runtime relies on."""

    def describe(self) -> str:  # type: ignore[override]
        return 'my own describe'

    def behavior_actions(self) -> str:  # type: ignore[override]
        return 'my own list'

    @action
    def work(self, x: int) -> int:
        return x + 1


def test_methods_that_reuse_behavior_names_do_not_break_the_agent() -> None:
    assert Overrides().describe() == 'my own describe'
    with Manager(ThreadExchange()) as manager:
        handle = manager.launch(Overrides())
        assert handle.work(1).result(30) == 2
        assert list(handle.describe(timeout=30)) == ['work']
        assert handle.ping(timeout=30) > 0
        manager.shutdown(handle, timeout=30)
