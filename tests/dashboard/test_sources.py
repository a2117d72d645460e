"""The dashboard's sources without a browser: its configuration, the metrics parser and
scraper against real servers (and unreachable ones), the function service reader, the
result files, and the command."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard.conftest import Stack
from tether.dashboard import DashboardConfig, MetricsTarget, load_config, parse_metrics
from tether.dashboard._faas import FaasReader, filter_tasks
from tether.dashboard._metrics import Scraper, mean_latency, rate
from tether.dashboard._runs import bench_runs, steer_records, steer_series
from tether.exceptions import ConfigError, FaasAuthenticationError, FaasConnectionError


def test_config_file_and_options(tmp_path: Path) -> None:
    path = tmp_path / 'dashboard.toml'
    path.write_text(
        '[dashboard]\nport = 0\nsteer_dirs = ["a"]\n'
        '[[dashboard.metrics]]\nurl = "http://127.0.0.1:9101"\n'
    )
    config = load_config(path, steer_dirs=('b',), metrics=[{'url': 'http://127.0.0.1:9/m'}])
    assert config.steer_dirs == ['a', 'b']
    assert [t.url for t in config.metrics] == [
        'http://127.0.0.1:9101/metrics',
        'http://127.0.0.1:9/m',
    ]
    assert config.metrics[0].name == '127.0.0.1:9101'
    assert config.host == '127.0.0.1'


@pytest.mark.parametrize(
    ('text', 'match'),
    [
        ('[dashboard]\nhost = "0.0.0.0"\nkey = ""\n', 'needs an access key'),
        ('[dashboard]\nunknown = 1\n', 'unknown'),
        ('[[dashboard.metrics]]\nurl = "ftp://x"\n', 'http'),
        ('[dashboard\n', 'cannot read'),
        (
            '[[dashboard.metrics]]\nurl = "http://a:1"\nname = "x"\n'
            '[[dashboard.metrics]]\nurl = "http://b:1"\nname = "x"\n',
            'same name',
        ),
    ],
)
def test_bad_configs_are_refused(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / 'bad.toml'
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(path)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match='cannot read'):
        load_config('/nonexistent/dashboard.toml')


def test_scraper_reads_a_node_server_and_reports_a_dead_one(stack: Stack) -> None:
    targets = [
        MetricsTarget(url=stack.node_metrics, name='node'),
        MetricsTarget(url='http://127.0.0.1:1/metrics', name='dead'),
    ]
    scraper = Scraper(targets, 0.2, 10)

    async def twice() -> None:
        await scraper.scrape_all()
        c = stack.node.connector()
        try:
            c.get(c.put(b'y' * 100))
        finally:
            c.close()
        await scraper.scrape_all()
        await scraper.close()

    asyncio.run(twice())
    node = scraper.latest('node')
    assert node is not None
    assert not node.error
    assert node.info()['kind'] == 'node'
    assert node.by('tether_requests_total', 'op')['put'] >= 1
    assert 'put' in mean_latency(node)
    xs, ys = rate(list(scraper.history['node']), 'tether_requests_total')
    assert len(xs) == 1
    assert ys[0] > 0
    dead = scraper.latest('dead')
    assert dead is not None
    assert 'ConnectError' in dead.error


def test_parse_refuses_what_is_not_metrics() -> None:
    assert parse_metrics('# TYPE a counter\na_total{op="x"} 3\n') == [
        ('a_total', {'op': 'x'}, 3.0)
    ]
    with pytest.raises(ValueError):  # noqa: PT011 - prometheus_client's own error
        parse_metrics('<html>not metrics</html>\n')


def test_faas_reader_with_tokens(stack: Stack) -> None:
    async def read(token: str | None) -> list[dict[str, object]]:
        reader = FaasReader(stack.service.url, token)
        try:
            return await reader.tasks()
        finally:
            await reader.close()

    mine = asyncio.run(read(stack.token_a))
    assert {t['task_id'] for t in mine} >= set(stack.tasks_a.values())
    theirs = asyncio.run(read(stack.token_b))
    assert not {t['task_id'] for t in theirs} & set(stack.tasks_a.values())
    with pytest.raises(FaasAuthenticationError, match='no token'):
        asyncio.run(read(None))
    with pytest.raises(FaasAuthenticationError, match='401'):
        asyncio.run(read('tfu-not-a-token'))

    async def unreachable() -> None:
        reader = FaasReader('http://127.0.0.1:1', 'x')
        try:
            await reader.whoami()
        finally:
            await reader.close()

    with pytest.raises(FaasConnectionError, match='unreachable'):
        asyncio.run(unreachable())
    failed = filter_tasks(mine, state='failed')
    assert [t['task_id'] for t in failed] == [stack.tasks_a['failing']]
    assert filter_tasks(mine, function='CHATTY_then') == failed


def test_result_files(stack: Stack, tmp_path: Path) -> None:
    records = steer_records(str(stack.steer_dir))
    assert len(records) == 12
    flight, ranks = steer_series(records)
    assert set(flight) == {'simulate', 'train'}
    assert max(ranks['train'][1]) >= 2
    assert flight['simulate'][1][-1] == 0  # every task came back
    # A half-written last line and a line that is not an object are skipped.
    with open(stack.steer_dir / 'simulate-results.jsonl') as f:
        lines = f.readlines()
    (tmp_path / 'c').mkdir()
    (tmp_path / 'c' / 'x.jsonl').write_text(''.join(lines[:2]) + '[1, 2]\n' + lines[2][:10])
    assert len(steer_records(str(tmp_path / 'c'))) == 2
    runs = bench_runs([str(stack.bench_dir), str(tmp_path / 'nothing')])
    assert [r.summary['app'] for r in runs] == ['synthetic']
    assert len(runs[0].tasks()) == 20


def test_command_serves_behind_its_key(stack: Stack) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            '-c',
            'from tether.cli import main; main()',
            'dashboard',
            '--port',
            '0',
            '--metrics',
            stack.node_metrics,
            '--faas-url',
            stack.service.url,
        ],
        env={**os.environ, 'TETHER_FAAS_TOKEN': stack.token_a},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r'(http://127\.0\.0\.1:\d+/)\?key=(\S+)', line)
        assert found, line
        base, key = found.groups()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + 'faas', timeout=30)
        assert info.value.code == 401
        info.value.close()
        request = urllib.request.Request(
            base + 'faas', headers={'Cookie': f'tether_dashboard_key={key}'}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            page = response.read().decode()
        assert stack.tasks_a['failing'][:8] in page
        assert "script-src 'self'" in response.headers['Content-Security-Policy']
        with urllib.request.urlopen(base + 'static/plotly.min.js', timeout=30) as response:
            assert len(response.read()) > 1_000_000
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_command_refuses_an_open_non_loopback_dashboard() -> None:
    result = subprocess.run(
        [
            sys.executable,
            '-c',
            'from tether.cli import main; main()',
            'dashboard',
            '--host',
            '0.0.0.0',
            '--no-key',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert 'needs an access key' in result.stderr


def test_config_key_none_makes_a_random_key() -> None:
    from tether.dashboard import build_app

    a = build_app(DashboardConfig(port=0), scrape=False)
    b = build_app(DashboardConfig(port=0), scrape=False)
    assert a.state.key
    assert a.state.key != b.state.key
    assert 'secret' not in repr(DashboardConfig(faas_token='secret'))
