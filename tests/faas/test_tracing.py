"""A function-service task's lifetime as an OpenTelemetry trace (see tests/tracing)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.faas import _tasks as faas_tasks
from tests.faas.conftest import new_user
from tether.faas import Executor
from tether.faas._server import ServiceThread


def test_a_faas_tasks_lifetime_is_a_trace(
    spans: InMemorySpanExporter, dev_service: ServiceThread, start_endpoint: Any
) -> None:
    user, token = new_user(dev_service)
    agent = start_endpoint(dev_service, user)
    with Executor(agent.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        future = ex.submit(faas_tasks.add, 1, 2)
        assert future.result(timeout=60) == 3
    (root,) = [s for s in spans.get_finished_spans() if s.name == 'tether.faas.task']
    assert root.attributes['tether.task'] == future.task_id
    stages = {s.attributes['tether.stage.to'] for s in spans.get_finished_spans() if s.parent}
    assert {'service_received', 'worker_end', 'client_received'} <= stages
