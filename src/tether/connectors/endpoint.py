"""The endpoint connector: objects in the endpoint of the site, reachable from every site.

Each site a user works on runs an endpoint (``tether endpoint configure NAME`` then
``tether endpoint start NAME``). A connector talks only to the endpoint of the site it
runs on, found among ``endpoints`` in the local configuration (``$TETHER_HOME``). Keys
carry the object id and the UUID of the endpoint that owns the object, so a proxy made
at site A resolves unchanged in any process at site B: B's endpoint forwards the request
to A's over a peer channel. For the objects of each other endpoint it uses, a connector
asks its endpoint for a peer channel of its own (``own_channels``): the endpoint then
passes that connection's bytes to the owner and back without decoding them, which saves
its parsing and bookkeeping on every request. Where the endpoint has none to give (all
in use, or a path that carries none), requests are forwarded as usual.

Example:
    ```python
    from tether.connectors.endpoint import EndpointConnector
    from tether.store import Store

    store = Store('campaign', EndpointConnector(['site-a', 'site-b']))
    p = store.proxy(big_array)   # kept in this site's endpoint
    # send `p` to a task at the other site: resolving it goes endpoint to endpoint
    ```

Clients authenticate to their endpoint with its client token (the file ``client.token``
in the endpoint's folder, readable by its user only). The token is never part of the
connector's config. The config does name ``home``, the directory where the endpoint's
address and token are looked up, so a config from someone else could point a connector
at their endpoint: a connector uses an endpoint folder (and a ``home`` given in its
config) only if it belongs to the current user and others cannot write to it, and stream
consumers accept such configs only as they accept any other (see ``docs/security.md``).
"""

from __future__ import annotations

import functools
import operator
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tether._once import create_once
from tether._serve import codes as proto
from tether._serve.messages import ObjectReply, ObjectRequest, decode_reply, encode
from tether._serve.site import SiteConfig, list_configs, read_state
from tether._wire import SyncClient, SyncConnection
from tether.connectors._context import ClosingContext
from tether.connectors._util import found_values, new_id, per_group
from tether.connectors.config import ConfiguredConnector, ConnectorConfigModel
from tether.exceptions import (
    ConnectorClosedError,
    ConnectorError,
    EndpointError,
    PeerChannelError,
    RemoteError,
    WireConnectionError,
    WireError,
)
from tether.serialize import BytesLike

__all__ = ['EndpointConnector', 'EndpointConnectorConfig', 'EndpointKey']

_owner_of = operator.attrgetter('endpoint_id')  # of an EndpointKey

_OWN_BUSY_WAIT = 1.0
"""Seconds a connector forwards through the pool after its endpoint had no channel to give
(or could not peer)."""
_OWN_REFUSED_WAIT = 60.0
"""Seconds it does after a refusal for any other reason (a path that carries none)."""


class _NoOwnChannelError(Exception):
    """The endpoint gave no channel of its own (``code`` says why)."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(code)


def _ask_own(endpoint: str, conn: SyncConnection) -> None:
    """Make ``conn`` a connection with a channel of its own to ``endpoint``."""
    try:
        conn.request(proto.CHANNEL, {'endpoint': endpoint})
    except RemoteError as e:
        raise _NoOwnChannelError(e.code) from e


def _check_owned(path: Path, what: str) -> None:
    """Refuse a directory of another user, or one that others can write to."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return  # nothing configured there: reported as such by the caller
    except OSError as e:
        raise ConnectorError(f'cannot inspect the endpoint {what} {path}: {e}') from e
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ConnectorError(
            f'refusing the endpoint {what} {path}: it must belong to you and be writable '
            f'by you only (owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}). The '
            'endpoint address and client token found there decide which server this '
            "connector trusts, so a store config naming someone else's directory is "
            'refused',
        )


class EndpointKey(NamedTuple):
    """Key of an object in an endpoint: the object id and the owning endpoint's UUID."""

    object_id: str
    endpoint_id: str


class EndpointConnectorConfig(ConnectorConfigModel):
    """Configuration of an :class:`EndpointConnector` (see its arguments)."""

    endpoints: list[str]
    home: str | None = None
    timeout: float = 300.0
    own_channels: bool = True
    unix_socket: bool = True


class EndpointConnector(ConfiguredConnector, ClosingContext):
    """A connector whose objects live in the endpoint of each site.

    Args:
        endpoints: UUIDs or names of the endpoints this application uses; in each
            process the connector uses the first of these that runs on its host.
        home: ``$TETHER_HOME`` to look for endpoint configurations in (default: the
            environment's, else the XDG data directory).
        timeout: Seconds any network wait may take (large remote objects need more).
        own_channels: Ask the endpoint for a peer channel of this connector's own to each
            other endpoint it reaches (requests then pass through undecoded); ``False``:
            every request is forwarded through the endpoint's shared channels.
        unix_socket: Reach an endpoint on this host over its Unix socket when it has one
            (TCP otherwise); ``False``: always over TCP.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        home: str | None = None,
        timeout: float = 300.0,
        own_channels: bool = True,
        unix_socket: bool = True,
    ) -> None:
        if isinstance(endpoints, str) or not endpoints:
            raise ConnectorError('EndpointConnector needs a list of endpoint UUIDs or names')
        self.endpoints = [str(e) for e in endpoints]
        self.home = home
        self.timeout = timeout
        self.own_channels = own_channels
        self.unix_socket = unix_socket
        # No secret: each process reads its own site's token.
        self._settle()
        self._local: tuple[SiteConfig, SyncClient] | None = None
        self._own: dict[str, SyncClient] = {}
        """Per owning endpoint: connections with a channel of their own to it."""
        self._own_after: dict[str, float] = {}
        """Per owning endpoint: until when (``time.monotonic()``) not to ask again."""
        self._own_factory: Callable[..., SyncClient] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f'EndpointConnector({self.endpoints!r})'

    # The local endpoint ----------------------------------------------------------------

    def _find_local(self) -> tuple[SiteConfig, SyncClient]:
        home = Path(self.home) if self.home else None
        if home is not None:
            _check_owned(home, 'home')
        configured = []
        here = list_configs(home)
        # The first endpoint of the list that runs on this host, in the list's order.
        for wanted in self.endpoints:
            config = next((c for c in here if wanted in (c.uuid, c.name)), None)
            if config is None:
                continue
            configured.append(config.name)
            _check_owned(config.folder(home), f'folder of endpoint {config.name!r}')
            state = read_state(config.folder(home))
            if state is None:
                continue
            try:
                token = config.client_token(home)
            except EndpointError as e:
                raise ConnectorError(str(e)) from e
            clients = functools.partial(
                SyncClient, state['host'], int(state['port']), secret=token, timeout=self.timeout
            )
            # Channels of their own go over TCP even on the endpoint's host: spliced to a
            # peer over the link, a TCP client connection was measured 0.2-1% quicker at
            # 1 KB than a Unix socket, which gains its 25% on local requests only.
            self._own_factory = functools.partial(
                clients, client=f'EndpointConnector {config.name} (own channel)'
            )
            unix_path = state.get('socket') if self.unix_socket else None
            return config, clients(client=f'EndpointConnector {config.name}', unix_path=unix_path)
        where = f'in {home}' if home else 'in $TETHER_HOME'
        if configured:
            raise ConnectorError(
                f'none of the endpoints {self.endpoints} runs on this host (configured here '
                f'{where}: {configured}): start one with `tether endpoint start NAME`',
            )
        raise ConnectorError(
            f'none of the endpoints {self.endpoints} is configured on this host {where}: '
            'create one with `tether endpoint configure NAME` and add it to the list',
        )

    def _endpoint(self) -> tuple[SiteConfig, SyncClient]:
        if self._closed:
            raise ConnectorClosedError(f'{self!r} is closed')
        return create_once(self, '_local', self._lock, self._find_local)

    @property
    def local_uuid(self) -> str:
        """UUID of the endpoint this connector talks to."""
        return self._endpoint()[0].uuid

    @contextmanager
    def _errors(self, what: str, key_endpoint: str | None) -> Iterator[None]:
        config = self._local[0].name if self._local else '?'
        try:
            yield
        except RemoteError as e:
            owner = f' (object owned by endpoint {key_endpoint})' if key_endpoint else ''
            if e.code == 'peer-failed':
                # The owner died (or its link broke) while the request was under way.
                raise PeerChannelError(
                    f'endpoint {config}: the channel to the owner failed during {what}: {e}',
                    peer=key_endpoint or '',
                ) from e
            raise ConnectorError(f'endpoint {config} failed during {what}{owner}: {e}') from e
        except WireError as e:
            self._forget()
            raise ConnectorError(f'endpoint {config} unreachable during {what}: {e}') from e

    def _forget(self) -> None:
        """Close every connection and look for the local endpoint again on next use."""
        with self._lock:
            local, self._local = self._local, None
            own, self._own = list(self._own.values()), {}
        if local is not None:
            local[1].close()
        for client in own:
            client.close()

    def _own_client(self, config: SiteConfig, endpoint: str) -> SyncClient | None:
        """The connections with a channel of their own to ``endpoint`` (``None``: forward)."""
        if not self.own_channels or endpoint in (config.uuid, config.name):
            return None
        if self._own_after and time.monotonic() < self._own_after.get(endpoint, 0.0):
            return None
        client = self._own.get(endpoint)
        if client is not None:
            return client
        with self._lock:
            client = self._own.get(endpoint)
            if client is None and self._own_factory is not None:
                client = self._own_factory(on_connect=functools.partial(_ask_own, endpoint))
                self._own[endpoint] = client
        return client

    def _no_own(self, endpoint: str, refusal: _NoOwnChannelError) -> None:
        """The endpoint gave no channel of its own: forward for a while."""
        # No idle channel, or no peering now (the forwarding path reports why): ask again
        # soon, keeping the connections that have one (other threads'). Anything else
        # (a path that carries none, an endpoint that does not know CHANNEL): later.
        short = refusal.code in ('busy', 'peering')
        with self._lock:
            self._own_after[endpoint] = time.monotonic() + (
                _OWN_BUSY_WAIT if short else _OWN_REFUSED_WAIT
            )
            client = None if short else self._own.pop(endpoint, None)
        if client is not None:
            client.close()

    def _request(
        self,
        what: str,
        mtype: int,
        ids: list[str],
        endpoint: str,
        payloads: Sequence[Any] = (),
    ) -> tuple[ObjectReply, list[Any]]:
        header = encode(ObjectRequest(ids, endpoint))
        for attempt in (0, 1):
            config, client = self._endpoint()
            own = self._own_client(config, endpoint)
            try:
                with self._errors(what, endpoint):
                    frame = None
                    if own is not None:
                        try:
                            frame = own.request(mtype, header, payloads)
                        except _NoOwnChannelError as e:
                            self._no_own(endpoint, e)
                    if frame is None:
                        frame = client.request(mtype, header, payloads)
                    # Never hand out data that answers another request.
                    return decode_reply(frame.header, ids, len(frame.payloads)), frame.payloads
            except ConnectorError as e:
                # The endpoint restarted (on another port) since we found it: find it
                # again and retry once; every request is idempotent (ids are ours).
                if attempt or not isinstance(e.__cause__, WireConnectionError):
                    raise
        raise AssertionError('unreachable')  # pragma: no cover

    # Connector protocol ----------------------------------------------------------------

    def close(self) -> None:
        """Close the connections to the local endpoint."""
        self._closed = True
        self._forget()

    config_model = EndpointConnectorConfig

    def put(self, data: BytesLike) -> EndpointKey:
        """Store ``data`` in the local endpoint and return its key."""
        return self.put_parts([data])

    def put_parts(self, parts: Sequence[BytesLike]) -> EndpointKey:
        """Store the concatenation of ``parts`` (sent without joining them)."""
        key = EndpointKey(new_id(), self.local_uuid)
        self._request('put', proto.PUT, [key.object_id], key.endpoint_id, [parts])
        return key

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[EndpointKey]:
        """Store each item's parts as one object (sent without joining), in one request."""
        if not batch:
            return []
        uuid = self.local_uuid
        keys = [EndpointKey(new_id(), uuid) for _ in batch]
        self._request('put_batch', proto.PUT, [k.object_id for k in keys], uuid, list(batch))
        return keys

    def put_batch(self, datas: Sequence[BytesLike]) -> list[EndpointKey]:
        """Store each item in the local endpoint, in one request."""
        if not datas:
            return []
        uuid = self.local_uuid
        keys = [EndpointKey(new_id(), uuid) for _ in datas]
        self._request('put_batch', proto.PUT, [k.object_id for k in keys], uuid, datas)
        return keys

    def get(self, key: EndpointKey) -> BytesLike | None:
        """Fetch the object (through the local endpoint, from its owner)."""
        reply, payloads = self._request('get', proto.GET, [key.object_id], key.endpoint_id)
        return payloads[0] if reply.found and reply.found[0] else None

    def get_batch(self, keys: Sequence[EndpointKey]) -> list[BytesLike | None]:
        """Fetch several objects: one request per owning endpoint."""

        def get_from(owner: str, idx: list[int]) -> list[BytesLike | None]:
            ids = [keys[i].object_id for i in idx]
            reply, got = self._request('get_batch', proto.GET, ids, owner)
            return found_values(reply.found, got, len(idx))

        return per_group(keys, _owner_of, get_from)

    def exists(self, key: EndpointKey) -> bool:
        """Return whether the owning endpoint has the object."""
        reply, _ = self._request('exists', proto.EXISTS, [key.object_id], key.endpoint_id)
        return bool(reply.exists and reply.exists[0])

    def evict(self, key: EndpointKey) -> None:
        """Remove the object from its owning endpoint (no error if missing)."""
        self._request('evict', proto.EVICT, [key.object_id], key.endpoint_id)

    def new_key(self, data: BytesLike | None = None) -> EndpointKey:
        """Reserve a key in the local endpoint (``data`` is not stored: :meth:`set` does)."""
        return EndpointKey(new_id(), self.local_uuid)

    def set(self, key: EndpointKey, data: BytesLike) -> None:
        """Store ``data`` under ``key`` (in the endpoint the key names)."""
        self._request('set', proto.PUT, [key.object_id], key.endpoint_id, [data])
