"""The task server on tether's function service (``tether faas dev``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from tests.faas.test_dev import ROOT, Dev, dev, faas_home_module  # noqa: F401 (fixtures)
from tests.steer import _tasks
from tether.steer import PipeQueues
from tether.steer.task_server import FaaSTaskServer
from tether.testing.steer import serving


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


CAMPAIGN = """
import sys

from tether.steer import PipeQueues
from tether.steer.task_server import FaaSTaskServer


def triple(x):  # defined in the campaign's own script: __main__
    return 3 * x


class Scale:  # a callable object of a class of __main__
    __name__ = 'scale'

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return self.factor * x


if __name__ == '__main__':
    queues = PipeQueues()
    server = FaaSTaskServer([triple, Scale(5)], queues, sys.argv[1], kill_timeout=None)
    server.start()
    try:
        queues.send_inputs(7, method='triple')
        queues.send_inputs(7, method='scale')
        for _ in range(2):
            result = queues.get_result(timeout=100)
            assert result.success, result.failure_info
            print(result.method, result.value)
    finally:
        queues.send_kill_signal()
        server.join(100)
"""


@pytest.mark.slow
def test_methods_of_the_campaign_script_run(dev: Dev, tmp_path: pathlib.Path) -> None:  # noqa: F811
    script = tmp_path / 'campaign.py'
    script.write_text(CAMPAIGN)
    proc = subprocess.run(
        [sys.executable, str(script), dev.info['endpoint_id']],
        capture_output=True,
        text=True,
        timeout=110,
        env={**os.environ, 'PYTHONPATH': str(ROOT)},
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(proc.stdout.split('\n')[:2]) == ['scale 35', 'triple 21'], proc.stdout
