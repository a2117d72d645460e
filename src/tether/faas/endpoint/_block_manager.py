"""A manager inside one of an endpoint's blocks (the funcX paper's manager, one per node).

:func:`run_manager` is what the managers engine asks its provider's blocks to run (as a
Parsl app: one per node). It connects back to the endpoint (:mod:`._block_link`), runs a
pool of ``max_workers`` worker processes on its node (:class:`~._pool.ProcessPoolEngine`:
hand-off to a worker with the function warm, retries of a lost worker, time limits,
cancellation) and reports, over the link:

* ``('hello', {...})``: its capacity (workers and prefetch) and where it runs
  (:func:`~._parsl.block_info`: host, block, scheduler and job id);
* ``('stats', {...})``: its idle workers and warm functions, when they change;
* ``('handoff', ids)`` and ``('result', header, payload)``: as an engine's callbacks,
  each result's header naming the block;
* ``('idle',)``: it held no task for ``idle_timeout_s``; the endpoint answers ``('stop',)``
  when it may end (the endpoint keeps ``min_blocks``), and the Parsl app returns, so that
  Parsl cancels the idle block.

It reads ``('tasks', [Task, ...])``, ``('cancel', ids)`` and ``('stop',)``. When the
endpoint goes away it stops its workers and ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
import threading
import time
from typing import Any

__all__ = ['run_manager']

_STATS_S = 0.2
# Largest frame of tasks a manager reads from its (authenticated) endpoint.
_MAX_TASK_FRAME = 1 << 31


class _Manager:
    def __init__(self, link: Any, config: Any, idle_timeout: float, info: dict[str, str]) -> None:
        from tether.faas.endpoint._pool import ProcessPoolEngine

        self.link = link
        self.info = info
        self.idle_timeout = idle_timeout
        self.held: set[str] = set()
        self.lock = threading.Lock()
        self.last_busy = time.monotonic()
        self.done = threading.Event()
        self.pool = ProcessPoolEngine(config, self._handoff, self._result, {})

    def _handoff(self, task_ids: list[str]) -> None:
        with contextlib.suppress(OSError):
            self.link.send(('handoff', task_ids))

    def _result(self, header: dict[str, Any], payload: bytes) -> None:
        header['block'] = self.info
        with self.lock:
            self.held.discard(str(header.get('task_id')))
            self.last_busy = time.monotonic()
        with contextlib.suppress(OSError):
            self.link.send(('result', header, bytes(payload)))

    def report(self) -> None:
        """Send the pool's stats when they change; say ``idle`` once per idle spell."""
        last: dict[str, Any] = {}
        said_idle = False
        while not self.done.wait(_STATS_S):
            stats = self.pool.stats()
            now = {'idle': stats['idle'], 'warm': stats['warm'], 'cold': self.pool.cold_starts}
            try:
                if now != last:
                    self.link.send(('stats', now))
                    last = now
                with self.lock:
                    idle = not self.held and time.monotonic() - self.last_busy > self.idle_timeout
                    if not idle:
                        said_idle = False
                if idle and not said_idle:
                    self.link.send(('idle',))
                    said_idle = True
            except OSError:
                return

    def serve(self) -> None:
        """Read the endpoint's messages until ``stop`` or the link closes."""
        for message in self.link.messages():
            op = message[0]
            if op == 'tasks':
                tasks = message[1]
                with self.lock:
                    self.held.update(t.task_id for t in tasks)
                    self.last_busy = time.monotonic()
                self.pool.submit(tasks)
            elif op == 'cancel':
                self.pool.cancel(list(message[1]))
            elif op == 'stop':
                return


def run_manager(  # noqa: PLR0917 (a Parsl app's arguments)
    address: str, port: int, key_file: str, config_json: str, max_frame: int, launch: int
) -> dict[str, str]:
    """Run a manager for the endpoint at ``address``:``port`` until it says stop or goes
    away; returns where it ran. ``config_json``: the endpoint's configuration (no
    secrets: the link key is read from ``key_file``)."""
    from tether.faas._config import ComputeEndpointConfig
    from tether.faas.endpoint._block_link import connect_manager
    from tether.faas.endpoint._parsl import block_info

    config = ComputeEndpointConfig.model_validate_json(config_json)
    # The endpoint's import path (its workers import functions by reference from it).
    extra = json.loads(os.environ.get('TETHER_FAAS_SYS_PATH', '[]'))
    sys.path[:0] = [p for p in extra if p not in sys.path]
    key = pathlib.Path(key_file).read_bytes()
    # What the endpoint sends is tasks, as large as the service lets a payload be; the
    # endpoint proved the key, so its frames are bounded only against runaway sizes.
    link = connect_manager(address, port, key, max(max_frame, _MAX_TASK_FRAME))
    info = block_info()
    manager = _Manager(link, config, config.idle_timeout_s, info)
    reporter = threading.Thread(target=manager.report, name='tether-manager-stats', daemon=True)
    try:
        manager.pool.start()
        link.send(
            (
                'hello',
                {
                    'workers': config.max_workers,
                    'capacity': config.max_workers + config.worker_prefetch,
                    'block': info,
                    'launch': launch,
                },
            )
        )
        reporter.start()
        manager.serve()
    finally:
        manager.done.set()
        manager.pool.stop()
        link.close()
    return info
