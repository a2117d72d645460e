"""The Parsl task server starts its workers with its kernel, not at Parsl's first poll.

Parsl's job-status poller first polls before the kernel has its executors, then every
``strategy_period``; ``scale_out_now`` makes the first scaling poll at once (Colmena's
tests give a Parsl task server 10 s in all). Here the period is ten minutes, so a block
exists, and a task runs, only through that first poll.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import pytest

from tether.plugins.parsl import local_config, make_app, start_kernel, stop_kernel
from tether.steer.task_server.parsl import scale_out_now


def test_initial_block_starts_with_the_kernel(tmp_path: pathlib.Path) -> None:
    config = local_config(workers=1, run_dir=str(tmp_path), strategy='none')
    config.strategy_period = 600
    dfk = start_kernel(config)
    try:
        scale_out_now(dfk)
        executor = dfk.executors['htex']
        assert len(executor.blocks_to_job_id) == 1
        # The poller's own polls (serialized with that one) add no second block.
        dfk.job_status_poller.callback()
        assert len(executor.blocks_to_job_id) == 1
        # A stdlib function: the workers cannot import this test module.
        assert make_app(dfk, abs)(-42).result(timeout=120) == 42
    finally:
        stop_kernel(dfk)


class _Poller:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.cb_args = ('arg',)
        self.error = error

    def callback(self, *args: Any) -> None:
        self.calls.append(args)
        if self.error is not None:
            raise self.error


class _Kernel:
    def __init__(self, poller: Any) -> None:
        self.job_status_poller = poller


def test_scale_out_now_without_a_poller_and_on_error(caplog: pytest.LogCaptureFixture) -> None:
    scale_out_now(object())  # no poller (another kernel type): nothing to do
    scale_out_now(_Kernel(None))
    poller = _Poller()
    scale_out_now(_Kernel(poller))
    assert poller.calls == [('arg',)]
    poller.callback('again')  # the wrapped callback still reaches the original
    assert poller.calls[-1] == ('again',)
    failing = _Poller(RuntimeError('provider down'))
    with caplog.at_level(logging.ERROR, logger='tether.steer.task_server.parsl'):
        scale_out_now(_Kernel(failing))  # logged; the poller's next tick retries
    assert 'first scaling poll failed' in caplog.text
    assert failing.calls == [('arg',)]
