"""A task's time limit counts from when it starts on its worker (docs/faas.md): a worker
still starting (a new interpreter, a container) does not spend its first task's limit."""

from __future__ import annotations

import dataclasses
import pathlib
import shlex
import sys

from tests.faas import _lifecycle_tasks, _tasks
from tests.faas.conftest import wait_for
from tests.faas.test_engine import Collector, engine_config, task
from tether.faas.endpoint._pool import ProcessPoolEngine


def _gated(waiting: pathlib.Path, gate: pathlib.Path) -> dict[str, str]:
    """An environment whose interpreter starts only once ``gate`` exists (it touches
    ``waiting`` first)."""
    script = (
        f'touch {shlex.quote(str(waiting))}; '
        f'while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.01; done; exec "$0" "$@"'
    )
    return {'command': f'sh -c {shlex.quote(script)} {{python}}', 'python': sys.executable}


def test_a_worker_slow_to_start_does_not_spend_its_first_tasks_limit(
    tmp_path: pathlib.Path,
) -> None:
    waiting, gate = tmp_path / 'waiting', tmp_path / 'gate'
    config = engine_config(max_workers=2, environments={'gated': _gated(waiting, gate)})
    c = Collector()
    engine = ProcessPoolEngine(config, c.handoff, c.result)
    engine.start()
    started, never = tmp_path / 'started', tmp_path / 'never'
    try:
        gated = dataclasses.replace(task(_tasks.square, 3), timeout=0.5, environment='gated')
        engine.submit([gated])
        wait_for(waiting.exists, 60, 'the gated worker to be starting')
        # A task of the default environment, handed over after the gated one, runs out
        # its limit of the same length: the gated task has waited at least as long.
        stuck = task(_lifecycle_tasks.block_until, str(started), str(never))
        engine.submit([dataclasses.replace(stuck, timeout=0.5)])
        header, _ = c.results.get(timeout=60)
        assert (header['task_id'], header['status']) == (stuck.task_id, 'failed')
        assert header['error']['type'] == 'TaskTimeoutError'
        gate.touch()
        assert c.take(1) == {gated.task_id: 9}
    finally:
        gate.touch()
        never.touch()
        engine.stop()


def test_a_worker_that_never_starts_is_given_up_on(tmp_path: pathlib.Path) -> None:
    waiting, gate = tmp_path / 'waiting', tmp_path / 'gate'  # the gate stays shut
    config = engine_config(
        max_workers=1,
        max_retries=1,
        worker_start_timeout_s=0.2,
        environments={'gated': _gated(waiting, gate)},
    )
    c = Collector()
    engine = ProcessPoolEngine(config, c.handoff, c.result)
    engine.start()
    try:
        gated = dataclasses.replace(task(_tasks.square, 3), environment='gated')
        engine.submit([gated])
        header, _ = c.results.get(timeout=60)  # two workers tried, neither started
        assert (header['task_id'], header['status']) == (gated.task_id, 'failed')
        assert header['error']['type'] == 'WorkerLostError'
        assert (
            'did not start within 0.2 s (worker_start_timeout_s), 2 times'
            in (header['error']['message'])
        )
        assert [r['reason'] for r in header['retries']] == ['worker did not start'] * 2
    finally:
        engine.stop()
