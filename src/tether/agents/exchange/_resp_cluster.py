"""The agent exchanges' RESP client on a Redis Cluster: each command to its slot's master.

:class:`ClusterRespClient` has the interface of :class:`~tether.agents.exchange._resp.
RespClient` (``pipeline``, ``execute``, ``script``, ``connect``, ``close``) over one
:class:`RespClient` pool per master. A command goes to the master of its first key's hash
slot (:func:`key_slot`, with ``{hash tags}``), from a slot map read with ``CLUSTER
SLOTS``. A ``MOVED`` reply refreshes the map and sends the command again (Redis did not
run it); an ``ASK`` reply sends it once, after ``ASKING``, to the node named. A master that
cannot be reached (killed: its replica is taking over) or a cluster that says
``CLUSTERDOWN``/``TRYAGAIN`` is asked again, with the map read again, until ``timeout``
seconds have passed: no command is ever sent twice, since each of those cases means it
was not run. A connection that fails in the middle of a command raises (the command may
have run) after refreshing the map, as on one server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from tether.agents.exchange._resp import (
    Pipelining,
    RedisConnectError,
    RedisReplyError,
    RespClient,
    RespConnection,
)
from tether.exceptions import AgentError

__all__ = ['ClusterRespClient', 'key_slot']

_SLOTS = 16384


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc16_table()


def key_slot(key: bytes | str) -> int:
    """The hash slot of ``key`` (CRC16 of its ``{tag}``, if it has a non-empty one)."""
    data = key.encode() if isinstance(key, str) else bytes(key)
    start = data.find(b'{')
    if start >= 0:
        end = data.find(b'}', start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc % _SLOTS


def _first_key(command: Sequence[Any]) -> Any:
    name = str(command[0]).upper()
    if name in ('EVAL', 'EVALSHA'):
        return command[3] if int(command[2]) > 0 else ''
    return command[1] if len(command) > 1 else ''


def _redirect(reply: Any) -> tuple[str, str, int] | None:
    if not isinstance(reply, RedisReplyError):
        return None
    words = str(reply).rpartition('answered: ')[2].split()
    if len(words) == 3 and words[0] in ('MOVED', 'ASK'):
        host, _, port = words[2].rpartition(':')
        if port.isdigit():
            return words[0], host, int(port)
    return None


def _retry_later(reply: Any) -> bool:
    text = str(reply).rpartition('answered: ')[2]
    return isinstance(reply, RedisReplyError) and text.startswith(('CLUSTERDOWN', 'TRYAGAIN'))


class ClusterRespClient(Pipelining):
    """:class:`RespClient`'s interface on a Redis Cluster (see the module's documentation).

    Args:
        host: Host of one node of the cluster (the others are discovered).
        port: Its port.
        password: Password for ``AUTH``.
        timeout: Seconds one operation may block, and how long a failover is waited for.
    """

    def __init__(
        self, host: str, port: int, *, password: str | None = None, timeout: float = 10.0
    ) -> None:
        self.host = host
        self.port = port
        self.password = password
        self.timeout = timeout
        self._seeds: list[tuple[str, int]] = [(host, port)]
        self._pools: dict[tuple[str, int], RespClient] = {}
        self._slots: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self.refresh()

    def _pool(self, node: tuple[str, int]) -> RespClient:
        with self._lock:
            pool = self._pools.get(node)
            if pool is None:
                pool = self._pools[node] = RespClient(
                    node[0], node[1], password=self.password, timeout=self.timeout
                )
            return pool

    def refresh(self) -> None:
        """Read the slot map again from the first node that answers."""
        with self._lock:
            candidates = list(dict.fromkeys(self._seeds + list(self._pools)))
        last: Exception | None = None
        for host, port in candidates:
            try:
                conn = RespConnection(host, port, password=self.password, timeout=self.timeout)
            except AgentError as e:
                last = e
                continue
            try:
                ranges = conn.execute('CLUSTER', 'SLOTS')
            except AgentError as e:
                last = e
                continue
            finally:
                conn.close()
            slots: list[tuple[str, int]] = [('', 0)] * _SLOTS
            nodes: list[tuple[str, int]] = []
            for first, last_slot, *servers in ranges:
                # (the replicas too: any of them may answer the next CLUSTER SLOTS)
                nodes += [(s[0].decode() or host, int(s[1])) for s in servers]
                for slot in range(int(first), int(last_slot) + 1):
                    slots[slot] = (servers[0][0].decode() or host, int(servers[0][1]))
            with self._lock:
                self._slots = slots
                self._seeds = list(dict.fromkeys([*self._seeds, *nodes]))
            return
        raise AgentError(f'no node of the Redis Cluster answers: {last}')

    def node_of(self, key: Any) -> tuple[str, int]:
        """The master that holds ``key`` (by the slot map last read)."""
        return self._slots[key_slot(key)]

    def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Run the commands, each on its slot's master; replies in order (errors as values)."""
        groups: dict[tuple[str, int], list[int]] = {}
        for i, command in enumerate(commands):
            groups.setdefault(self.node_of(_first_key(command)), []).append(i)
        replies: list[Any] = [None] * len(commands)
        for indexes in groups.values():
            for i, reply in zip(indexes, self._run([commands[i] for i in indexes]), strict=True):
                replies[i] = reply
        return replies

    def _run(self, commands: list[Sequence[Any]]) -> list[Any]:
        """Commands of one node, sent again while their node moved or is failing over."""
        deadline = time.monotonic() + self.timeout
        pending = list(range(len(commands)))
        replies: list[Any] = [None] * len(commands)
        delay = 0.02
        while True:
            node = self.node_of(_first_key(commands[pending[0]]))
            try:
                got = self._pool(node).pipeline([commands[i] for i in pending])
            except RedisConnectError:
                got = None  # not sent: the master is gone, its replica taking over
            except AgentError:
                self.refresh_quietly()
                raise
            again = []
            if got is not None:
                for i, reply in zip(pending, got, strict=True):
                    moved = _redirect(reply)
                    if moved is not None and moved[0] == 'ASK':
                        replies[i] = self._pool(moved[1:]).pipeline([['ASKING'], commands[i]])[1]
                    elif moved is not None or _retry_later(reply):
                        again.append(i)
                    else:
                        replies[i] = reply
            else:
                again = pending
            if not again:
                return replies
            if time.monotonic() >= deadline:
                if got is None:
                    raise AgentError(f'the Redis Cluster master at {node[0]}:{node[1]} is gone')
                for i in again:  # their last reply (MOVED, CLUSTERDOWN ...) as the value
                    replies[i] = got[pending.index(i)]
                return replies
            pending = again
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
            self.refresh_quietly()

    def refresh_quietly(self) -> None:
        """:meth:`refresh`, unless no node answers (a failover may be under way)."""
        with contextlib.suppress(AgentError):
            self.refresh()

    def connect(self, timeout: float | None = None, *, key: Any = '') -> RespConnection:
        """A connection of its own to the master of ``key`` (for blocking commands)."""
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while True:
            host, port = self.node_of(key)
            try:
                return RespConnection(
                    host,
                    port,
                    password=self.password,
                    timeout=timeout if timeout is not None else self.timeout,
                )
            except RedisConnectError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
            self.refresh_quietly()

    def close(self) -> None:
        """Close every node's idle connections."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
