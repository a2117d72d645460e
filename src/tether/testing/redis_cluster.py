"""A Redis Cluster of the test's own on loopback: masters and replicas of ``redis-server``.

:class:`RedisClusterServers` starts ``masters`` masters with ``replicas`` replicas each
(three and one by default: six servers), each a :class:`~tether.testing.RedisServer` in
cluster mode on a free port, joins them with ``redis-cli --cluster create``, and returns
once every node reports the cluster ``ok``. Tests may kill a master
(:meth:`~RedisClusterServers.kill`) and wait for its replica to take over
(:meth:`~RedisClusterServers.wait_failover`): every wait is on the cluster's own state,
with a deadline, never a fixed sleep::

    from tether.testing.redis_cluster import RedisClusterServers

    with RedisClusterServers() as cluster:
        connector = RedisConnector(cluster.host, cluster.port, cluster=True)
        ...
        old = cluster.master_of(key)
        cluster.wait_replicated()
        cluster.kill(old)
        cluster.wait_failover(old)

The failover timeout (``cluster-node-timeout``) is ``node_timeout`` milliseconds (1000 by
default, so that a killed master is replaced within a few seconds).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

from tether._closing import StartStopContext
from tether.exceptions import ServerStartError
from tether.testing.servers import LOOPBACK, RedisServer, free_port

__all__ = ['RedisClusterServers', 'command']

_POLL = 0.05


def command(port: int, *args: str, host: str = LOOPBACK, timeout: float = 5.0) -> str:
    """Send one command to the server at ``host:port`` (inline protocol); its reply's text.

    Bulk replies come back as their text; errors as ``-ERR ...``. For the small status
    commands (``CLUSTER INFO``, ``INFO replication``, ``ROLE`` ...) tests wait on.
    """
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(' '.join(args).encode() + b'\r\n')
        data = b''
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.startswith((b'+', b'-', b':')) and data.endswith(b'\r\n'):
                break
            if data.startswith(b'$'):
                head, _, rest = data.partition(b'\r\n')
                if len(rest) >= int(head[1:]) + 2:
                    break
    head, _, rest = data.partition(b'\r\n')
    if head.startswith(b'$'):
        return rest[: int(head[1:])].decode()
    return data.decode().strip()


class RedisClusterServers(StartStopContext):
    """A Redis Cluster on loopback (see the module's documentation).

    Args:
        masters: Number of masters (at least 3, as Redis requires).
        replicas: Replicas per master.
        node_timeout: ``cluster-node-timeout`` in milliseconds.
        startup_timeout: Seconds to wait for the cluster to be ``ok``.
    """

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 1,
        *,
        node_timeout: int = 1000,
        startup_timeout: float = 60.0,
    ) -> None:
        if masters < 3:
            raise ValueError(f'a Redis Cluster needs at least 3 masters, got {masters}')
        self.host = LOOPBACK
        self._count = masters * (replicas + 1)
        self._replicas = replicas
        self._node_timeout = node_timeout
        self._startup_timeout = startup_timeout
        self._dir: str | None = None
        self.servers: list[RedisServer] = []

    @property
    def port(self) -> int:
        """The port of a node that is up (any node serves as an entry point)."""
        for server in self.servers:
            if server.running:
                return server.port
        raise ServerStartError('no node of the cluster is running')

    @property
    def ports(self) -> list[int]:
        """The ports of the nodes that are running."""
        return [s.port for s in self.servers if s.running]

    def start(self) -> None:
        """Start the servers, create the cluster and wait until it is ``ok``."""
        cli = shutil.which('redis-cli')
        if cli is None:
            raise ServerStartError('cannot create a Redis Cluster: redis-cli is not installed')
        self._dir = tempfile.mkdtemp(prefix='tether-redis-cluster-')
        try:
            for i in range(self._count):
                server = RedisServer(
                    _cluster_port(),
                    args=[
                        '--cluster-enabled',
                        'yes',
                        '--cluster-config-file',
                        f'nodes-{i}.conf',
                        '--cluster-node-timeout',
                        str(self._node_timeout),
                        # A master waits this long (5 s by default) for more replicas
                        # before it sends one its first copy: here each has one, at once.
                        '--repl-diskless-sync-delay',
                        '0',
                    ],
                    directory=f'{self._dir}/{i}',
                )
                os.makedirs(f'{self._dir}/{i}')
                server.start()
                self.servers.append(server)
            create = [cli, '--cluster', 'create']
            create += [f'{self.host}:{s.port}' for s in self.servers]
            create += ['--cluster-replicas', str(self._replicas), '--cluster-yes']
            done = subprocess.run(
                create,
                capture_output=True,
                text=True,
                timeout=self._startup_timeout,
                check=False,
            )
            if done.returncode != 0:
                raise ServerStartError(f'redis-cli --cluster create failed: {done.stdout[-2000:]}')
            self.wait_ok()
            self.wait_replicated()  # every replica synced: each can take over
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill every node and remove their files."""
        for server in self.servers:
            server.stop()
        self.servers = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # The cluster's state --------------------------------------------------------------

    def _wait(self, condition: str, check: object) -> None:
        assert callable(check)
        deadline = time.monotonic() + self._startup_timeout
        while True:
            try:
                if check():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(f'the Redis Cluster did not get {condition} in time')
            time.sleep(_POLL)

    def _ok_everywhere(self) -> bool:
        ports = self.ports
        return all('cluster_state:ok' in command(p, 'CLUSTER', 'INFO') for p in ports)

    def wait_ok(self) -> None:
        """Wait until every running node reports ``cluster_state:ok`` with all slots
        served by masters that agree on the map."""
        self._wait('ok', self._ok_everywhere)

    def masters(self) -> list[int]:
        """The ports of the running masters."""
        return [p for p in self.ports if self._is_master(p)]

    def _is_master(self, port: int) -> bool:
        return 'role:master' in command(port, 'INFO', 'replication')

    def master_of(self, key: str) -> int:
        """The port of the master that serves ``key``'s slot."""
        slot = int(command(self.port, 'CLUSTER', 'KEYSLOT', key).lstrip(':'))
        for port in self.masters():
            text = command(port, 'CLUSTER', 'NODES')
            for line in text.splitlines():
                fields = line.split()
                if 'myself' in fields[2] and 'master' in fields[2]:
                    for span in fields[8:]:
                        low, _, high = span.partition('-')
                        if low.isdigit() and int(low) <= slot <= int(high or low):
                            return port
        raise ServerStartError(f'no master serves slot {slot}')

    def wait_replicated(self) -> None:
        """Wait until every replica is online and has received all of its master's
        writes (a replica that never synced cannot take over)."""

        def caught_up() -> bool:
            for port in self.masters():
                info = command(port, 'INFO', 'replication')
                offset = _field(info, 'master_repl_offset')
                lines = [line for line in info.splitlines() if line.startswith('slave')]
                if len(lines) < self._replicas:
                    return False
                for line in lines:
                    if 'state=online' not in line or f'offset={offset},' not in line + ',':
                        return False
            return True

        self._wait('its replicas caught up', caught_up)

    def kill(self, port: int) -> None:
        """Kill the node on ``port`` (as a crash would)."""
        for server in self.servers:
            if server.port == port:
                server.stop()
                return
        raise ValueError(f'no node of this cluster on port {port}')

    def wait_failover(self, port: int) -> None:
        """Wait until a replica of the killed master on ``port`` is master in its place
        and the cluster is ``ok`` again on every running node."""

        def replaced() -> bool:
            # Every running node sees the dead master's slots taken over (its line lists
            # no slots any more), and says the cluster is ok.
            for p in self.ports:
                nodes = command(p, 'CLUSTER', 'NODES')
                for line in nodes.splitlines():
                    if f':{port}@' in line and len(line.split()) > 8:
                        return False
            return self._ok_everywhere()

        self._wait(f'over the loss of the master on port {port}', replaced)


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 higher) is free too."""
    for _ in range(1000):
        port = free_port()
        if port > 55535:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port + 10000))
            except OSError:
                continue
        return port
    raise ServerStartError('no free port pair for a Redis Cluster node')


def _field(info: str, name: str) -> str:
    for line in info.splitlines():
        if line.startswith(name + ':'):
            return line.split(':', 1)[1].strip()
    return ''
