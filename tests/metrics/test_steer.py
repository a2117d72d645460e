"""A steering task server's Prometheus metrics, scraped while it runs tasks."""

from __future__ import annotations

import pathlib

import pytest

from tests.metrics._scrape import scrape, value
from tests.steer import _tasks
from tether._serve.metrics import MetricsOptions
from tether.steer import LocalTaskServer, PipeQueues
from tether.testing import wait_until
from tether.testing.steer import serving


def test_task_server_metrics_follow_its_tasks(tmp_path: pathlib.Path) -> None:
    queues = PipeQueues()
    server = LocalTaskServer(
        queues,
        [_tasks.add, _tasks.fail, _tasks.fail_once, _tasks.wait_for],
        num_workers=2,
        metrics=MetricsOptions(port=0),
    )
    with serving(server):
        wait_until(lambda: server.metrics_address is not None, message='the metrics endpoint')
        address = server.metrics_address
        assert address is not None
        assert address[0] == '127.0.0.1'
        marker = tmp_path / 'release'
        queues.send_inputs(str(marker), method='wait_for')
        # In flight: received, not answered.
        wait_until(
            lambda: value(scrape(address), 'tether_steer_tasks_by_method', method='wait_for') == 1,
            message='the waiting task to be counted',
        )
        assert value(scrape(address), 'tether_steer_tasks', state='running') == 1
        queues.send_inputs(1, 2, method='add')
        queues.send_inputs('boom', method='fail')
        queues.send_inputs(str(tmp_path / 'once'), method='fail_once', max_retries=1)
        results = [queues.get_result(timeout=60) for _ in range(3)]
        marker.touch()
        results.append(queues.get_result(timeout=60))
        assert sorted(r.success for r in results) == [False, True, True, True]
        text = scrape(address)
    assert (
        value(text, 'tether_server_info', kind='steer', name=text.split('name="')[1].split('"')[0])
        == 1
    )
    assert value(text, 'tether_requests_total', op='add') == 1
    assert value(text, 'tether_requests_total', op='wait_for') == 1
    assert value(text, 'tether_request_errors_total', op='fail') == 1
    assert value(text, 'tether_request_errors_total', op='fail_once') == 0  # retried, then fine
    assert value(text, 'tether_steer_tasks_total', state='received') == 4
    assert value(text, 'tether_steer_tasks_total', state='finished') == 4
    assert value(text, 'tether_steer_tasks_total', state='failed') == 1
    assert value(text, 'tether_steer_tasks_total', state='retried') == 1
    assert value(text, 'tether_steer_tasks', state='running') == 0
    assert value(text, 'tether_request_seconds_count', op='wait_for') == 1
    assert value(text, 'tether_request_bytes_total', op='add', direction='in') > 0


def test_task_server_metrics_are_off_by_default() -> None:
    queues = PipeQueues()
    server = LocalTaskServer(queues, [_tasks.add])
    assert not server.metrics_options.enabled
    with serving(server):
        queues.send_inputs(1, 2, method='add')
        assert queues.get_result(timeout=60).value == 3
        assert server.metrics_address is None


def test_task_server_metrics_refuse_an_open_bind_without_a_token() -> None:
    with pytest.raises(ValueError, match='token'):
        LocalTaskServer(PipeQueues(), [_tasks.add], metrics={'port': 0, 'bind': '0.0.0.0'})
