"""Service replicas of the replica tests: ``tether faas serve`` processes over the test
session's PostgreSQL database and RabbitMQ queue prefix (as the session's own service)."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Replica:
    """One ``tether faas serve`` process."""

    def __init__(self, proc: subprocess.Popen[str], url: str, log: pathlib.Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log

    def kill(self) -> None:
        """SIGKILL: no shutdown of its sessions, connections cut as a crash cuts them."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def start_replica(
    folder: pathlib.Path,
    database: str,
    broker: str,
    prefix: str,
    settings: str = '',
    *,
    stale_s: float | None = None,
) -> Replica:
    """A replica; ``settings``: more lines of its ``[service]`` table. ``stale_s``: the
    seconds after which it takes a silent replica for dead (its endpoints shown offline;
    ``tether.faas._liveness.STALE_S``, 20), with a heartbeat ten times as often (for the
    tests that wait for it: a killed replica's endpoints show offline that much sooner)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / 'service.toml'
    config.write_text(
        f'[service]\nport = 0\ndatabase = "{database}"\nbroker = "{broker}"\n'
        f'queue_prefix = "{prefix}"\n{settings}'
    )
    log = folder / 'service.log'
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    launch = 'from tether.cli import main; main()'
    if stale_s is not None:
        launch = (
            'import tether.faas._liveness as live, tether.faas._replicas as replicas; '
            f'live.STALE_S = {stale_s!r}; replicas.BEAT_S = live.BEAT_S = {stale_s / 10!r}; '
            + launch
        )
    with open(log, 'w') as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                '-c',
                launch,
                'faas',
                'serve',
                '--config',
                str(config),
                '--json',
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=ROOT,
        )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # one JSON line once it listens
    proc.stdout.close()
    if not line:
        proc.wait(30)
        pytest.fail(f'tether faas serve failed: {log.read_text()}')
    return Replica(proc, json.loads(line)['url'], log)


@contextlib.contextmanager
def replica_pair(
    folder: pathlib.Path, *args: Any, **kwargs: Any
) -> Iterator[tuple[Replica, Replica]]:
    """Two replicas of one service (stopped at the end), in ``folder``'s ``a`` and ``b``;
    the other arguments are :func:`start_replica`'s after its folder."""
    a = start_replica(folder / 'a', *args, **kwargs)
    try:
        b = start_replica(folder / 'b', *args, **kwargs)
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()
