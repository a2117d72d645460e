"""``tether faas diagnostic`` and its parts (the SDK's diagnostic helpers' names)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import pathlib
import stat
import sys

import pytest
from click.testing import CliRunner

from tether.faas import diagnostic as diag
from tether.faas.cli import faas

SECRET = 'very-secret-value-7f3a'


def printed(step: object) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        step()  # type: ignore[operator]
    return out.getvalue()


def test_cat_frames_a_file_and_shows_binary_bytes(tmp_path: pathlib.Path) -> None:
    f = tmp_path / 'x.log'
    f.write_bytes(b'first line\n\xff\xfe binary\x1e tail\n')
    lines = printed(diag.cat([f])).split('\n')
    assert lines[0] == f'cat {f}'
    assert lines[1] == '=' * len(str(f))
    assert lines[2] == ' | first line'
    assert lines[3] == ' | \ufffd\ufffd binary\x1e tail'  # one line: only newlines split
    assert lines[4] == '-' * len(str(f))


def test_cat_reports_a_missing_file(tmp_path: pathlib.Path) -> None:
    out = printed(diag.cat([tmp_path / 'gone.log']))
    assert f'No file named {tmp_path / "gone.log"}' in out


@pytest.mark.parametrize('max_bytes', [None, 0, -5, 4])
def test_cat_prints_the_tail(tmp_path: pathlib.Path, max_bytes: int | None) -> None:
    f = tmp_path / 'x.log'
    f.write_text('HEAD-0123456789-TAIL')
    body = printed(diag.cat([f], max_bytes=max_bytes)).split('\n')[2]
    assert body == (' | TAIL' if max_bytes == 4 else ' | HEAD-0123456789-TAIL')


def test_cat_wildcard_is_recursive(tmp_path: pathlib.Path) -> None:
    (tmp_path / 'a' / 'b').mkdir(parents=True)
    (tmp_path / 'a' / 'b' / 'deep.log').write_text('deep')
    (tmp_path / 'top.log').write_text('top')
    (tmp_path / 'skip.txt').write_text('skip')
    out = printed(diag.cat([f'{tmp_path}/**/*.log'], wildcard=True))
    assert ' | deep' in out
    assert ' | top' in out
    assert 'skip' not in out


def test_recent_endpoints_newest_first(tmp_path: pathlib.Path) -> None:
    for i, name in enumerate(['old', 'mid', 'new']):
        folder = tmp_path / name
        folder.mkdir()
        (folder / 'endpoint.log').write_text(name)
        os.utime(folder, (1000 + i, 1000 + i))
        os.utime(folder / 'endpoint.log', (1000 + i, 1000 + i))
    (tmp_path / 'empty').mkdir()
    os.utime(tmp_path / 'empty', (500, 500))
    names = [p.name for p in diag.get_recent_endpoints(tmp_path, [])]
    assert names == ['new', 'mid', 'old', 'empty']
    os.utime(tmp_path / 'old' / 'endpoint.log', (2000, 2000))  # a fresh log counts
    assert [p.name for p in diag.get_recent_endpoints(tmp_path, [], limit=2)] == ['old', 'new']
    assert [p.name for p in diag.get_recent_endpoints(tmp_path, ['mid', 'empty'])] == [
        'mid',
        'empty',
    ]
    assert diag.get_recent_endpoints(tmp_path / 'none', []) == []


def test_host_and_memory_reports() -> None:
    info = diag.python_runtime_host_info()
    assert f'Interpreter path: {sys.executable}' in info
    assert f'CPU core count: {os.cpu_count()}' in info
    assert f'HOME: {os.getenv("HOME")}' in info
    for text in (diag.mem_info(), diag.swap_info(), diag.disk_info('/')):
        assert 'iB ' in text
        assert 'total: ' in text


def test_redact_hides_secret_values_and_url_passwords() -> None:
    toml = f'name = "ep"\napi_token = "{SECRET}"\nbroker = "amqp://me:{SECRET}@host/"\n'
    out = diag.redact(toml)
    assert SECRET not in out
    assert 'name = "ep"' in out
    assert 'api_token = "REDACTED"' in out
    assert 'amqp://me:REDACTED@host/' in out
    js = diag.redact(f'{{"url": "http://h", "token": "{SECRET}", "nested": {{"password": 1}}}}')
    assert SECRET not in js
    assert '"url": "http://h"' in js
    assert '"password": "REDACTED"' in js


@pytest.fixture
def faas_home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    home = tmp_path / 'faas'
    monkeypatch.setenv('TETHER_FAAS_HOME', str(home))
    for i, name in enumerate(['alpha', 'beta', 'gamma']):
        folder = home / 'endpoints' / name
        folder.mkdir(parents=True)
        (folder / 'config.toml').write_text(
            f'engine = "process"\nworker_init = "export X={name}"\npassword = "{SECRET}"\n'
        )
        (folder / 'token').write_text(SECRET)
        (folder / 'endpoint.log').write_text(
            f'old line of {name}\n' * 200
            + f'broker amqp://user:{SECRET}@127.0.0.1:5672/\n'  # a log line with a password
            + f'LAST {name}\n'
        )
        for p in (folder, folder / 'config.toml', folder / 'token', folder / 'endpoint.log'):
            os.utime(p, (1000 + i, 1000 + i))
    (home / 'dev.json').write_text(f'{{"url": "http://127.0.0.1:1", "token": "{SECRET}"}}')
    return home


def test_the_command_prints_a_report_without_secrets(faas_home: pathlib.Path) -> None:
    result = CliRunner().invoke(faas, ['diagnostic', '--recent-endpoints', '2', '--log-kb', '1'])
    assert result.exit_code == 0, result.output
    out = result.output
    assert SECRET not in out  # configs redacted, token files never read
    for title in ('Python and host', 'memory', 'swap', 'disk', 'faas home folder'):
        assert f'== Diagnostic: {title} ==' in out
    assert 'LAST gamma' in out
    assert 'LAST beta' in out
    assert 'endpoint alpha' not in out  # only the two most recent
    assert 'worker_init = "export X=gamma"' in out
    assert out.count('old line of gamma') < 200  # a 1 KiB tail, not the whole log


def test_the_command_selects_endpoints_and_writes_gzip(
    faas_home: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    target = tmp_path / 'report.txt.gz'
    result = CliRunner().invoke(faas, ['diagnostic', '-e', 'alpha', '-o', str(target)])
    assert result.exit_code == 0, result.output
    assert f'written to {target}' in result.output
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    text = gzip.decompress(target.read_bytes()).decode()
    assert 'LAST alpha' in text
    assert 'LAST gamma' not in text
    assert SECRET not in text


def test_a_failing_section_does_not_lose_the_others() -> None:
    def broken() -> None:
        raise OSError('disk gone')

    out = io.StringIO()
    diag.write_report([('broken', broken), ('fine', lambda: print('ok'))], out)
    text = out.getvalue()
    assert 'failed: OSError: disk gone' in text
    assert '== Diagnostic: fine ==\nok' in text
