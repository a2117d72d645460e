"""Parsl configs that say ``address='localhost'`` (older Parsl took it) still run."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tests.parsl_env import parsl_environment
from tests.steer import _tasks
from tether.steer import ParslTaskServer, PipeQueues
from tether.testing.steer import serving


def _localhost_config(run_dir: pathlib.Path) -> Any:
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    from tether.plugins.parsl import interchange_command, worker_init

    return Config(
        executors=[
            HighThroughputExecutor(
                address='localhost',
                label='htex',
                max_workers_per_node=1,
                provider=LocalProvider(init_blocks=1, max_blocks=1, worker_init=worker_init()),  # type: ignore[no-untyped-call]
                interchange_launch_cmd=interchange_command(),
            )
        ],
        strategy='none',
        run_dir=str(run_dir),
    )


def test_normalise_localhost_changes_only_localhost(tmp_path: pathlib.Path) -> None:
    from tether.plugins.parsl import local_config, normalise_localhost

    config = _localhost_config(tmp_path)
    assert normalise_localhost(config) is config
    (executor,) = config.executors
    assert executor.address == '127.0.0.1'
    assert executor.all_addresses == {'127.0.0.1'}

    other = local_config(run_dir=str(tmp_path / 'other'))
    other.executors[0].address = '10.1.2.3'
    other.executors[0].all_addresses = {'10.1.2.3'}
    normalise_localhost(other)
    assert other.executors[0].address == '10.1.2.3'
    assert other.executors[0].all_addresses == {'10.1.2.3'}


@pytest.mark.slow
def test_parsl_task_server_runs_a_localhost_config() -> None:
    queues = PipeQueues()
    with (
        parsl_environment('tether-steer-localhost-') as run_dir,
        serving(ParslTaskServer([_tasks.add], queues, _localhost_config(run_dir))),
    ):
        queues.send_inputs(2, 3, method='add')
        result = queues.get_result()
        assert result is not None
        assert result.success, result.failure_info
        assert result.value == 5
