"""tether.testing.servers: throwaway servers on free loopback ports."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tether.exceptions import HarnessError, ServerStartError, TetherError
from tether.testing import (
    RedisServer,
    ServerProcess,
    free_port,
    port_open,
    redis_server_fixture,
)

# The fixture factory, as a user writes it: the fixture takes this name.
throwaway_redis = redis_server_fixture()
tuned_redis = redis_server_fixture(args=['--maxclients', '77'], name='redis_77')


def _ping(server: RedisServer) -> bool:
    import redis

    client = redis.Redis(server.host, server.port, socket_timeout=5)
    try:
        return bool(client.ping())
    finally:
        client.close()


def test_free_port_is_free_and_port_open_sees_listeners() -> None:
    port = free_port()
    assert not port_open(port)
    with RedisServer(port) as server:
        assert server.port == port
        assert port_open(port)
    assert not port_open(port)


def test_redis_server_starts_stops_and_restarts_on_its_port() -> None:
    server = RedisServer()
    assert not server.running
    assert 'stopped' in repr(server)
    server.start()
    try:
        assert server.running
        assert _ping(server)
        assert server.url == f'redis://127.0.0.1:{server.port}'
        pid = server.pid
        server.stop()
        assert not server.running
        assert not port_open(server.port)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        server.start()  # same port, a new process
        assert server.pid != pid
        assert _ping(server)
    finally:
        server.stop()
    server.stop()  # stopping a stopped server does nothing


def test_redis_server_takes_extra_options(tmp_path: Path) -> None:
    import redis

    with RedisServer(args=['--maxmemory', '12345678'], directory=tmp_path) as server:
        client = redis.Redis(server.host, server.port)
        assert client.config_get('maxmemory') == {'maxmemory': '12345678'}
        assert client.config_get('dir') == {'dir': str(tmp_path)}
        assert client.config_get('save') == {'save': ''}
        client.close()
    assert list(tmp_path.iterdir()) == []  # no persistence: nothing written


def test_fixture_factory(throwaway_redis: RedisServer, redis_77: RedisServer) -> None:
    import redis

    assert throwaway_redis.running
    assert _ping(throwaway_redis)
    assert redis_77.port != throwaway_redis.port
    client = redis.Redis(redis_77.host, redis_77.port)
    assert client.config_get('maxclients') == {'maxclients': '77'}
    client.close()


def test_start_twice_is_an_error() -> None:
    with RedisServer() as server, pytest.raises(ServerStartError, match='already running'):
        server.start()


def test_missing_program_is_a_clear_error() -> None:
    with pytest.raises(ServerStartError, match='not installed') as info:
        RedisServer(executable='no-such-redis-server').start()
    assert isinstance(info.value, HarnessError)
    assert isinstance(info.value, TetherError)
    assert isinstance(info.value, RuntimeError)


def test_program_that_exits_is_reported_with_its_output() -> None:
    code = 'import sys; print("bad option --frob"); sys.exit(3)'
    server = ServerProcess([sys.executable, '-c', code], free_port())
    with pytest.raises(ServerStartError, match=r'exited with code 3(.|\n)*bad option --frob'):
        server.start()
    assert not server.running


def test_program_that_never_listens_times_out_and_is_killed() -> None:
    code = 'import signal; signal.pause()'
    server = ServerProcess([sys.executable, '-c', code], free_port(), startup_timeout=0.5)
    with pytest.raises(ServerStartError, match=r'is not ready after 0.5 s'):
        server.start()
    assert not server.running
    with pytest.raises(ServerStartError, match='not running'):
        server.pid


def test_stop_kills_what_the_server_spawned(tmp_path: Path) -> None:
    port = free_port()
    pidfile = tmp_path / 'child.pid'
    script = (
        'import subprocess, sys, http.server\n'
        "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
        f'open({str(pidfile)!r}, "w").write(str(child.pid))\n'
        f"http.server.HTTPServer(('127.0.0.1', {port}), http.server.BaseHTTPRequestHandler)"
        '.serve_forever()\n'
    )
    with ServerProcess([sys.executable, '-c', script], port, env={'X_TETHER': '1'}) as server:
        assert server.running
        child = int(pidfile.read_text())
        os.kill(child, 0)
    deadline = time.monotonic() + 10
    while True:  # the grandchild is killed with the group (init reaps it)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if _zombie(child):
            break
        assert time.monotonic() < deadline, 'the spawned child outlived stop()'
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f'/proc/{pid}/stat').read_text().split()[2] == 'Z'
    except OSError:
        return True


def test_command_line_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match='command line'):
        ServerProcess([], free_port())
