"""TaPS's Parsl sub-configs and TaPS-style Parsl TOML on tether.bench (docs/porting.md)."""

from __future__ import annotations

import operator
import pathlib

import pydantic
import pytest
from parsl.executors import HighThroughputExecutor
from parsl.launchers import MpiExecLauncher, SrunLauncher
from parsl.providers import PBSProProvider, SlurmProvider

from tether.bench.executor.parsl import (
    AddressConfig,
    HTExConfig,
    LauncherConfig,
    ManagerSelectorConfig,
    ParslHTExConfig,
    ProviderConfig,
)
from tether.bench.run.config import BenchmarkConfig


def test_kinds_are_short_names_or_parsl_class_names() -> None:
    # Extra fields are the options (the pydantic mypy plugin does not see them).
    taps = ProviderConfig(  # type: ignore[call-arg]
        kind='PBSProProvider',
        launcher=LauncherConfig(kind='MpiExecLauncher', bind_cmd='--cpu-bind'),  # type: ignore[call-arg]
        account='acct',
        queue='debug',
    ).get_provider()
    assert isinstance(taps, PBSProProvider)
    assert taps.account == 'acct'
    assert isinstance(taps.launcher, MpiExecLauncher)
    ours = ProviderConfig(kind='slurm', launcher='srun', options={'account': 'a'}).get_provider()
    assert isinstance(ours, SlurmProvider)
    assert isinstance(ours.launcher, SrunLauncher)


@pytest.mark.parametrize(
    ('model', 'kind'),
    [
        (ProviderConfig, 'FakeProvider'),
        (LauncherConfig, 'FakeLauncher'),
        (AddressConfig, 'fake_address'),
        (ManagerSelectorConfig, 'FakeSelector'),
    ],
)
def test_unknown_kinds_are_refused(model: type[pydantic.BaseModel], kind: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=kind):
        model(kind=kind)


def test_address_and_manager_selector_reach_htex() -> None:
    htex = HTExConfig(  # type: ignore[call-arg]
        address=AddressConfig(kind='address_by_hostname'),
        manager_selector=ManagerSelectorConfig(kind='RandomManagerSelector'),
        max_workers_per_node=3,
    ).get_executor()
    assert isinstance(htex, HighThroughputExecutor)
    assert htex.address == AddressConfig(kind='address_by_hostname').get_address()
    assert type(htex.manager_selector).__name__ == 'RandomManagerSelector'
    assert htex.max_workers_per_node == 3


def test_taps_style_toml_reads_as_htex_config() -> None:
    config = BenchmarkConfig.from_dict(
        {
            'app': {'name': 'synthetic'},
            'engine': {
                'executor': {
                    'name': 'parsl-htex',
                    'app_cache': False,
                    'htex': {
                        'max_workers_per_node': 4,
                        'provider': {
                            'kind': 'PBSProProvider',
                            'account': 'acct',
                            'launcher': {'kind': 'MpiExecLauncher'},
                        },
                        'address': {'kind': 'address_by_hostname'},
                    },
                },
            },
        }
    )
    executor = config.engine.executor
    assert isinstance(executor, ParslHTExConfig)
    assert isinstance(executor.htex, HTExConfig)
    assert executor.htex.provider.kind == 'PBSProProvider'
    assert executor.get_workers() == 4


def test_plain_htex_table_keeps_the_provider_beside_it() -> None:
    config = ParslHTExConfig(htex={'max_workers_per_node': 2}, provider=ProviderConfig())
    assert isinstance(config.htex, dict)
    assert config.get_workers() == 2
    with pytest.raises(pydantic.ValidationError, match='not in both'):
        ParslHTExConfig(htex={'provider': {'kind': 'local'}}, provider=ProviderConfig())


@pytest.mark.slow
def test_taps_shaped_htex_runs_a_task(tmp_path: pathlib.Path) -> None:
    """The TaPS-shaped table builds a working executor (local provider, one worker)."""
    config = ParslHTExConfig.model_validate(
        {
            'run_dir': str(tmp_path / 'parsl'),
            'strategy': 'none',
            'app_cache': False,
            'htex': {
                'max_workers_per_node': 1,
                'provider': {'kind': 'LocalProvider', 'init_blocks': 1, 'max_blocks': 1},
                'address': {'kind': 'address_by_hostname'},
            },
        }
    )
    executor = config.get_executor()
    try:
        assert executor.submit(operator.mul, 6, 7).result(timeout=100) == 42  # workers import it
    finally:
        executor.shutdown()
