"""DaemonLauncher: agents that outlive the process that launched them.

Each agent runs under its own supervisor process (``python -m tether.agents._daemon``),
started in a new session and detached from the launching process, which restarts the
agent per the restart policy. The supervisor writes a record (pid, behavior, exchange)
to ``<agents home>/daemons/<agent id>.json`` and removes it when the agent stops for
good. ``tether agents list`` shows the records; ``tether agents stop ID`` asks the agent
to shut down through its exchange (and ``--force`` kills the supervisor).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import pickle
import subprocess
import sys
import time
from typing import Any

from tether._serve.state import pid_alive
from tether.agents.launcher._base import Launcher, RestartPolicy, Supervised
from tether.agents.state import agents_home
from tether.exceptions import AgentLaunchError

__all__ = ['DaemonLauncher', 'daemon_records', 'exchange_from_record', 'pid_alive']


def _dir(home: pathlib.Path | None) -> pathlib.Path:
    path = (home or agents_home()) / 'daemons'
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def daemon_records(home: pathlib.Path | None = None) -> list[dict[str, Any]]:
    """The records of daemon agents (each with ``alive``: whether its supervisor runs)."""
    records = []
    for path in sorted(_dir(home).glob('*.json')):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        record['alive'] = pid_alive(int(record.get('pid', 0)))
        records.append(record)
    return records


def exchange_from_record(record: dict[str, Any]) -> Any:
    """Rebuild the exchange a daemon record names (Redis or hybrid exchanges only)."""
    from tether.agents.exchange import HybridExchange, RedisExchange

    kinds = {'redis': RedisExchange, 'hybrid': HybridExchange}
    cls = kinds.get(record.get('exchange_kind', ''))
    if cls is None:
        raise AgentLaunchError(
            f'daemon record names an unknown exchange {record.get("exchange_kind")!r}'
        )
    return cls(**record['exchange'])


class DaemonLauncher(Launcher):
    """Starts each agent as a daemon that keeps running after this process exits.

    Args:
        home: Agents home directory (default: ``$TETHER_AGENTS_HOME`` or
            ``~/.local/state/tether/agents``); records go to its ``daemons`` folder.
        restart: The restart policy the daemon's supervisor applies.
        python: Interpreter for the supervisor (default: this one).
        metrics: Where each daemon's supervisor serves the agent's Prometheus metrics
            (``None`` or no port: none, the default); its record gives the address.
    """

    detached = True

    def __init__(
        self,
        *,
        home: str | os.PathLike[str] | None = None,
        restart: RestartPolicy | int | None = None,
        python: str | None = None,
        metrics: Any = None,
    ) -> None:
        super().__init__(restart=restart)
        self.metrics = metrics
        self.home = pathlib.Path(home) if home is not None else None
        self.python = python or sys.executable
        self._popens: dict[str, subprocess.Popen[bytes]] = {}

    def run_once(self, entry: Supervised) -> None:  # pragma: no cover - not used
        raise NotImplementedError

    def launch(self, spec: Any, timeout: float = 60.0) -> None:
        """Start the agent's supervisor and wait until it has written its record."""
        from tether.agents.exchange import HybridExchange, RedisExchange

        if not isinstance(spec.exchange, RedisExchange):
            raise AgentLaunchError(
                'daemon agents need an exchange other processes can reach (RedisExchange '
                'or HybridExchange), not a ThreadExchange',
            )
        folder = _dir(self.home)
        kind = 'hybrid' if isinstance(spec.exchange, HybridExchange) else 'redis'
        spec_path = folder / f'{spec.agent_id}.spec'
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'wb') as f:
            pickle.dump(
                {'spec': spec, 'restart': self.restart, 'kind': kind, 'metrics': self.metrics}, f
            )
        log = open(folder / f'{spec.agent_id}.log', 'ab')  # noqa: SIM115 - handed to the child
        env = dict(os.environ)
        env['TETHER_AGENTS_HOME'] = str(folder.parent)
        src = str(pathlib.Path(__file__).resolve().parents[3])
        env['PYTHONPATH'] = os.pathsep.join(p for p in (src, env.get('PYTHONPATH', '')) if p)
        with log:
            proc = subprocess.Popen(
                [self.python, '-m', 'tether.agents._daemon', str(spec_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        record = folder / f'{spec.agent_id}.json'
        deadline = time.monotonic() + timeout
        while not record.exists():
            if proc.poll() is not None:
                raise AgentLaunchError(
                    f'daemon of agent {spec.agent_id} exited with {proc.returncode}; see '
                    f'{folder / (spec.agent_id + ".log")}',
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise AgentLaunchError(f'daemon of agent {spec.agent_id} did not start in time')
            time.sleep(0.02)
        # Reaped by wait() once the agent stopped, or left to init once we exit.
        self._popens[spec.agent_id] = proc

    def _record(self, agent_id: str) -> dict[str, Any] | None:
        path = _dir(self.home) / f'{agent_id}.json'
        try:
            return json.loads(path.read_text())  # type: ignore[no-any-return]
        except (OSError, ValueError):
            return None

    def running(self) -> list[str]:
        return [r['agent_id'] for r in daemon_records(self.home) if r['alive']]

    def wait(self, agent_id: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self._record(agent_id)
            if record is None or not pid_alive(int(record['pid'])):
                popen = self._popens.pop(agent_id, None)
                if popen is not None:
                    # The supervisor exits right after it removed its record.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        popen.wait(10)
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def close(self, timeout: float = 30.0) -> None:
        """Nothing to stop: daemons keep running (stop them with ``tether agents stop``)."""
        self.closed = True
