"""The launcher conformance suite of ``tether.testing.agents`` over every tether launcher.

Thread agents run over a thread exchange; process, daemon and Parsl agents over a hybrid
exchange on the shared Redis server (a unique prefix per test).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.parsl_env import parsl_environment
from tether.agents.launcher import (
    DaemonLauncher,
    Launcher,
    ParslLauncher,
    ProcessLauncher,
    RestartPolicy,
    ThreadLauncher,
)
from tether.testing.agents import LauncherConformance


class TestThreadLauncher(LauncherConformance):
    timeout = 30.0

    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('thread')

    @pytest.fixture
    def make_launcher(self) -> Callable[[RestartPolicy], Launcher]:
        return lambda restart: ThreadLauncher(restart=restart)


class TestProcessLauncher(LauncherConformance):
    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('hybrid')

    @pytest.fixture
    def make_launcher(self) -> Callable[[RestartPolicy], Launcher]:
        return lambda restart: ProcessLauncher(restart=restart)


class TestDaemonLauncher(LauncherConformance):
    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('hybrid')

    @pytest.fixture
    def make_launcher(self, agents_home: pathlib.Path) -> Callable[[RestartPolicy], Launcher]:
        return lambda restart: DaemonLauncher(home=agents_home, restart=restart)


@pytest.mark.slow  # a Parsl pool starts for the class's shared launcher, and one more
class TestParslLauncher(LauncherConformance):
    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('hybrid')

    # Class-scoped: the suite shares one launcher between the class's tests, and its run
    # directory must outlive each test.
    @pytest.fixture(scope='class')
    @classmethod
    def make_launcher(cls) -> Iterator[Callable[[RestartPolicy], Launcher]]:
        from parsl.config import Config
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        def make(restart: RestartPolicy) -> Launcher:
            config = Config(
                executors=[
                    HighThroughputExecutor(
                        label='htex',
                        address='127.0.0.1',
                        max_workers_per_node=2,
                        provider=LocalProvider(init_blocks=1, max_blocks=1),  # type: ignore[no-untyped-call]
                        encrypted=False,
                        heartbeat_period=1,
                        heartbeat_threshold=4,
                    ),
                ],
                run_dir=str(run_dir),
                strategy='none',
                strategy_period=0.5,  # its first tick starts the block (default: 5 s)
                initialize_logging=False,
            )
            return ParslLauncher(config, restart=restart)

        with parsl_environment('tether-agents-parsl-') as run_dir:
            yield make
