"""The engine conformance suite (tether.testing.faas) against tether's two engines, and
the registry that lets a third party add one."""

from __future__ import annotations

from typing import Any

import pytest

from tether.exceptions import ConfigError
from tether.faas import ComputeEndpointConfig, EndpointConfig
from tether.faas.endpoint import engine as engines
from tether.faas.endpoint.engine import EngineFactory, create_engine, register_engine
from tether.testing.faas import Collector, EngineConformance


class TestProcessEngine(EngineConformance):
    @pytest.fixture
    def engine_factory(self) -> EngineFactory:
        return engines._BUILTIN['process']


@pytest.mark.slow
class TestParslEngine(EngineConformance):
    @pytest.fixture
    def engine_factory(self) -> EngineFactory:
        pytest.importorskip('parsl')
        return engines._BUILTIN['parsl']


def test_a_registered_engine_is_chosen_by_name() -> None:
    made: list[Any] = []

    def factory(config: Any, on_handoff: Any, on_result: Any, env: dict[str, str]) -> Any:
        engine = engines._BUILTIN['process'](config, on_handoff, on_result, env)
        made.append((engine, env))
        return engine

    register_engine('conformance_third_party', factory, replace=True)
    assert 'conformance_third_party' in engines.engine_names()
    config = ComputeEndpointConfig(
        name='e', endpoint_id='e', service_url='http://x:1', engine='conformance_third_party'
    )
    c = Collector()
    engine = create_engine(config, c.on_handoff, c.on_result)
    assert made[0][0] is engine
    assert made[0][1]['TETHER_FAAS_ENDPOINT_ID'] == 'e'


def test_unknown_and_taken_engine_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown engine 'nope'.*parsl, process"):
        ComputeEndpointConfig(name='e', endpoint_id='e', service_url='http://x:1', engine='nope')
    with pytest.raises(ConfigError, match='registered already'):
        register_engine('process', engines._BUILTIN['parsl'])
    with pytest.raises(ConfigError, match='plain name'):
        register_engine('no such', engines._BUILTIN['parsl'])


def test_endpoint_config_is_the_compute_endpoint_config() -> None:
    import tether.faas.endpoint

    assert EndpointConfig is ComputeEndpointConfig
    assert tether.faas.endpoint.EndpointConfig is ComputeEndpointConfig
    assert tether.faas.endpoint.ComputeEndpointConfig is ComputeEndpointConfig


def test_the_engine_contract_is_in_tether_abc() -> None:
    from tether.abc import FaasEngine

    assert FaasEngine is engines.Engine
