"""An endpoint's ``allowed_serializers`` (issue 29): tasks whose function or arguments
travel with another serializer fail before the endpoint reads them; allowed ones run."""

from __future__ import annotations

from collections.abc import Callable

import pydantic
import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user
from tether.exceptions import TaskExecutionFailed
from tether.faas import ComputeSerializer, DillCodeSource, EndpointConfig, Executor, JSONData
from tether.faas._server import ServiceThread


def test_endpoint_runs_only_allowed_serializers(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, allowed_serializers=['DillCodeSource', 'json'])
    eid = ep.config.endpoint_id
    source_json = ComputeSerializer(DillCodeSource(), JSONData())
    with Executor(eid, service_url=prod_service.url, token=token, serializer=source_json) as ex:
        assert ex.submit(_tasks.square, 6).result(timeout=60) == 36
    with Executor(eid, service_url=prod_service.url, token=token) as ex:  # pickle + tether
        with pytest.raises(TaskExecutionFailed, match='SerializerNotAllowedError') as info:
            ex.submit(_tasks.square, 6).result(timeout=60)
        assert "serialized with 'pickle'" in str(info.value)
    by_source = ComputeSerializer(DillCodeSource())  # source code, tether data
    refused = pytest.raises(TaskExecutionFailed, match="arguments were serialized with 'tether'")
    with (
        Executor(eid, service_url=prod_service.url, token=token, serializer=by_source) as ex,
        refused,
    ):
        ex.submit(_tasks.square, 6).result(timeout=60)


def test_endpoint_config_checks_allowed_serializers() -> None:
    def config(allowed: list[str]) -> EndpointConfig:
        return EndpointConfig(
            name='ep',
            endpoint_id='e',
            service_url='http://127.0.0.1:9',
            allowed_serializers=allowed,
        )

    assert config(['tether.faas.*Code', 'JSONData']).allowed_serializers == [
        'tether.faas.*Code',
        'JSONData',
    ]
    with pytest.raises(pydantic.ValidationError, match='Invalid strategy-like'):
        config(['os.system', 'json'])
    with pytest.raises(pydantic.ValidationError, match='at least one code and one data'):
        config(['DillCode'])
