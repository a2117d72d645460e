"""The distributed in-memory connector: one object server per host, fetched directly.

The first ``put`` on a host starts (or attaches to) that host's node server
(:mod:`tether.node`), which is shared by every process on the host and outlives the
process that started it (until ``tether node stop`` or its idle timeout). Keys carry the
address of the server holding the object, so ``get`` goes straight to that server from
any host: the store grows as proxies spread to new nodes, and no object passes through
a third party.

Example:
    ```python
    from tether.connectors.node import NodeConnector
    from tether.store import Store

    store = Store('sim', NodeConnector(memory='8GB'))
    p = store.proxy(big_array)   # kept in this host's node server
    # ship `p` to a task on another host: resolving it fetches from this host directly
    ```

Every host must share the secret (``secret=``, the file named by ``secret_file=``,
``$TETHER_NODE_SECRET``, the file ``$TETHER_NODE_SECRET_FILE``, or the secret file
``~/.config/tether/node.secret``, which hosts with a shared home share). The secret is
never part of ``NodeConnector.config()``, so it never travels in a proxy, a store
config or a stream event: a connector rebuilt in another process resolves it there.
"""

from __future__ import annotations

import logging
import operator
import os
import ssl
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tether._serve import codes as proto
from tether._serve.messages import NodeStatus, ObjectReply, decode_reply, decode_status
from tether._serve.spawn import detect_address, ensure_server, resolve_secret, stop_server
from tether._serve.state import NodeState, check_name, default_run_dir
from tether._serve.tls import client_context
from tether._wire import SyncClient
from tether.connectors._context import ClosingContext
from tether.connectors._util import found_values, new_id, per_group
from tether.connectors.config import ConfiguredConnector, ConnectorConfigModel, secret_field
from tether.exceptions import (
    ConfigError,
    ConnectorClosedError,
    ConnectorError,
    WireConnectionError,
    WireError,
)
from tether.serialize import BytesLike

__all__ = ['NodeConnector', 'NodeConnectorConfig', 'NodeKey']

_server_of = operator.attrgetter('host', 'port')  # of a NodeKey

logger = logging.getLogger(__name__)


# Secrets given to connectors of this process, by node name: a connector rebuilt here
# from a config (which never holds the secret) finds it again.
_secrets: dict[str, str] = {}
_secrets_lock = threading.Lock()


def _resolve_node_secret(name: str, secret: str | None, secret_file: str | None) -> str:
    if secret:
        with _secrets_lock:
            _secrets[name] = secret
        return secret
    with _secrets_lock:
        remembered = _secrets.get(name)
    if remembered is not None:
        return remembered
    if secret_file:
        try:
            with open(secret_file) as f:
                value = f.read().strip()
        except OSError as e:
            raise ConfigError(f'cannot read the node secret file {secret_file!r}: {e}') from e
        if not value:
            raise ConfigError(f'the node secret file {secret_file!r} is empty')
        return value
    return resolve_secret(None)


class NodeKey(NamedTuple):
    """Key of an object in a node server: the object id and the holder's address."""

    object_id: str
    host: str
    port: int


class NodeConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`NodeConnector` (see its arguments; ``secret`` is never
    dumped)."""

    name: str = 'default'
    address: str | None = None
    bind: str | None = None
    port: int = 0
    memory: str | None = None
    spill_dir: str | None = None
    idle_timeout: float | None = 3600.0
    secret: str | None = secret_field()
    secret_file: str | None = None
    run_dir: str | None = None
    timeout: float = 30.0
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None


class NodeConnector(ConfiguredConnector, ClosingContext):
    """A connector whose objects live in per-host in-memory node servers.

    Args:
        name: Name of the node server (one per name per host); connectors with the same
            name share a host's server.
        address: Address other hosts reach this host's server by (default:
            ``$TETHER_NODE_ADDRESS`` or the address of the default route).
        bind: Address the spawned server listens on (default: ``address`` if given,
            else all interfaces).
        port: Port of a spawned server (0: any free port).
        memory: Memory budget of a spawned server (``'4GB'``; default: half of RAM).
        spill_dir: Where a spawned server spills objects past its budget.
        idle_timeout: A spawned server stops after this many seconds without clients
            or requests (``None``: never). Its objects are lost when it stops.
        secret: Shared secret of the node servers, for this process only: never in
            :meth:`config`; connectors of the same ``name`` rebuilt in this process use
            it too. Default: ``secret_file``, else ``$TETHER_NODE_SECRET``, else
            ``$TETHER_NODE_SECRET_FILE`` or ``~/.config/tether/node.secret`` (created
            on first use, mode 0600).
        secret_file: A file holding the secret (kept in :meth:`config` by path).
        run_dir: Directory of the discovery files (default: ``$TETHER_NODE_RUN_DIR``,
            ``$XDG_RUNTIME_DIR/tether-node`` or ``/tmp/tether-node-<uid>``).
        timeout: Seconds any network wait may take.
        tls: Speak TLS to the node servers (each server's certificate must be valid for
            the address in its keys).
        tls_ca: PEM file of the authority (or the self-signed certificate) that the
            servers' certificates are checked against (default: the system's).
        tls_cert: PEM certificate a server spawned by this connector presents (with
            ``tls_key``); it then serves TLS only.
        tls_key: PEM private key of ``tls_cert``.

    Raises:
        ConfigError: if ``name`` is not a valid node name (letters, digits, ``_``, ``-``
            and ``.``; no path separators).

    A server spawned without ``bind`` or ``address`` listens on every interface of the
    host (so that other hosts reach it); this is logged as a warning and shown by
    ``tether node status``. Pass ``bind='127.0.0.1'`` for a host-local store.
    """

    def __init__(
        self,
        name: str = 'default',
        *,
        address: str | None = None,
        bind: str | None = None,
        port: int = 0,
        memory: str | None = None,
        spill_dir: str | None = None,
        idle_timeout: float | None = 3600.0,
        secret: str | None = None,
        secret_file: str | None = None,
        run_dir: str | None = None,
        timeout: float = 30.0,
        tls: bool = False,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
    ) -> None:
        self.name = check_name(name)
        self.address = address
        self.bind = bind
        self.port = port
        self.memory = memory
        self.spill_dir = spill_dir
        self.idle_timeout = idle_timeout
        self.secret_file = secret_file
        self.run_dir = run_dir
        self.timeout = timeout
        self.tls = tls or tls_cert is not None
        self.tls_ca = tls_ca
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self._ssl: ssl.SSLContext | None = None
        self._secret = _resolve_node_secret(self.name, secret, secret_file)
        self._settle()
        self._local: tuple[str, int] | None = None
        self._clients: dict[tuple[str, int], SyncClient] = {}
        self._lock = threading.Lock()
        self._closed = False
        _CONNECTORS.add(self)

    def __repr__(self) -> str:
        return f'NodeConnector(name={self.name!r})'

    def __reduce__(self) -> Any:
        raise TypeError(
            'a NodeConnector is not pickled (it holds connections and the node secret): '
            'pickle a proxy or a StoreConfig, which rebuild it',
        )

    def _after_fork(self) -> None:
        # Another thread may have held the lock at the fork: the child gets a fresh one.
        # The pooled clients drop the parent's sockets themselves (see SyncClient).
        self._lock = threading.Lock()

    # Servers and clients ---------------------------------------------------------------

    @property
    def _run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else default_run_dir()

    def _local_server(self) -> tuple[str, int]:
        """``(address, port)`` of this host's server, starting it if needed."""
        local = self._local
        if local is not None:
            return local
        with self._lock:
            if self._local is None:
                state = self._ensure()
                self._local = (state.address, state.port)
            return self._local

    def _ensure(self) -> NodeState:
        address = self.address or detect_address()
        return ensure_server(
            self.name,
            self._run_dir,
            secret=self._secret,
            address=address,
            bind=self.bind or (self.address or '0.0.0.0'),
            port=self.port,
            memory=self.memory,
            spill_dir=self.spill_dir,
            idle_timeout=self.idle_timeout,
            timeout=self.timeout,
            tls_cert=self.tls_cert,
            tls_key=self.tls_key,
        )

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        if self._ssl is None:
            try:
                self._ssl = client_context(self.tls_ca)
            except (OSError, ssl.SSLError) as e:
                raise ConnectorError(f'{self!r}: cannot load tls_ca {self.tls_ca!r}: {e}') from e
        return self._ssl

    def _client(self, host: str, port: int) -> SyncClient:
        if self._closed:
            raise ConnectorClosedError(f'{self!r} is closed')
        client = self._clients.get((host, port))
        if client is None:
            with self._lock:
                client = self._clients.get((host, port))
                if client is None:
                    client = SyncClient(
                        host,
                        port,
                        secret=self._secret,
                        ssl=self._ssl_context(),
                        timeout=self.timeout,
                        client=f'NodeConnector {self.name}',
                    )
                    self._clients[(host, port)] = client
        return client

    @contextmanager
    def _errors(self, what: str, host: str, port: int) -> Iterator[None]:
        try:
            yield
        except WireConnectionError as e:
            raise ConnectorError(
                f'node server {host}:{port} ({self.name!r}) unreachable during {what}: {e}. '
                'The server holding the object stopped or cannot be reached from here.',
            ) from e
        except WireError as e:
            raise ConnectorError(
                f'node server {host}:{port} ({self.name!r}) failed during {what}: {e}',
            ) from e

    def _request(
        self,
        what: str,
        server: tuple[str, int],
        mtype: int,
        ids: list[str],
        payloads: Sequence[Any] = (),
    ) -> tuple[ObjectReply, list[Any]]:
        host, port = server
        with self._errors(what, host, port):
            frame = self._client(host, port).request(mtype, {'ids': ids}, payloads)
            # Never hand out data that answers another request.
            return decode_reply(frame.header, ids, len(frame.payloads)), frame.payloads

    # Connector protocol ----------------------------------------------------------------

    def close(self, stop_server: bool = False) -> None:
        """Close the connections (and stop this host's server if ``stop_server``)."""
        if stop_server:
            self.stop_server()
        self._closed = True
        with self._lock:
            clients, self._clients = self._clients, {}
        for client in clients.values():
            client.close()

    def stop_server(self) -> bool:
        """Stop this host's server of this name (its objects are lost)."""
        self._local = None
        return stop_server(self._run_dir, self.name, timeout=self.timeout)

    config_model = NodeConnectorConfig

    def put(self, data: BytesLike) -> NodeKey:
        """Store ``data`` in this host's server and return its key."""
        return self.put_parts([data])

    def _put_local(self, what: str, payloads: Sequence[Any]) -> list[NodeKey]:
        """Put into this host's server; if it died since, start a new one and retry once."""
        for attempt in (0, 1):
            host, port = self._local_server()
            keys = [NodeKey(new_id(), host, port) for _ in payloads]
            try:
                self._request(what, (host, port), proto.PUT, [k.object_id for k in keys], payloads)
            except ConnectorError as e:
                if attempt or not isinstance(e.__cause__, WireConnectionError):
                    raise
                logger.info('local node server %s:%d is gone (%s): restarting it', host, port, e)
                with self._lock:
                    if self._local == (host, port):
                        self._local = None
                continue
            return keys
        raise AssertionError('unreachable')  # pragma: no cover

    def put_parts(self, parts: Sequence[BytesLike]) -> NodeKey:
        """Store the concatenation of ``parts`` (sent without joining them)."""
        return self._put_local('put', [parts])[0]

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[NodeKey]:
        """Store each item's parts as one object (sent without joining), in one request."""
        if not batch:
            return []
        return self._put_local('put_batch', list(batch))

    def put_batch(self, datas: Sequence[BytesLike]) -> list[NodeKey]:
        """Store each item in this host's server, in one request."""
        if not datas:
            return []
        return self._put_local('put_batch', datas)

    def get(self, key: NodeKey) -> BytesLike | None:
        """Fetch the object directly from the server holding it (``None`` if missing)."""
        reply, payloads = self._request('get', (key.host, key.port), proto.GET, [key.object_id])
        return payloads[0] if reply.found and reply.found[0] else None

    def get_batch(self, keys: Sequence[NodeKey]) -> list[BytesLike | None]:
        """Fetch several objects: one request per holding server."""

        def get_from(server: tuple[str, int], idx: list[int]) -> list[BytesLike | None]:
            ids = [keys[i].object_id for i in idx]
            reply, got = self._request('get_batch', server, proto.GET, ids)
            return found_values(reply.found, got, len(idx))

        return per_group(keys, _server_of, get_from)

    def exists(self, key: NodeKey) -> bool:
        """Return whether the holding server has the object."""
        reply, _ = self._request('exists', (key.host, key.port), proto.EXISTS, [key.object_id])
        return bool(reply.exists and reply.exists[0])

    def evict(self, key: NodeKey) -> None:
        """Remove the object from its server (no error if missing)."""
        self._request('evict', (key.host, key.port), proto.EVICT, [key.object_id])

    def new_key(self, data: BytesLike | None = None) -> NodeKey:
        """Reserve a key in this host's server (``data`` is not stored: :meth:`set` does)."""
        host, port = self._local_server()
        return NodeKey(new_id(), host, port)

    def set(self, key: NodeKey, data: BytesLike) -> None:
        """Store ``data`` under ``key`` (in the server the key names)."""
        self._request('set', (key.host, key.port), proto.PUT, [key.object_id], [data])

    def status(self) -> NodeStatus:
        """Statistics of this host's server (objects, memory, spills, clients).

        Raises:
            ConnectorError: the server does not answer, or its reply is malformed.
        """
        host, port = self._local_server()
        with self._errors('status', host, port):
            frame = self._client(host, port).request(proto.STATUS)
            return decode_status(frame.header)


_CONNECTORS: weakref.WeakSet[NodeConnector] = weakref.WeakSet()


def _reset_connectors_after_fork() -> None:
    for connector in list(_CONNECTORS):
        connector._after_fork()


os.register_at_fork(after_in_child=_reset_connectors_after_fork)
