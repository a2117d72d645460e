from tests.agents.seed_programs.fig_5_5 import Example

from tether.agents import Manager
from tether.agents.exchange import ThreadExchange
from tether.agents.launcher import ThreadLauncher

with Manager(
    exchange=ThreadExchange(),  # Can be swapped with
    launcher=ThreadLauncher(),  # other implementations
) as manager:
    behavior = Example()  # From Listing 1
    handle = manager.launch(behavior)

    future = handle.square(2)
    assert future.result() == 4

    handle.shutdown()  # Or via the manager
    manager.shutdown(handle.agent_id, blocking=True)
