"""Private broker processes on free ports, for tests that stop the broker."""

from __future__ import annotations

import contextlib
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

    def __init__(self, args: list[str], port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not service_up(port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f'{args[0]} did not start on port {port}')
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def running(args_for_port: list[str], port: int) -> Iterator[Server]:
    server = Server(args_for_port, port)
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
