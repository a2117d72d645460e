"""The task server on tether's function service (``tether faas dev``)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from tests.faas.test_dev import Dev, dev, faas_home_module  # noqa: F401 (fixtures)
from tests.steer import _tasks
from tests.steer.conftest import serving
from tether.steer import PipeQueues
from tether.steer.task_server import FaaSTaskServer


@pytest.mark.slow
def test_faas_task_server(dev: Dev, tmp_path: pathlib.Path, store: Any) -> None:  # noqa: F811
    queues = PipeQueues(
        topics=['big'],
        proxystore_name={'big': store.name},
        proxystore_threshold={'big': 10_000},
    )
    methods = [_tasks.add, _tasks.fail_once, _tasks.nbytes]
    with serving(FaaSTaskServer(methods, queues, dev.info['endpoint_id'])):
        queues.send_inputs(2, 3, method='add')
        ok = queues.get_result(timeout=100)
        queues.send_inputs(str(tmp_path / 'm'), method='fail_once', max_retries=1)
        retried = queues.get_result(timeout=100)
        queues.send_inputs(1, method='nope')
        unknown = queues.get_result(timeout=100)
        # 20 MB: over the service's payload limit, but it travels by proxy.
        queues.send_inputs(b'z' * 20_000_000, method='nbytes', topic='big')
        big = queues.get_result('big', timeout=100)
    assert ok.value == 5, ok.failure_info
    assert retried.value == 'second attempt'
    assert retried.retries == 1
    assert not unknown.success
    assert big.value == 20_000_000, big.failure_info
    assert big.message_sizes['inputs'] < 10_000
