"""Federated agents: stateful behaviors launched anywhere and reached through handles.

```python
from tether.agents import Behavior, Manager, action
from tether.agents.exchange import ThreadExchange
from tether.agents.launcher import ThreadLauncher

class Example(Behavior):
    @action
    def square(self, value: float) -> float:
        return value**2

with Manager(exchange=ThreadExchange(), launcher=ThreadLauncher()) as manager:
    handle = manager.launch(Example())
    assert handle.square(2).result() == 4
```

* :mod:`tether.agents.behavior`: ``Behavior`` (alias ``Agent``), ``action``, ``loop``,
  ``timer``, ``event``;
* :mod:`tether.agents.handle`: ``Handle`` and ``ActionFuture``;
* :mod:`tether.agents.exchange`: ``ThreadExchange``, ``RedisExchange``, ``HybridExchange``;
* :mod:`tether.agents.launcher`: thread, process, Parsl and daemon launchers;
* :mod:`tether.agents.manager`: ``Manager``; :mod:`tether.agents.state`: ``State``.
"""

from __future__ import annotations

from tether.agents._context import ActionContext, AgentContext, AgentSpec, current_action
from tether.agents.behavior import (
    RESERVED_ACTION_NAMES,
    ActionInfo,
    Agent,
    AgentDescription,
    Behavior,
    action,
    event,
    loop,
    timer,
)
from tether.agents.handle import ActionFuture, Handle
from tether.agents.manager import Manager
from tether.agents.state import State

__all__ = [
    'ActionContext',
    'ActionFuture',
    'ActionInfo',
    'Agent',
    'AgentContext',
    'AgentDescription',
    'AgentSpec',
    'Behavior',
    'Handle',
    'Manager',
    'RESERVED_ACTION_NAMES',
    'State',
    'action',
    'current_action',
    'event',
    'loop',
    'timer',
]
