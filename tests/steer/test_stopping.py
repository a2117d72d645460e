"""Stopping a task server: the kill signal while tasks run, and terminate().

The kill signal stops a server within its ``kill_timeout`` even while a task runs (the
task comes back failed, saying so); ``terminate()`` kills the workers with the server, so
none is left running under init (nor what a task started).
"""

from __future__ import annotations

import pathlib
import signal
from typing import Any

import psutil
import pytest

from tests.steer import _tasks
from tether.exceptions import KillSignalError
from tether.steer import LocalTaskServer
from tether.testing import wait_until
from tether.testing.steer import serving


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _workers(server: Any, n: int) -> list[int]:
    """The pids of the server's ``n`` worker processes, once they all run."""
    wait_until(
        lambda: len(psutil.Process(server.pid).children()) >= n,
        timeout=60,
        message='workers start',
    )
    return [p.pid for p in psutil.Process(server.pid).children()]


def test_kill_signal_stops_the_server_while_a_task_runs(
    make_queues: Any, tmp_path: pathlib.Path
) -> None:
    queues = make_queues()
    gate = tmp_path / 'gate'  # never opened: the task runs until it is stopped
    server = LocalTaskServer(queues, [_tasks.log_run], num_workers=1, kill_timeout=0)
    with serving(server):
        workers = _workers(server, 1)
        task_id = queues.send_inputs(str(tmp_path / 'log'), 'a', str(gate), method='log_run')
        wait_until(pathlib.Path(f'{gate}.started').exists, timeout=60, message='the task starts')
        queues.send_kill_signal()
        server.join(60)
        assert not server.is_alive(), 'the kill signal did not stop the server'
        assert server.exitcode == 0
        stopped = queues.get_result(timeout=60)
        assert stopped.task_id == task_id
        assert not stopped.success
        assert 'kill signal' in stopped.failure_info.exception
        with pytest.raises(KillSignalError):
            queues.get_result(timeout=60)
    assert not any(_running(p) for p in workers), 'the worker still runs'


def test_terminate_leaves_no_worker_running(tmp_path: pathlib.Path, make_queues: Any) -> None:
    queues = make_queues()
    gate, pidfile = tmp_path / 'gate', tmp_path / 'sleeper.pid'
    server = LocalTaskServer(queues, [_tasks.log_run, _tasks.start_sleeper], num_workers=2)
    with serving(server):
        workers = _workers(server, 2)
        queues.send_inputs(str(tmp_path / 'log'), 'a', str(gate), method='log_run')
        queues.send_inputs(str(pidfile), method='start_sleeper')
        wait_until(
            pathlib.Path(f'{gate}.started').exists, timeout=60, message='the first task starts'
        )
        wait_until(
            lambda: pidfile.exists() and pidfile.read_text(),
            timeout=60,
            message='the second starts',
        )
        sleeper = int(pidfile.read_text())
        assert all(_running(p) for p in [*workers, sleeper])
        server.terminate()
        server.join(60)
        assert server.exitcode == -signal.SIGTERM
        # Killed with the server: reaped by init at once, never left running under it.
        wait_until(
            lambda: not any(_running(p) for p in [*workers, sleeper]),
            timeout=60,
            message='the orphaned workers (and what their tasks started) to end',
        )
