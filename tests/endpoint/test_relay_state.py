"""An endpoint says plainly what is wrong with its relay: check-nat, start, list, status."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

from tests.endpoint.conftest import Relay, Site, wait_for, write_relay_config


def free_pair() -> int:
    """A port ``p`` with ``p`` and ``p + 1`` free (a relay's control and data ports)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(('127.0.0.1', 0))
            port = int(a.getsockname()[1])
            with socket.socket() as b:
                try:
                    b.bind(('127.0.0.1', port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError('no pair of free ports')


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a failed command: one line, ``Error: ...``."""
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith('Error: '), lines[0]
    return lines[0]


def test_check_nat_without_a_relay_says_so(site: Site) -> None:
    site.configure('lonely', None)
    site.start('lonely')
    for args in (
        ('endpoint', 'check-nat', 'lonely'),
        ('endpoint', 'check-nat', 'lonely', '--json'),
    ):
        line = one_error_line(site.tether(*args, check=False))
        assert 'no relay' in line
    # Nothing is wrong with it otherwise: it runs, and says it has no relay.
    (row,) = site.tether_json('endpoint', 'list')
    assert (row['running'], row['health'], row['relay']) == (True, 'ok', None)


def test_an_unreachable_relay_is_reported_and_shown_until_it_is_back(
    site: Site, tmp_path: Path
) -> None:
    port = free_pair()
    # The relay this endpoint is configured with is not running yet.
    relay_config = write_relay_config(tmp_path / 'late-relay', '127.0.0.1', port)
    shutil.copy(relay_config.parent / 'relay.pem', site.home.parent / 'relay.pem')
    # It tries again every 0.5 s (default: a wait doubling up to 5 s), so it registers
    # soon after the relay comes up below.
    site.configure('stranded', f'127.0.0.1:{port}', relay_settings={'retry_max': 0.5})
    started = site.tether('endpoint', 'start', 'stranded')
    # It serves its local clients, so it starts; but it says its relay is out of reach.
    assert 'started' in started.stdout
    assert f'relay 127.0.0.1:{port} is unreachable' in started.stderr
    listed = site.tether('endpoint', 'list').stdout
    assert 'running (relay unreachable' in listed
    (row,) = site.tether_json('endpoint', 'list')
    assert row['health'] == 'relay unreachable'
    assert row['relay']['connected'] is False
    assert row['relay']['error']
    # Written by the endpoint into its state file, for anyone who looks.
    state = json.loads((site.home / 'endpoints' / 'stranded' / 'state.json').read_text())
    assert state['relay']['connected'] is False
    line = one_error_line(site.tether('endpoint', 'check-nat', 'stranded', check=False))
    assert f'not registered with its relay 127.0.0.1:{port}' in line
    # The relay comes up: the endpoint registers by itself, and says so.
    relay = Relay(relay_config).start()
    try:
        wait_for(
            lambda: site.tether_json('endpoint', 'list')[0]['health'] == 'ok',
            what='the endpoint to register',
        )
        state = json.loads((site.home / 'endpoints' / 'stranded' / 'state.json').read_text())
        assert state['relay']['connected'] is True
        assert 'relay unreachable' not in site.tether('endpoint', 'list').stdout
        nat = json.loads(site.tether('endpoint', 'check-nat', 'stranded', '--json').stdout)
        assert nat['nat'] == 'open'
        site.stop('stranded')
    finally:
        relay.stop()
