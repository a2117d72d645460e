"""Ray: a local Ray instance started here, or an existing cluster by address."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import pydantic

from tether.bench.executor import ExecutorConfig
from tether.bench.registry import register
from tether.plugins.ray import RayExecutor

__all__ = ['LocalRay', 'RayConfig']

logger = logging.getLogger(__name__)

# The ports of `ray start --head`, all chosen here (so that two nodes never collide on a
# default port); given the agents' ports, the raylet waits for fewer of them to start.
_PORTS = (
    '--port',
    '--dashboard-port',
    '--dashboard-agent-listen-port',
    '--dashboard-agent-grpc-port',
    '--runtime-env-agent-port',
    '--metrics-export-port',
)


# `ray start`, in a child that Linux kills when the thread that started it ends (Ray's own
# local processes share their starter's fate in the same way).
_RAY_START = """\
import os, signal, sys
if sys.platform == 'linux':
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != {parent}:
        sys.exit('the process that started this Ray node has ended')
from ray.scripts.scripts import main
main()
"""


class LocalRay:
    """A local Ray node of its own: ``ray start --head --block`` in a child process.

    ``ray.init()`` gives a local node a fixed 30 s to register, and the node's raylet
    gives Ray's Python agents 15 s to report their ports (then it exits); neither wait
    is a setting, and a loaded machine can exceed both. Here the node is started again,
    from nothing, until it registers or ``start_timeout`` passes, without disturbing
    this process's Ray state; its ports are chosen beforehand (the raylet then waits
    for one agent instead of two, and no default port can collide with another node's),
    and it keeps its files in a temporary folder of its own (so that ``ray.init()``
    elsewhere does not find it). It stops with :meth:`stop`, or when the thread that
    started it ends (on Linux, as the processes of Ray's own local node do).

    Args:
        num_cpus: CPUs of the node (Ray's default: all of them).
        start_timeout: Seconds to wait for the node to start, over all attempts.
    """

    def __init__(self, num_cpus: int | None = None, *, start_timeout: float = 600.0) -> None:
        self.num_cpus = num_cpus
        _token_auth()
        self.temp_dir = tempfile.mkdtemp(prefix='tether-ray-')
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ''
        deadline = time.monotonic() + start_timeout
        try:
            for attempt in itertools.count(1):
                if self._start(deadline):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f'the local Ray node did not start within {start_timeout:.0f} s '
                        f'({attempt} attempts): {self._log_tail()}',
                    )
                logger.warning(
                    'the local Ray node did not start (attempt %d): %s',
                    attempt,
                    self._log_tail(),
                )
        except BaseException:
            self.stop()
            raise

    def _start(self, deadline: float) -> bool:
        """Start the node once; whether it started before the deadline."""
        self._stop_process()
        ports = [str(port) for port in _free_ports(len(_PORTS))]
        self.address = f'127.0.0.1:{ports[0]}'
        command = [
            sys.executable,
            '-c',
            _RAY_START.format(parent=os.getpid()),
            'start',
            '--head',
            '--block',
            f'--temp-dir={self.temp_dir}',
            '--include-dashboard=false',
            '--disable-usage-stats',
            *itertools.chain.from_iterable(zip(_PORTS, ports, strict=True)),
        ]
        if self.num_cpus is not None:
            command.append(f'--num-cpus={self.num_cpus}')
        with open(self._log, 'wb') as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        while time.monotonic() < deadline:
            if 'Ray runtime started' in self._log_text():
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.5)
        return False

    @property
    def _log(self) -> str:
        return os.path.join(self.temp_dir, 'ray-start.log')

    def _log_text(self) -> str:
        try:
            with open(self._log, encoding='utf-8', errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def _log_tail(self) -> str:
        lines = [line for line in self._log_text().splitlines() if line.strip()]
        return ' | '.join(lines[-5:])

    def connect(self, **init_kwargs: Any) -> None:
        """``ray.init(address=...)`` to this node."""
        import ray

        ray.init(address=self.address, **init_kwargs)

    def _stop_process(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        _stop_tree(process.pid)
        process.wait()

    def stop(self) -> None:
        """Disconnect this process from Ray, stop the node and remove its files."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        self._stop_process()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _token_auth() -> None:
    """Token authentication for the node and this process, as ``ray.init()`` sets it up.

    For a local node of its own, ``ray.init()`` turns token authentication on in this
    process and its children (unless ``RAY_AUTH_MODE`` says otherwise) and makes a token
    if there is none; the same is done here before the node starts, so that the node
    (which inherits the setting) and this process, which connects by address, agree.
    """
    from ray._private.authentication.authentication_token_setup import (
        enable_token_auth_by_default,
        ensure_token_if_auth_enabled,
    )

    enable_token_auth_by_default()
    ensure_token_if_auth_enabled(None, create_token_if_missing=True)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(('', 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _stop_tree(pid: int) -> None:
    """Terminate a process and its descendants (killed after 30 s)."""
    import psutil

    try:
        root = psutil.Process(pid)
        every = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    with contextlib.suppress(psutil.Error):
        root.terminate()  # `ray start --block` stops its node on SIGTERM
    _, alive = psutil.wait_procs(every, timeout=30)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=10)


class _LocalRayExecutor(RayExecutor):
    """A :class:`RayExecutor` on a :class:`LocalRay` node, stopped with the executor."""

    def __init__(self, node: LocalRay) -> None:
        super().__init__()
        self.node = node

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks, then stop the node."""
        closed, self._closed = self._closed, True
        if not closed:
            self.node.stop()


@register('executor')
class RayConfig(ExecutorConfig):
    """Ray tasks through :class:`tether.plugins.ray.RayExecutor`.

    If Ray is already initialised in this process, that instance is used (and left
    running); otherwise one is started (``address`` to join a cluster) and shut down
    with the executor.
    """

    name: str = 'ray'
    address: str | None = pydantic.Field(default=None, description="cluster address, or 'auto'")
    num_cpus: int | None = pydantic.Field(
        default=None, ge=1, description='CPUs of a local instance'
    )
    start_timeout: float = pydantic.Field(
        default=600.0,
        gt=0,
        description='seconds to wait for a local instance to start',
    )

    def get_executor(self) -> RayExecutor:
        """Start (or join) Ray and build the executor."""
        import ray

        if ray.is_initialized():
            return RayExecutor()
        if self.address is not None:
            ray.init(address=self.address, log_to_driver=False)
            return RayExecutor(shutdown_ray=True)
        node = LocalRay(self.num_cpus, start_timeout=self.start_timeout)
        try:
            node.connect(log_to_driver=False)
            return _LocalRayExecutor(node)
        except BaseException:
            node.stop()
            raise

    def get_workers(self) -> int | None:
        """``num_cpus`` if set."""
        return self.num_cpus
