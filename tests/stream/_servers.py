"""Private broker processes on free ports, for tests that stop the broker."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import service_up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


class Server:
    """A broker process of ours; :meth:`stop` kills it."""

    def __init__(self, args: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,  # its own process group: stop() kills all of it
        )
        deadline = time.monotonic() + 60
        while not service_up(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f'{args[0]} did not start on port {port}')
            time.sleep(0.05)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@contextlib.contextmanager
def running(
    args_for_port: list[str],
    port: int,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    server = Server(args_for_port, port, env)
    try:
        yield server
    finally:
        server.stop()


def redis_args(port: int) -> list[str]:
    return [
        'redis-server',
        '--port',
        str(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
    ]


def nats_args(port: int, store_dir: Path) -> list[str]:
    return ['nats-server', '-a', '127.0.0.1', '-p', str(port), '-js', '-sd', str(store_dir)]


def mosquitto_args(port: int) -> list[str]:
    return ['mosquitto', '-p', str(port)]


def rabbitmq(port: int, base: Path) -> tuple[list[str], dict[str, str]]:
    """Command and environment of a private RabbitMQ node (no plugins) under ``base``."""
    (base / 'rabbitmq.conf').write_text(f'listeners.tcp.local = 127.0.0.1:{port}\n')
    (base / 'enabled_plugins').write_text('[].\n')
    (base / 'env.conf').write_text('')
    env = {
        'HOME': str(base),
        'RABBITMQ_CONF_ENV_FILE': str(base / 'env.conf'),
        'RABBITMQ_CONFIG_FILE': str(base / 'rabbitmq.conf'),
        'RABBITMQ_ENABLED_PLUGINS_FILE': str(base / 'enabled_plugins'),
        'RABBITMQ_NODENAME': f'tethertest{port}@localhost',
        'RABBITMQ_NODE_PORT': str(port),
        'RABBITMQ_DIST_PORT': str(free_port()),
        'RABBITMQ_MNESIA_BASE': str(base / 'mnesia'),
        'RABBITMQ_LOG_BASE': str(base / 'log'),
        'RABBITMQ_PLUGINS_EXPAND_DIR': str(base / 'plugins-expand'),
        'ERL_EPMD_ADDRESS': '127.0.0.1',
    }
    return ['/usr/lib/rabbitmq/bin/rabbitmq-server'], env
