"""The function service's Prometheus metrics, scraped while a user submits tasks."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faas.conftest import AgentThread, new_user, start_endpoint, wait_for  # noqa: F401
from tests.metrics._scrape import scrape, status_of, value
from tether._serve.metrics import MetricsOptions
from tether.faas import Executor, ServiceConfig
from tether.faas._server import ServiceThread


def _double(x: int) -> int:
    return 2 * x


def test_service_metrics_move_with_tasks(
    tmp_path: Path,
    start_endpoint: Callable[..., AgentThread],  # noqa: F811
) -> None:
    token = tmp_path / 'm.token'
    token.write_text('faas-metrics')
    config = ServiceConfig(
        port=0,
        database='sqlite://',
        broker='memory://',
        metrics=MetricsOptions(port=0, token_file=str(token)),
    )
    with ServiceThread(config) as st:
        assert st.metrics is not None
        address = st.metrics.address()
        assert address is not None
        assert status_of(address) == 401
        user_id, user_token = new_user(st)
        agent = start_endpoint(st, user_id)
        with Executor(agent.config.endpoint_id, service_url=st.url, token=user_token) as ex:
            assert [f.result(timeout=120) for f in [ex.submit(_double, i) for i in range(3)]] == [
                0,
                2,
                4,
            ]
        request = urllib.request.Request(f'{st.url}/v1/whoami')
        request.add_header('Authorization', 'Bearer not-a-user')
        with pytest.raises(urllib.error.HTTPError, match='401'):
            urllib.request.urlopen(request, timeout=30)
        text = scrape(address, 'faas-metrics')
        # Tasks by state: counted when a scrape asks (the first scrape may show the last
        # counts), over every user.
        wait_for(
            lambda: (
                value(scrape(address, 'faas-metrics'), 'tether_faas_tasks', state='success') == 3
            ),
            60,
            'the three tasks counted as succeeded',
        )
        states = scrape(address, 'faas-metrics')
        assert value(states, 'tether_faas_tasks', state='running') == 0
        assert value(states, 'tether_faas_tasks', state='waiting-for-ep') == 0
    assert value(text, 'tether_server_info', kind='faas', name='service') == 1.0
    assert value(text, 'tether_requests_total', op='POST /v1/functions') == 1
    assert value(text, 'tether_request_bytes_total', op='POST /v1/functions', direction='in') > 0
    assert value(text, 'tether_requests_total', op='POST /v1/task_groups') >= 1
    assert value(text, 'tether_request_seconds_count', op='POST /v1/task_groups') >= 1
    assert value(text, 'tether_request_errors_total', op='GET /v1/whoami') == 1
    assert value(text, 'tether_faas_endpoints_connected') == 1
    assert user_id not in text
    assert agent.config.endpoint_id not in text


def test_service_metrics_off_by_default() -> None:
    with ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')) as st:
        assert st.metrics is not None
        assert st.metrics.metrics is None
        assert st.metrics.address() is None
        with urllib.request.urlopen(f'{st.url}/health', timeout=30) as r:
            json.loads(r.read())


def test_endpoint_agent_metrics_count_tasks_and_workers(
    start_endpoint: Callable[..., AgentThread],  # noqa: F811
) -> None:
    with ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')) as st:
        user_id, user_token = new_user(st)
        agent = start_endpoint(st, user_id, metrics=MetricsOptions(port=0))
        address = agent.agent.metrics.address()
        assert address is not None
        before = scrape(address)
        assert value(before, 'tether_faas_connected') == 1
        with Executor(agent.config.endpoint_id, service_url=st.url, token=user_token) as ex:
            assert [f.result(timeout=120) for f in [ex.submit(_double, i) for i in range(4)]] == [
                0,
                2,
                4,
                6,
            ]
        after = scrape(address)
    assert value(after, 'tether_server_info', kind='faas-endpoint', name='ep') == 1.0
    assert value(after, 'tether_faas_results_total') == 4
    assert value(after, 'tether_faas_workers', state='workers') >= 1
    assert value(after, 'tether_faas_tasks', state='running') == 0
