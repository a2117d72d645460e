"""A task's life at the service and its endpoint (issue 25): submitted once, run once,
results within the broker's limits, deleted endpoints, one id per function, cancellation
and time limits. Real PostgreSQL, RabbitMQ and endpoints."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user
from tether.exceptions import TaskPending
from tether.faas import Client, Executor
from tether.faas._server import ServiceThread


def result_of(client: Client, task_id: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.get_result(task_id)
        except TaskPending:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# 7. One function, one id --------------------------------------------------------------


def test_client_and_executor_give_a_function_one_id(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    other_user, other_token = new_user(prod_service)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        assert client.register_function(_tasks.square) == fid
        ep = start_endpoint(prod_service, user, allowed_functions=[fid])
        # The Executor has a Client of its own: it registers the function again.
        with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
            assert ex.client.function_id_for(_tasks.square) == fid
            assert ex.submit(_tasks.square, 7).result(timeout=60) == 49
    # Another user's registration of the same function is another function.
    with Client(prod_service.url, other_token) as client:
        assert client.register_function(_tasks.square) != fid
    assert other_user != user
