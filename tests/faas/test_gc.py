"""The service process's garbage-collector tuning (``gc_young_threshold``)."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import uuid

import pytest

from tests.faas.conftest import AMQP
from tether.exceptions import ConfigError
from tether.faas._config import ServiceConfig

_SETTINGS = 'gc.get_threshold()[0], gc.get_freeze_count() > 0'
_REPORT = f'print({_SETTINGS})'
_PROBE = (
    'import gc, sys; from tether.faas._server import tune_gc; '
    f'tune_gc(int(sys.argv[1])); {_REPORT}'
)
# ``tether faas serve`` as it runs, with a thread beside it that, once told on stdin
# (after the command's ready line), reports the collector's settings of the process.
_SERVE = (
    'import gc, sys, threading\n'
    'def report():\n'
    '    sys.stdin.readline()\n'
    f'    print({_SETTINGS}, flush=True)\n'
    'threading.Thread(target=report, daemon=True).start()\n'
    'from tether.cli import main\n'
    "sys.argv = ['tether', 'faas', 'serve', '--config', sys.argv[1], '--json']\n"
    'main()\n'
)


def _python(code: str, *args: str) -> str:
    """The last line ``code`` prints in a fresh interpreter (which must succeed)."""
    out = subprocess.run(
        [sys.executable, '-c', code, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_tune_gc_raises_the_young_threshold_and_freezes_startup_objects() -> None:
    assert _python(_PROBE, '20000') == '20000 True'


def test_zero_leaves_the_collector_alone() -> None:
    assert _python(_PROBE, '0') == _python(f'import gc; {_REPORT}')


@pytest.mark.parametrize(('setting', 'expected'), [('', '20000 True'), ('1234', '1234 True')])
def test_tether_faas_serve_tunes_its_collector(
    tmp_path: pathlib.Path, pg_url: str, queue_prefix: str, setting: str, expected: str
) -> None:
    config = tmp_path / 'service.toml'
    extra = f'gc_young_threshold = {setting}\n' if setting else ''
    config.write_text(
        f'[service]\nport = 0\ndatabase = "{pg_url}"\nbroker = "{AMQP}"\n'
        f'queue_prefix = "{queue_prefix}-gc-{uuid.uuid4().hex[:6]}"\n{extra}'
    )
    proc = subprocess.Popen(
        [sys.executable, '-c', _SERVE, str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        ready = proc.stdout.readline()  # the service listens (its JSON line)
        assert ready.startswith('{'), proc.communicate(timeout=30)[1]
        proc.stdin.write('report\n')
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


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
