"""Throwaway servers for tests: a program of the test's own on a free loopback port.

Tests that stop, restart or count the commands of a server must never touch a shared one.
:class:`ServerProcess` runs any server program in its own process group on
``127.0.0.1``, waits until it answers, and kills it (with everything it spawned) when
asked; :class:`RedisServer` is one for ``redis-server``, and
:func:`redis_server_fixture` makes a pytest fixture of it::

    from tether.testing import RedisServer

    with RedisServer() as server:          # redis-server on a free port, no persistence
        connector = RedisConnector(server.host, server.port)
        ...
        server.stop()                      # the server dies as in a crash
        ...
        server.start()                     # back, on the same port
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, Literal

from tether._closing import StartStopContext
from tether.exceptions import ServerStartError

__all__ = [
    'RedisServer',
    'ServerProcess',
    'free_port',
    'port_open',
    'redis_server_fixture',
]

logger = logging.getLogger(__name__)

LOOPBACK = '127.0.0.1'
_POLL = 0.05
_TAIL = 2000


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = LOOPBACK, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ServerProcess(StartStopContext):
    """A server program of the test's own, listening on a loopback port.

    The program runs in a process group of its own, so :meth:`stop` kills it together
    with every process it spawned. :meth:`start` returns once :meth:`ready` holds (by
    default: the port accepts TCP connections) and raises
    :class:`~tether.exceptions.ServerStartError`, with the program's last output, if the
    program exits or is not ready within ``startup_timeout`` seconds. A stopped server
    can be started again, on the same port. As a context manager it is started on entry
    and stopped on exit.

    Args:
        args: The command line (``args[0]`` is looked up on ``PATH``).
        port: The TCP port the program listens on (choose it with :func:`free_port`).
        env: Variables added to this process's environment for the program.
        host: The address the program listens on.
        startup_timeout: Seconds :meth:`start` waits for the program to be ready.
    """

    def __init__(
        self,
        args: Sequence[str],
        port: int,
        *,
        env: Mapping[str, str] | None = None,
        host: str = LOOPBACK,
        startup_timeout: float = 60.0,
    ) -> None:
        if not args:
            raise ValueError('a server needs a command line')
        self.args = list(args)
        self.port = port
        self.host = host
        self.env = dict(env) if env is not None else None
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    def __repr__(self) -> str:
        state = 'running' if self.running else 'stopped'
        return f'{type(self).__name__}({self.args[0]!r}, port={self.port}, {state})'

    @property
    def running(self) -> bool:
        """Whether the program was started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int:
        """The program's process id (the leader of its process group)."""
        if self._proc is None:
            raise ServerStartError(f'{self!r} is not running')
        return self._proc.pid

    def ready(self) -> bool:
        """Whether the started program serves (default: its port accepts connections)."""
        return port_open(self.port, self.host, timeout=1.0)

    def start(self) -> None:
        """Start the program and wait until it is ready."""
        if self.running:
            raise ServerStartError(f'{self!r} is already running')
        exe = shutil.which(self.args[0])
        if exe is None:
            raise ServerStartError(
                f'cannot start {self.args[0]!r}: it is not installed (not found on PATH)',
            )
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self._proc = subprocess.Popen(
            [exe, *self.args[1:]],
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            env=None if self.env is None else {**os.environ, **self.env},
            start_new_session=True,  # its own process group: stop() kills all of it
        )
        deadline = time.monotonic() + self.startup_timeout
        while not self.ready():
            code = self._proc.poll()
            if code is not None or time.monotonic() > deadline:
                what = f'exited with code {code}' if code is not None else 'is not ready'
                message = (
                    f'{self.args[0]} {what} after {self.startup_timeout:g} s '
                    f'(port {self.host}:{self.port}); its output ends with:\n{self.output()}'
                )
                self.stop()
                raise ServerStartError(message)
            time.sleep(_POLL)
        logger.debug('%r started (pid %d)', self, self._proc.pid)

    def stop(self) -> None:
        """Kill the program and everything it spawned (as a crash would); then wait.

        Stopping a server that is not running does nothing.
        """
        proc, self._proc = self._proc, None
        if self._output is not None:
            self._output.close()
            self._output = None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        logger.debug('%r stopped', self)

    def output(self) -> str:
        """The last lines the running program printed (stdout and stderr)."""
        if self._output is None:
            return ''
        self._output.flush()
        self._output.seek(0, os.SEEK_END)
        size = self._output.tell()
        self._output.seek(max(0, size - _TAIL))
        return self._output.read().decode(errors='replace')


class RedisServer(ServerProcess):
    """A ``redis-server`` of the test's own: loopback, a free port, no persistence.

    Its command counters, keys and configuration belong to the test alone, and the test
    may stop (kill) and restart it. Ready means it answers ``PING``.

    Args:
        port: The port (default: a free one, kept across restarts).
        args: Extra ``redis-server`` options, e.g.
            ``['--client-output-buffer-limit', 'pubsub 0 0 0']``.
        directory: Its working directory (default: the system's temporary directory;
            with persistence off nothing is written there).
        executable: The ``redis-server`` program to run.
        startup_timeout: Seconds :meth:`~ServerProcess.start` waits for ``PING`` to answer.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        args: Sequence[str] = (),
        directory: str | os.PathLike[str] | None = None,
        executable: str = 'redis-server',
        startup_timeout: float = 30.0,
    ) -> None:
        port = free_port() if port is None else port
        workdir = os.fspath(directory) if directory is not None else tempfile.gettempdir()
        command = [
            executable,
            '--port',
            str(port),
            '--bind',
            LOOPBACK,
            '--save',
            '',
            '--appendonly',
            'no',
            '--dir',
            workdir,
            *args,
        ]
        super().__init__(command, port, startup_timeout=startup_timeout)

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL."""
        return f'redis://{self.host}:{self.port}'

    def ready(self) -> bool:
        """Whether the server answers ``PING``."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                s.sendall(b'PING\r\n')
                return s.recv(64).startswith(b'+PONG')
        except OSError:
            return False


def redis_server_fixture(
    *,
    scope: Literal['session', 'package', 'module', 'class', 'function'] = 'function',
    args: Sequence[str] = (),
    name: str | None = None,
) -> Any:
    """A pytest fixture that yields a started :class:`RedisServer` and stops it after.

    Assign it in a test module or ``conftest.py``; the fixture takes the name it is
    assigned to (or ``name``)::

        from tether.testing import redis_server_fixture

        private_redis = redis_server_fixture()

        def test_restart(private_redis):
            private_redis.stop()
            ...

    Args:
        scope: The pytest scope of the fixture.
        args: Extra ``redis-server`` options.
        name: The fixture's name, if not the name it is assigned to.
    """
    import pytest

    def server() -> Iterator[RedisServer]:
        with RedisServer(args=args) as s:
            yield s

    return pytest.fixture(scope=scope, name=name)(server)
