"""The launcher conformance suite of ``tether.testing.agents`` over every tether launcher.

Thread agents run over a thread exchange; process, daemon and Parsl agents over a hybrid
exchange on the shared Redis server (a unique prefix per test).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.test_processes import parsl_config  # noqa: F401 - a fixture used below
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


@pytest.mark.slow  # a Parsl pool starts for each test
class TestParslLauncher(LauncherConformance):
    @pytest.fixture
    def exchange(self, make_exchange: Callable[..., Any]) -> Any:
        return make_exchange('hybrid')

    @pytest.fixture
    def make_launcher(
        self,
        parsl_config: Any,  # noqa: F811 - the fixture imported above
    ) -> Callable[[RestartPolicy], Launcher]:
        return lambda restart: ParslLauncher(parsl_config, restart=restart)
