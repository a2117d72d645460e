"""The main demo: both runs agree, proxies move far fewer bytes, nothing is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.connectors.shared_memory import cleanup
from tether.demo import combine, generate, normalise, run_demo


def _segments(namespace: str) -> list[str]:
    return [n for n in os.listdir('/dev/shm') if n.startswith(f'tether-{namespace}-')]


def _check(result: dict[str, Any], size_mb: int, tasks: int) -> None:
    assert result['identical'] is True
    assert result['shm_leftovers'] == 0
    assert result['shm_namespace'].startswith('demo')
    assert _segments(result['shm_namespace']) == []
    assert result['size_mb'] == size_mb
    assert result['tasks'] == tasks
    value, proxy = result['runs']['value'], result['runs']['proxy']
    for run in (value, proxy):
        assert run['bytes_total'] == run['bytes_to_workers'] + run['bytes_from_workers']
        assert run['seconds'] > 0
    # By value, every array crosses the executor: tasks generated arrays come back,
    # go out again to be normalised, come back, and all go to the reducer.
    array = size_mb * (1 << 20)
    assert value['bytes_total'] >= (4 * tasks + 1) * array
    # By proxy, only small proxies cross it (a few kB per task).
    assert proxy['bytes_total'] < (2 * tasks + 1) * 4096
    assert value['bytes_total'] > 100 * proxy['bytes_total']
    assert result['bytes_ratio'] == pytest.approx(value['bytes_total'] / proxy['bytes_total'])


def test_run_demo_small(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_demo(size_mb=1, tasks=3, workers=2, progress=False)
    _check(result, 1, 3)
    out = capsys.readouterr().out
    assert 'by value' in out
    assert 'by proxy' in out
    assert 'identical' in out


def test_cli_json() -> None:
    outcome = CliRunner().invoke(
        cli,
        ['demo', '--size-mb', '2', '--tasks', '2', '--workers', '1', '--json'],
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.output)
    _check(result, 2, 2)
    assert result['workers'] == 1


def test_cli_rejects_bad_sizes() -> None:
    outcome = CliRunner().invoke(cli, ['demo', '--tasks', '0', '--json'])
    assert outcome.exit_code != 0
    assert 'at least 1' in outcome.output


def test_stages_work_on_proxies_as_on_arrays() -> None:
    from tether.store import Store

    arrays = [generate(i, 1000) for i in range(3)]
    expected = combine(*[normalise(a) for a in arrays])
    with Store('demo-stages') as store:
        proxies = [store.proxy(a, populate_target=False) for a in arrays]
        normalised = [store.proxy(normalise(p), populate_target=False) for p in proxies]
        got = combine(*normalised)
    assert isinstance(got, np.ndarray)
    assert np.array_equal(got, expected)


def test_cli_rejects_bad_namespace() -> None:
    outcome = CliRunner().invoke(cli, ['demo', '--namespace', 'a/b', '--json'])
    assert outcome.exit_code != 0
    assert 'invalid shared-memory namespace' in outcome.output


def test_ctrl_c_leaves_no_segments() -> None:
    """Interrupt the demo while proxies are in shared memory: it removes them all."""
    namespace = f'demotest{uuid.uuid4().hex[:8]}'
    # A shell may start background jobs with SIGINT ignored: reinstate Python's handler.
    launcher = (
        'import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); '
        'from tether.cli import main; main()'
    )
    args = ['demo', '--size-mb', '8', '--tasks', '8', '--namespace', namespace]
    proc = subprocess.Popen(
        [sys.executable, '-c', launcher, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
    )
    try:
        seen = 0
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            seen = len(_segments(namespace))
            if seen:
                break
            time.sleep(0.002)
        assert seen, 'the demo ended before any shared-memory segment was seen'
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        leftovers = _segments(namespace)
        cleanup(namespace)
    assert proc.returncode != 0, out
    assert b'Aborted' in out
    assert leftovers == []
