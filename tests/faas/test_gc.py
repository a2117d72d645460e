"""The service process's garbage-collector tuning (``gc_young_threshold``)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tether.exceptions import ConfigError
from tether.faas._config import ServiceConfig

_PROBE = (
    'import gc, sys; from tether.faas._server import tune_gc; '
    'tune_gc(int(sys.argv[1])); print(gc.get_threshold()[0], gc.get_freeze_count() > 0)'
)


def _probe(threshold: int) -> str:
    out = subprocess.run(
        [sys.executable, '-c', _PROBE, str(threshold)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


def test_tune_gc_raises_the_young_threshold_and_freezes_startup_objects() -> None:
    assert _probe(20_000) == '20000 True'


def test_zero_leaves_the_collector_alone() -> None:
    untouched = subprocess.run(
        [
            sys.executable,
            '-c',
            'import gc; print(gc.get_threshold()[0], gc.get_freeze_count() > 0)',
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert _probe(0) == untouched


# ``tether faas serve`` with the service itself replaced by a stand-in that reports the
# collector's settings: what the command set up before it would have started serving.
_SERVE = (
    'import gc, sys; import tether.faas._server as server\n'
    'async def report(config, stop, ready=None, on_metrics=None):\n'
    '    print(gc.get_threshold()[0], gc.get_freeze_count() > 0)\n'
    'server.serve = report\n'
    'from tether.cli import main\n'
    "sys.argv = ['tether', 'faas', 'serve', '--config', sys.argv[1]]\n"
    'main()\n'
)


@pytest.mark.parametrize(('setting', 'expected'), [('', '20000 True'), ('1234', '1234 True')])
def test_tether_faas_serve_tunes_its_collector(
    tmp_path: pathlib.Path, setting: str, expected: str
) -> None:
    config = tmp_path / 'service.toml'
    extra = f'gc_young_threshold = {setting}\n' if setting else ''
    config.write_text(f'[service]\nport = 0\n{extra}')
    out = subprocess.run(
        [sys.executable, '-c', _SERVE, str(config)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == expected


def test_default_and_validation() -> None:
    assert ServiceConfig().gc_young_threshold == 20_000
    with pytest.raises(ValueError, match='gc_young_threshold'):
        ServiceConfig(gc_young_threshold=-1)


def test_toml_setting(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'service.toml'
    path.write_text('[service]\ngc_young_threshold = 0\n')
    assert ServiceConfig.from_toml(path).gc_young_threshold == 0
    path.write_text('[service]\ngc_young_threshold = "many"\n')
    with pytest.raises(ConfigError, match='gc_young_threshold'):
        ServiceConfig.from_toml(path)
