"""Endpoints, relays and sites as real processes, on loopback or in network namespaces."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tether.testing import wait_until

TETHER = str(Path(sys.executable).parent / 'tether')
TOKENS = {'alice': 'alice-relay-token-0123456789', 'bob': 'bob-relay-token-9876543210'}


@dataclass
class Site:
    """A site: its own ``$TETHER_HOME``, optionally inside a network namespace."""

    home: Path
    ns: str | None = None
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, 'TETHER_HOME': str(self.home), **extra}

    def cmd(self, *args: str) -> list[str]:
        return ['ip', 'netns', 'exec', self.ns, *args] if self.ns else list(args)

    def tether(self, *args: str, check: bool = True, timeout: float = 60) -> Any:
        out = subprocess.run(
            self.cmd(TETHER, *args),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert out.returncode == 0, f'tether {" ".join(args)}: {out.stderr}{out.stdout}'
        return out

    def tether_json(self, *args: str) -> Any:
        return json.loads(self.tether(*args, '--json').stdout)

    def popen(self, code: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            self.cmd(sys.executable, '-c', textwrap.dedent(code), *args),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def python(self, code: str, *args: str, timeout: float = 90) -> Any:
        proc = self.popen(code, *args)
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def configure(
        self,
        name: str,
        relay: str | None,
        user: str = 'alice',
        *,
        relay_settings: dict[str, Any] | None = None,
        **settings: Any,
    ) -> str:
        """Configure an endpoint (in this process: the CLI has its own test).

        ``relay_settings``: more of its ``relay`` settings than the address and CA.
        """
        from tether.endpoint import SiteConfig

        token = None
        if relay is not None:
            token = TOKENS.get(user, user)
            settings['relay'] = {
                'address': relay,
                'ca_file': str(self.home.parent / 'relay.pem'),
                **(relay_settings or {}),
            }
        return SiteConfig.create(name, self.home, relay_token=token, **settings).uuid

    def start(self, name: str) -> dict[str, Any]:
        """Start an endpoint as a daemon (inside the namespace, if any)."""
        if self.ns is None:
            from tether.endpoint import start_endpoint

            return start_endpoint(name, self.home)
        self.tether('endpoint', 'start', name)
        return json.loads((self.home / 'endpoints' / name / 'state.json').read_text())

    def stop(self, name: str) -> None:
        if self.ns is None:
            from tether.endpoint import stop_endpoint

            assert stop_endpoint(name, self.home)
        else:
            self.tether('endpoint', 'stop', name)

    def status(self, name: str) -> dict[str, Any]:
        if self.ns is None:
            from tether.endpoint import endpoint_status

            return endpoint_status(name, self.home)
        rows = self.tether_json('endpoint', 'list')
        return next(r for r in rows if r['name'] == name)

    def connector(self, *endpoints: str, own_channels: bool = True, **kwargs: Any) -> Any:
        from tether.connectors.endpoint import EndpointConnector

        return EndpointConnector(
            list(endpoints), home=str(self.home), timeout=60, own_channels=own_channels, **kwargs
        )

    def pid(self, name: str) -> int:
        state = json.loads((self.home / 'endpoints' / name / 'state.json').read_text())
        return int(state['pid'])

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)


def write_relay_config(folder: Path, host: str, port: int, **limits: Any) -> Path:
    """A relay.toml with a TLS certificate for ``host`` and the users alice and bob."""
    from tether.relay import hash_token, make_self_signed

    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / 'relay.pem').exists():
        cert, key = make_self_signed('relay.test', [host])
        (folder / 'relay.pem').write_text(cert)
        (folder / 'relay.key').write_text(key)
        (folder / 'relay.key').chmod(0o600)
    lines = [
        f'host = "{host}"',
        f'port = {port}',
        f'data_port = {port + 1 if port else 0}',
        f'udp_port = {port}',
        'tls_cert = "relay.pem"',
        'tls_key = "relay.key"',
        *(f'{k} = {v}' for k, v in limits.items()),
    ]
    for user, token in TOKENS.items():
        lines += ['[[users]]', f'name = "{user}"', f'token_sha256 = "{hash_token(token)}"']
    path = folder / 'relay.toml'
    path.write_text('\n'.join(lines) + '\n')
    return path


class Relay:
    """A ``tether relay`` process (in a namespace or on loopback)."""

    def __init__(self, config: Path, ns: str | None = None) -> None:
        self.config = config
        self.ns = ns
        self.proc: subprocess.Popen[str] | None = None
        self.address = ''

    def start(self) -> Relay:
        cmd = [TETHER, 'relay', '--config', str(self.config)]
        if self.ns:
            cmd = ['ip', 'netns', 'exec', self.ns, *cmd]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r'relay listening on (\S+):(\d+)', line)
            if m:
                self.address = f'{m.group(1)}:{m.group(2)}'
                return self
            if not line and self.proc.poll() is not None:
                break
        raise AssertionError(f'relay did not start: {self.proc.stderr.read()}')

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


def wait_for(predicate: Any, timeout: float = 30.0, what: str = 'condition') -> Any:
    """Poll ``predicate`` (bounded) until it returns something truthy (a failed assertion,
    a missing key or an exhausted iterator in it mean "not yet")."""
    return wait_until(
        predicate,
        timeout=timeout,
        interval=0.02,
        message=what,
        ignore=(AssertionError, KeyError, StopIteration),
    )


@pytest.fixture(scope='session')
def loop_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    """A relay on a free loopback port (TLS, users alice and bob)."""
    folder = tmp_path_factory.mktemp('relay')
    relay = Relay(write_relay_config(folder, '127.0.0.1', 0, max_endpoints_per_user=3)).start()
    yield relay
    relay.stop()


@pytest.fixture
def site(tmp_path: Path, loop_relay: Relay) -> Iterator[Site]:
    """A loopback site whose home sits next to the relay's certificate."""
    home = tmp_path / 'home'
    home.mkdir()
    (tmp_path / 'relay.pem').write_text((loop_relay.config.parent / 'relay.pem').read_text())
    s = Site(home)
    yield s
    from tether.endpoint import stop_endpoint

    for folder in sorted((home / 'endpoints').glob('*')):
        stop_endpoint(folder.name, home)
    s.close()
