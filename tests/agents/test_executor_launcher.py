"""ExecutorLauncher passes the launcher conformance suite over a thread pool."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tether.agents.launcher import ExecutorLauncher, Launcher, RestartPolicy
from tether.exceptions import AgentConfigError
from tether.testing.agents import LauncherConformance


@pytest.fixture(scope='module')
def pools() -> Iterator[list[ThreadPoolExecutor]]:
    """The launchers' pools, shut down when the module's tests are done (the suite keeps
    one launcher for its whole class)."""
    made: list[ThreadPoolExecutor] = []
    yield made
    for pool in made:
        pool.shutdown(wait=True)


class TestExecutorLauncher(LauncherConformance):
    timeout = 30.0

    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('thread')

    @pytest.fixture
    def make_launcher(
        self, pools: list[ThreadPoolExecutor]
    ) -> Callable[[RestartPolicy], Launcher]:
        def make(restart: RestartPolicy) -> Launcher:
            pools.append(ThreadPoolExecutor(8))
            return ExecutorLauncher(pools[-1], restart=restart)

        return make


def test_refuses_what_is_not_an_executor() -> None:
    with pytest.raises(AgentConfigError, match=r'concurrent\.futures\.Executor'):
        ExecutorLauncher(ThreadPoolExecutor)  # type: ignore[arg-type]
