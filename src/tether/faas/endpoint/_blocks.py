"""Managers in an endpoint's blocks: starting them, and the endpoint's view of each.

With ``engine = "managers"`` and a ``[provider]``, the endpoint keeps no workers itself:
it asks the provider (through a Parsl HighThroughputExecutor with one slot per node) to
run :func:`~._block_manager.run_manager` on each node of its blocks, and each such
manager connects back over an authenticated link (:mod:`._block_link`). A
:class:`RemotePool` is the endpoint's handle on one connected manager: the managers
engine routes tasks to it as it does to a manager on this host.

Blocks follow the tasks: ``init_blocks`` at start; one more manager is asked for whenever
tasks wait and no manager has room (up to ``max_blocks`` times ``nodes_per_block``, those
already asked for counted); a manager idle for ``idle_timeout_s`` ends when more than
``min_blocks`` worth of managers remain, and Parsl then cancels its idle block. A manager
that goes away (its job cancelled, past its walltime, its node lost) is noticed when its
link closes: the tasks it held run again elsewhere, up to ``max_retries`` times, then fail
with ``WorkerLostError``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from tether.exceptions import AuthenticationError, ProtocolError
from tether.faas._config import ComputeEndpointConfig
from tether.faas.endpoint._block_link import Link, accept_manager
from tether.faas.endpoint._block_manager import run_manager
from tether.faas.endpoint.engine import Task

__all__ = ['BlockManagers', 'RemotePool']

logger = logging.getLogger(__name__)

# Bytes one message from a manager may hold: a result (max_result_bytes) and its output.
_SLACK = 1 << 20
# Connections proving the key at once (each for at most 30 s); more are closed at accept.
_HANDSHAKES = 16


def _is_result(message: tuple[Any, ...]) -> bool:
    """Whether ``message`` is ``('result', header, payload)`` (the engine checks the task)."""
    return (
        len(message) == 3
        and isinstance(message[1], dict)
        and isinstance(message[2], (bytes, bytearray))
    )


class RemotePool:
    """One connected manager, as the managers engine sees its pool."""

    def __init__(self, link: Link, hello: dict[str, Any]) -> None:
        self.link = link
        self.workers = int(hello['workers'])
        self.capacity = int(hello['capacity'])
        self.block: dict[str, str] = dict(hello.get('block') or {})
        self.cold_starts = 0
        self._stats: dict[str, Any] = {'idle': self.workers, 'warm': {}}

    def start(self) -> None:
        """Nothing to start: the manager runs already."""

    def submit(self, tasks: list[Task]) -> None:
        """Send tasks to the manager (a closed link is noticed by its reader)."""
        with contextlib.suppress(OSError):
            self.link.send(('tasks', tasks))

    def cancel(self, task_ids: list[str]) -> None:
        """Ask the manager to cancel tasks (each ends with a ``'cancelled'`` result)."""
        with contextlib.suppress(OSError):
            self.link.send(('cancel', task_ids))

    def update(self, stats: dict[str, Any]) -> None:
        """What the manager last advertised."""
        self._stats = stats
        self.cold_starts = int(stats.get('cold', 0))

    def stats(self) -> dict[str, Any]:
        """``workers``, ``idle``, ``pending`` and ``warm``, as the manager last said."""
        return {
            'workers': self.workers,
            'idle': self._stats.get('idle'),
            'pending': 0,
            'warm': dict(self._stats.get('warm') or {}),
        }

    def stop(self) -> None:
        """Tell the manager to end, and close the link."""
        with contextlib.suppress(OSError):
            self.link.send(('stop',))
        self.link.close()


class Callbacks:
    """What :class:`BlockManagers` tells the managers engine."""

    def __init__(
        self,
        joined: Callable[[RemotePool], None],
        left: Callable[[RemotePool], None],
        idle: Callable[[RemotePool], bool],
        on_handoff: Callable[[RemotePool, list[str]], None],
        on_result: Callable[[RemotePool, dict[str, Any], bytes], None],
    ) -> None:
        self.joined, self.left, self.idle = joined, left, idle
        self.on_handoff, self.on_result = on_handoff, on_result


class BlockManagers:
    """Starts managers in the blocks of ``config.provider`` and accepts their links."""

    def __init__(
        self, config: ComputeEndpointConfig, env: dict[str, str], callbacks: Callbacks
    ) -> None:
        from tether.faas.endpoint._parsl import ParslEngine

        spec = config.provider
        if spec is None:
            raise ValueError('managers in blocks need a [provider]')
        self.config = config
        self.callbacks = callbacks
        self.per_block = int(getattr(spec, 'nodes_per_block', 1))
        self.most = spec.max_blocks * self.per_block
        self.least = spec.min_blocks * self.per_block
        self.initial = spec.init_blocks * self.per_block
        self.address = spec.address or '127.0.0.1'
        self.max_frame = config.max_result_bytes + 2 * config.max_output_bytes + _SLACK
        self._lock = threading.Lock()
        self._launching = 0
        self._launches = 0
        self._joined: set[int] = set()
        self._connected: list[RemotePool] = []
        self._stopping = threading.Event()
        self._handshakes = threading.BoundedSemaphore(_HANDSHAKES)
        self._threads: list[threading.Thread] = []
        # One slot per node: each runs one manager, which runs max_workers workers.
        # Parsl does not run a lost manager again: the engine asks for another when
        # tasks wait.
        parsl_config = config.model_copy(
            update={'engine': 'parsl', 'max_workers': 1, 'max_retries': 0}
        )
        self._parsl = ParslEngine(parsl_config, lambda _ids: None, lambda _h, _p: None, env)
        # The manager's own configuration: a process pool of max_workers, kept started.
        self._manager_json = config.model_copy(
            update={
                'engine': 'process',
                'provider': None,
                'min_workers': config.max_workers,
            }
        ).model_dump_json()
        self._dir = ''
        self._key_file = ''
        self._key = b''
        self._server: socket.socket | None = None

    # Start and stop --------------------------------------------------------------------

    def start(self) -> None:
        """Write the link key, listen, start Parsl and ask for ``init_blocks``."""
        root = pathlib.Path.home() / '.tether' / 'faas-runs'
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._dir = tempfile.mkdtemp(prefix=f'{self.config.name}-managers-', dir=root)
        self._key = secrets.token_bytes(32)
        key_path = pathlib.Path(self._dir) / 'link.key'
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f:
            f.write(self._key)
        self._key_file = str(key_path)
        self._server = socket.create_server((self.address, 0), backlog=self.most + 4)
        accept = threading.Thread(target=self._accept, name='tether-block-accept', daemon=True)
        accept.start()
        self._threads.append(accept)
        self._parsl.start()
        for _ in range(self.initial):
            self.launch()

    def stop(self) -> None:
        """Tell every manager to end, stop Parsl (cancelling the blocks), remove the key."""
        self._stopping.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                # On Linux, close() alone does not wake a thread blocked in accept().
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
        for thread in self._threads:
            thread.join(5)
        with self._lock:
            managers, self._connected = list(self._connected), []
        for pool in managers:
            pool.stop()
        self._parsl.stop()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    # Growing ---------------------------------------------------------------------------

    @property
    def launching(self) -> int:
        """Managers asked for that have not connected yet."""
        with self._lock:
            return self._launching

    def blocks(self) -> dict[str, int]:
        """The blocks by state, as Parsl last polled the provider."""
        return self._parsl.blocks()

    def launch(self) -> bool:
        """Ask for one more manager, unless ``max_blocks`` worth are connected or asked
        for; whether one was asked for."""
        with self._lock:
            if self._stopping.is_set() or self._launching + len(self._connected) >= self.most:
                return False
            self._launching += 1
            self._launches += 1
            launch = self._launches
        assert self._server is not None
        port = self._server.getsockname()[1]
        future = self._parsl.submit_app(
            run_manager,
            self.address,
            port,
            self._key_file,
            self._manager_json,
            self.max_frame,
            launch,
        )
        future.add_done_callback(lambda f: self._ended(f, launch))
        return True

    def _ended(self, future: Any, launch: int) -> None:
        error = future.exception()
        if error is not None and not self._stopping.is_set():
            logger.warning('a block manager ended with %s: %s', type(error).__name__, error)
        with self._lock:
            if launch not in self._joined:
                # It never connected (its job failed, or was cancelled while queued).
                self._launching = max(0, self._launching - 1)
            self._joined.discard(launch)

    # Links -----------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stopping.is_set():
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            if not self._handshakes.acquire(blocking=False):
                sock.close()  # too many connections still proving the key
                continue
            thread = threading.Thread(
                target=self._serve, args=(sock,), name='tether-block-link', daemon=True
            )
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            link = accept_manager(sock, self._key, self.max_frame)
            message = link.recv()
        except (AuthenticationError, ProtocolError, EOFError, OSError) as e:
            logger.warning('a connection to the block link was refused: %s', e)
            sock.close()
            return
        finally:
            self._handshakes.release()
        if message[0] != 'hello':
            link.close()
            return
        pool = RemotePool(link, message[1])
        with self._lock:
            if self._stopping.is_set() or len(self._connected) >= self.most:
                link.close()  # stopping, or more managers than max_blocks ask for
                return
            launch = message[1].get('launch')
            if launch not in self._joined:
                self._joined.add(launch)
                self._launching = max(0, self._launching - 1)
            self._connected.append(pool)
        self.callbacks.joined(pool)
        try:
            self._read(pool)
        finally:
            with self._lock:
                was_connected = pool in self._connected
                if was_connected:
                    self._connected.remove(pool)
            link.close()
            if was_connected and not self._stopping.is_set():
                self.callbacks.left(pool)

    def _read(self, pool: RemotePool) -> None:
        for message in pool.link.messages():
            op = message[0]
            if op == 'result':
                if not _is_result(message):
                    logger.warning('a block manager sent a malformed result: its link ends')
                    return
                self.callbacks.on_result(pool, message[1], message[2])
            elif op == 'handoff':
                self.callbacks.on_handoff(pool, [str(i) for i in message[1]])
            elif op == 'stats':
                pool.update(message[1])
            elif op == 'idle':
                with self._lock:
                    may_end = len(self._connected) + self._launching > self.least
                if may_end and self.callbacks.idle(pool):
                    with self._lock:
                        if pool in self._connected:
                            self._connected.remove(pool)
                    pool.stop()
                    return
