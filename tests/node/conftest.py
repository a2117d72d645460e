"""Node servers as real processes, with unique names and run directories per test."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether._serve.state import pid_alive
from tether.node import NodeState, read_state
from tether.testing import wait_until

SECRET = 'node-test-secret'


def wait_for_state(
    run_dir: Path, name: str, proc: subprocess.Popen[Any] | None = None
) -> NodeState:
    """Wait (bounded) until server ``name`` has published its state file."""

    def published() -> NodeState | None:
        state = read_state(run_dir, name)
        if state is not None and pid_alive(state.pid):
            return state
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f'node server exited with {proc.returncode}')
        return None

    return wait_until(published, timeout=30, message=f'node server {name} to start')


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Wait (bounded) until process ``pid`` is gone (fails the test if it stays)."""
    return wait_until(lambda: not pid_alive(pid), timeout=timeout, message=f'pid {pid} to end')


class RunningNode:
    """A ``python -m tether.node start`` process."""

    def __init__(self, tmp_path: Path, *args: str, secret: str = SECRET) -> None:
        self.name = f'test-{uuid.uuid4().hex[:10]}'
        self.run_dir = tmp_path / f'run-{self.name}'
        self.secret = secret
        env = {**os.environ, 'TETHER_NODE_SECRET': secret}
        self.proc = subprocess.Popen(
            [
                *(sys.executable, '-m', 'tether.node', 'start', '--name', self.name),
                *('--run-dir', str(self.run_dir), '--bind', '127.0.0.1', *args),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.state = wait_for_state(self.run_dir, self.name, self.proc)

    @property
    def port(self) -> int:
        return self.state.port

    def connector(self, **kwargs: Any) -> Any:
        """A NodeConnector attached to this server."""
        from tether.connectors.node import NodeConnector

        return NodeConnector(
            self.name,
            address='127.0.0.1',
            run_dir=str(self.run_dir),
            secret=self.secret,
            **kwargs,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator[Callable[..., RunningNode]]:
    nodes: list[RunningNode] = []

    def start(*args: str, **kwargs: Any) -> RunningNode:
        node = RunningNode(tmp_path, *args, **kwargs)
        nodes.append(node)
        return node

    yield start
    for node in nodes:
        node.stop()
