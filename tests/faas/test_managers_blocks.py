"""The managers engine with a ``[provider]``: managers in the provider's blocks.

Each manager runs in a block (a Parsl HTEX slot: a process on this host with the local
provider, a Slurm job with the Slurm provider), connects back to the endpoint over the
authenticated block link and runs the tasks routed to it; blocks are asked for while
tasks wait; a manager that goes away has its tasks run again elsewhere, then failed with
``WorkerLostError``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.faas import _block_tasks, _slurm_tasks
from tether.exceptions import AuthenticationError, ProtocolError
from tether.faas import ComputeEndpointConfig
from tether.faas.endpoint._block_link import accept_manager, connect_manager
from tether.faas.endpoint._managers import ManagersEngine
from tether.faas.endpoint.engine import make_task, task_value
from tether.faas.endpoint.providers import LocalProvider, SlurmProvider
from tether.testing import _faas_tasks, wait_until
from tether.testing.faas import Collector

# Parsl notices a lost block within seconds, not minutes.
_FAST = {
    'heartbeat_period': 1,
    'heartbeat_threshold': 3,
    'strategy_period': 0.5,
    'status_polling_interval': 0.5,
}


def config(provider: object, **options: object) -> ComputeEndpointConfig:
    return ComputeEndpointConfig.model_validate(
        {
            'name': 'blocks',
            'endpoint_id': 'blocks',
            'service_url': 'http://127.0.0.1:1',
            'engine': 'managers',
            'max_workers': 1,
            'worker_prefetch': 0,
            'idle_timeout_s': 2.0,
            'max_retries': 1,
            'provider': provider,
            **options,
        }
    )


@pytest.fixture(scope='module')
def local_engine() -> Iterator[tuple[ManagersEngine, Collector]]:
    c = Collector()
    provider = LocalProvider(
        init_blocks=0, min_blocks=0, max_blocks=2, address='127.0.0.1', **_FAST
    )
    engine = ManagersEngine(config(provider), c.on_handoff, c.on_result)
    engine.start()  # one engine (and Parsl) for the module's tests: each ends idle
    try:
        yield engine, c
    finally:
        engine.stop()


def test_tasks_run_on_managers_in_blocks_asked_for_while_tasks_wait(
    local_engine: tuple[ManagersEngine, Collector], tmp_path: pathlib.Path
) -> None:
    engine, c = local_engine
    # Two tasks that run until released: each needs a manager of its own (one worker,
    # no prefetch), so the endpoint asks for both blocks (max_blocks = 2).
    marker = tmp_path / 'release'
    started = [tmp_path / 'a', tmp_path / 'b']
    tasks = [make_task(_faas_tasks.wait_for_file, str(s), str(marker)) for s in started]
    engine.submit(tasks)
    wait_until(
        lambda: all(s.exists() for s in started), timeout=120, message='both tasks to start'
    )
    assert len(engine._managers) == 2
    assert engine.stats()['workers'] == 2
    marker.touch()
    for header, _ in c.take(2).values():
        assert header['status'] == 'success', header
        assert 'block_id' in header['block']
    assert {t.task_id for t in tasks} <= set(c.handed)
    # The managers are in the blocks, not on the endpoint: a task's parent is one.
    task = make_task(_block_tasks.where)
    engine.submit([task])
    header, payload = c.take(1)[task.task_id]
    assert task_value(header, payload)['manager'] != str(os.getpid())


def test_a_lost_manager_gives_a_retry_then_worker_lost(
    local_engine: tuple[ManagersEngine, Collector], tmp_path: pathlib.Path
) -> None:
    engine, c = local_engine
    once, always = tmp_path / 'once', tmp_path / 'always'
    survivor = make_task(_block_tasks.kill_manager, str(once), 1)
    doomed = make_task(_block_tasks.kill_manager, str(always), 5)
    engine.submit([survivor, doomed])
    results = c.take(2)
    header, payload = results[survivor.task_id]
    assert header['status'] == 'success', header
    first, second = once.read_text().split()
    assert task_value(header, payload) == second != first
    assert len(header['retries']) == 1
    assert 'ManagerLost' in header['retries'][0]['reason']
    header, _ = results[doomed.task_id]
    assert header['status'] == 'failed'
    assert header['error']['type'] == 'WorkerLostError'
    assert 'max_retries = 1' in header['error']['message']
    assert len(header['retries']) == 2  # run twice (max_retries = 1), lost each time
    assert len(always.read_text().split()) == 2


def test_idle_managers_end(local_engine: tuple[ManagersEngine, Collector]) -> None:
    engine, c = local_engine
    task = make_task(_block_tasks.where)
    engine.submit([task])
    c.take(1)
    # Idle past idle_timeout_s (and min_blocks = 0): the managers end (init_blocks = 0).
    wait_until(lambda: not engine._managers, timeout=60, message='the idle manager to end')
    # A new task asks for a new block.
    task = make_task(_block_tasks.where)
    engine.submit([task])
    header, _ = c.take(1)[task.task_id]
    assert header['status'] == 'success'


def test_a_manager_results_and_hand_offs_count_only_for_tasks_it_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A manager that proved the key but reports a result (or a hand-off) for a task it
    # was never given, or a result twice: the endpoint drops those (logging them) and
    # takes the rest.
    c = Collector()
    provider = LocalProvider(init_blocks=0, min_blocks=0, max_blocks=1, address='127.0.0.1')
    engine = ManagersEngine(config(provider, max_retries=0), c.on_handoff, c.on_result)
    engine.start()
    blocks = engine._blocks
    link = connect_manager(
        '127.0.0.1', blocks._server.getsockname()[1], blocks._key, blocks.max_frame
    )
    try:
        link.send(('hello', {'workers': 2, 'capacity': 2, 'block': {'host': 'rogue'}}))
        wait_until(lambda: len(engine._managers) == 1, timeout=120, message='the manager to join')
        first, second = make_task(_block_tasks.where), make_task(_block_tasks.where)
        engine.submit([first, second])
        given: list[str] = []
        while len(given) < 2:
            op, *rest = link.recv()
            if op == 'tasks':
                given.extend(t.task_id for t in rest[0])
        assert sorted(given) == sorted([first.task_id, second.task_id])

        def result(task_id: str, value: bytes) -> None:
            link.send(('result', {'task_id': task_id, 'status': 'success'}, value))

        with caplog.at_level('WARNING', logger='tether.faas.endpoint._managers'):
            link.send(('handoff', ['never-given', first.task_id]))
            result('never-given', b'forged')
            result(first.task_id, b'one')
            result(first.task_id, b'again')
            result(second.task_id, b'two')
            # One reader takes the link's messages in order: the second task's result
            # comes after the two dropped ones were seen.
            results = c.take(2, timeout=60)
        assert {k: v[1] for k, v in results.items()} == {
            first.task_id: b'one',
            second.task_id: b'two',
        }
        assert c.results.empty()
        assert c.handed == [first.task_id]
        assert any('dropped 1 hand-offs' in r.getMessage() for r in caplog.records)
        dropped = [r.getMessage() for r in caplog.records if 'dropped a result' in r.getMessage()]
        assert len(dropped) == 2
        assert "'never-given'" in dropped[0]
        assert repr(first.task_id) in dropped[1]
        assert 'host=rogue' in dropped[0]
    finally:
        link.close()
        engine.stop()


def test_the_block_link_refuses_a_peer_without_the_key() -> None:
    server = socket.create_server(('127.0.0.1', 0))
    port = server.getsockname()[1]
    import threading

    outcome: list[BaseException] = []

    def endpoint_side() -> None:
        sock, _ = server.accept()
        try:
            accept_manager(sock, b'k' * 32, 1 << 20)
        except BaseException as e:
            outcome.append(e)
        finally:
            sock.close()

    thread = threading.Thread(target=endpoint_side)
    thread.start()
    with pytest.raises((EOFError, OSError)):  # the endpoint hangs up on a wrong key
        connect_manager('127.0.0.1', port, b'x' * 32, 1 << 20)
    thread.join(30)
    server.close()
    assert isinstance(outcome[0], AuthenticationError)


def test_the_block_link_closes_on_a_frame_over_the_limit() -> None:
    server = socket.create_server(('127.0.0.1', 0))
    port = server.getsockname()[1]
    import threading

    key = b'k' * 32
    outcome: list[object] = []

    def endpoint_side() -> None:
        sock, _ = server.accept()
        link = accept_manager(sock, key, 1024)
        try:
            outcome.append(link.recv())
            outcome.append(link.recv())
        except BaseException as e:
            outcome.append(e)
        finally:
            link.close()

    thread = threading.Thread(target=endpoint_side)
    thread.start()
    link = connect_manager('127.0.0.1', port, key, 1024)
    link.send(('hello', {'workers': 1}))
    link.send(('result', {}, b'x' * 2048))
    thread.join(30)
    link.close()
    server.close()
    assert outcome[0] == ('hello', {'workers': 1})
    assert isinstance(outcome[1], ProtocolError)
    assert 'over the limit of 1024' in str(outcome[1])


def _slurm_up() -> bool:
    if shutil.which('sinfo') is None:
        return False
    out = subprocess.run(['sinfo', '-h', '-o', '%t'], capture_output=True, text=True, check=False)
    return 'idle' in out.stdout.replace('mix', 'idle')


@pytest.mark.slow
def test_managers_in_slurm_jobs(tmp_path: pathlib.Path) -> None:
    if not _slurm_up():
        pytest.fail('no idle Slurm node: run `make services` (scripts/services.sh starts one)')
    c = Collector()
    provider = SlurmProvider(
        partition='debug',
        walltime='00:10:00',
        exclusive=False,
        max_blocks=2,
        address='127.0.0.1',
        **_FAST,
    )
    engine = ManagersEngine(config(provider), c.on_handoff, c.on_result)
    engine.start()
    try:
        task = make_task(_slurm_tasks.job_id)
        engine.submit([task])
        header, payload = c.take(1, timeout=120)[task.task_id]
        job = task_value(header, payload)
        assert job.isdigit()
        assert header['block']['scheduler'] == 'slurm'
        assert header['block']['job_id'] == job
        # scancel under a running task: it runs again in a new block (a new job).
        log = tmp_path / 'scancel.log'
        task = make_task(_slurm_tasks.end_own_job, 'scancel', str(log), 1)
        engine.submit([task])
        header, payload = c.take(1, timeout=180)[task.task_id]
        assert header['status'] == 'success', header
        first, second = log.read_text().split()
        assert task_value(header, payload) == second != first
        assert len(header['retries']) == 1
    finally:
        engine.stop()
