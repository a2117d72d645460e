"""The main demo: both runs agree, proxies move far fewer bytes, nothing is left behind."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.demo import combine, generate, normalise, run_demo


def _tether_demo_segments() -> list[str]:
    return [n for n in os.listdir('/dev/shm') if n.startswith('tether-demo')]


def _check(result: dict[str, Any], size_mb: int, tasks: int) -> None:
    assert result['identical'] is True
    assert result['shm_leftovers'] == 0
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
    before = _tether_demo_segments()
    result = run_demo(size_mb=1, tasks=3, workers=2, progress=False)
    _check(result, 1, 3)
    assert _tether_demo_segments() == before
    out = capsys.readouterr().out
    assert 'by value' in out
    assert 'by proxy' in out
    assert 'identical' in out


def test_cli_json() -> None:
    before = _tether_demo_segments()
    outcome = CliRunner().invoke(
        cli,
        ['demo', '--size-mb', '2', '--tasks', '2', '--workers', '1', '--json'],
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.output)
    _check(result, 2, 2)
    assert result['workers'] == 1
    assert _tether_demo_segments() == before


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
