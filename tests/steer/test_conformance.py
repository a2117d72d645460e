"""The task server conformance suite (tether.testing.steer) over the Local and Parsl servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.parsl_env import parsl_environment
from tether.steer import LocalTaskServer, ParslTaskServer
from tether.testing.steer import TaskServerConformance


class TestLocalTaskServer(TaskServerConformance):
    @pytest.fixture
    def make_task_server(self) -> Callable[..., Any]:
        return lambda queues, methods: LocalTaskServer(queues, methods, num_workers=2)


@pytest.mark.slow
class TestParslTaskServer(TaskServerConformance):
    # Class-scoped: the suite shares one started server between the class's tests, and its
    # run directory must outlive each test.
    @pytest.fixture(scope='class')
    @classmethod
    def make_task_server(cls) -> Iterator[Callable[..., Any]]:
        from tether.plugins.parsl import local_config

        def make(queues: Any, methods: Any) -> ParslTaskServer:
            config = local_config(workers=1, run_dir=str(run_dir))
            config.strategy_period = 0.5  # its first tick starts the block (default: 5 s)
            return ParslTaskServer(methods, queues, config)

        with parsl_environment('tether-steer-conformance-') as run_dir:
            yield make
