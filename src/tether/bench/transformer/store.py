"""StoreTransformer: task data passed as tether proxies, through any tether connector.

The seed's ``ProxyTransformer`` (registered as ``store`` and ``proxystore``). Arguments
the filter selects are put in a :class:`~tether.store.Store` and replaced by proxies; a
task resolves them on the worker (timed, see :mod:`tether.bench.record`) and its large
results come back the same way. Objects the client put, and results it received, are
evicted when the transformer closes.

Configuration (the seed's figure 2.6)::

    [engine.transformer]
    name = "store"            # or "proxystore"

    [engine.transformer.connector]
    kind = "redis"
    options = { hostname = "localhost", port = 6379 }

Connector kinds are listed in :data:`CONNECTORS` (adding one is one line).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pydantic

from tether.bench.registry import register
from tether.bench.transformer._protocol import TransformerConfig
from tether.exceptions import ConfigError
from tether.proxy import Proxy, extract, resolve, resolve_async
from tether.store import Store, StoreConfig, get_key, get_or_create_store
from tether.store.config import import_from_path

__all__ = [
    'CONNECTORS',
    'ConnectorConfig',
    'ProxyTransformer',
    'ProxyTransformerConfig',
    'StoreTransformer',
    'StoreTransformerConfig',
]

CONNECTORS: dict[str, str] = {
    'endpoint': 'tether.connectors.endpoint.EndpointConnector',
    'file': 'tether.connectors.file.FileConnector',
    'local': 'tether.connectors.local.LocalConnector',
    'node': 'tether.connectors.node.NodeConnector',
    'redis': 'tether.connectors.redis.RedisConnector',
    'shared-memory': 'tether.connectors.shared_memory.SharedMemoryConnector',
}
"""Connector kinds a config may name: kind -> class (an allowlist; nothing else is
imported from a configuration)."""


class StoreTransformer:
    """Transforms objects into proxies of a :class:`~tether.store.Store`.

    Pickles as the store's config: each worker rebuilds the store once (through the
    per-process registry) and resolves proxies from it.

    Args:
        store: The store (registered in this process if it is not yet).
        extract_target: Tasks receive the resolved objects themselves (``True``) or the
            resolved proxies (``False``).
        async_resolve: Tasks receive the proxies unresolved, each already fetching its
            object in the background (TaPS's option; needs ``extract_target=False``).

    Raises:
        ValueError: ``async_resolve`` with ``extract_target``.
    """

    def __init__(
        self,
        store: Store[Any],
        *,
        extract_target: bool = True,
        async_resolve: bool = False,
    ) -> None:
        if async_resolve and extract_target:
            raise ValueError('async_resolve=True needs extract_target=False')
        self.store = store
        self.store_config = store.config()
        self.extract_target = extract_target
        self.async_resolve = async_resolve
        self._keys: list[Any] = []
        self._lock = threading.Lock()

    def __getstate__(self) -> tuple[StoreConfig, bool, bool]:
        return (self.store_config, self.extract_target, self.async_resolve)

    def __setstate__(self, state: tuple[StoreConfig, bool, bool]) -> None:
        self.store_config, self.extract_target, self.async_resolve = state
        self.store = get_or_create_store(self.store_config)
        self._keys = []
        self._lock = threading.Lock()

    def is_identifier(self, obj: Any) -> bool:
        """Return whether ``obj`` is a proxy (checked without resolving it)."""
        return issubclass(type(obj), Proxy)

    def transform(self, obj: Any) -> Proxy[Any]:
        """Put ``obj`` in the store and return an unresolved proxy of it."""
        proxy = self.store.proxy(obj, populate_target=False)
        self.track(proxy)
        return proxy

    def track(self, proxy: Any) -> None:
        """Evict the object behind ``proxy`` when this transformer closes."""
        try:
            key = get_key(proxy)
        except TypeError:
            return
        with self._lock:
            self._keys.append(key)

    def resolve(self, identifier: Proxy[Any]) -> Any:
        """Resolve the proxy (fetching the object now) and return it or its target.

        With ``async_resolve``, start fetching in the background and return the proxy.
        """
        if self.async_resolve:
            resolve_async(identifier)
            return identifier
        resolve(identifier)
        return extract(identifier) if self.extract_target else identifier

    def close(self) -> None:
        """Evict what this transformer put or received, then close the store."""
        with self._lock:
            keys, self._keys = self._keys, []
        if self.store.closed:
            return
        for key in keys:
            self.store.evict(key)
        self.store.close()


ProxyTransformer = StoreTransformer
"""The seed's name for :class:`StoreTransformer`."""


class ConnectorConfig(pydantic.BaseModel):
    """Which connector the store uses: a kind of :data:`CONNECTORS` and its options."""

    model_config = pydantic.ConfigDict(extra='forbid')

    kind: str = pydantic.Field(
        default='file', description=f'one of {", ".join(sorted(CONNECTORS))}'
    )
    options: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description='keyword arguments of the connector (a JSON object on the CLI)',
    )

    @pydantic.field_validator('kind')
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in CONNECTORS:
            raise ValueError(
                f'unknown connector kind {kind!r}; kinds: {", ".join(sorted(CONNECTORS))}',
            )
        return kind

    def get_connector(self) -> Any:
        """Build the connector."""
        ctype = import_from_path(CONNECTORS[self.kind])
        options = dict(self.options)
        if self.kind == 'file' and 'store_dir' not in options:
            import tempfile

            options['store_dir'] = tempfile.mkdtemp(prefix='tether-bench-store-')
            options.setdefault('clear', True)
        try:
            return ctype(**options)
        except TypeError as e:
            raise ConfigError(f'bad options for connector kind {self.kind!r}: {e}') from e


@register('transformer')
@register('transformer', name='proxystore')
class StoreTransformerConfig(TransformerConfig):
    """Pass task data as proxies of a tether store over any connector."""

    name: str = 'store'
    connector: ConnectorConfig = ConnectorConfig()
    store_name: str | None = pydantic.Field(
        default=None,
        description='name of the store (default: a new unique name)',
    )
    cache_size: int = pydantic.Field(default=16, ge=0, description='objects cached per process')
    extract_target: bool = pydantic.Field(
        default=True,
        description='tasks receive the objects (true) or resolved proxies (false)',
    )
    async_resolve: bool = pydantic.Field(
        default=False,
        description='tasks receive proxies already fetching their objects (needs '
        'extract_target=false)',
    )

    @pydantic.model_validator(mode='after')
    def _async_needs_proxies(self) -> StoreTransformerConfig:
        if self.async_resolve and self.extract_target:
            raise ValueError('async_resolve=true needs extract_target=false')
        return self

    def get_transformer(self) -> StoreTransformer:
        """Build the store (registered in this process) and the transformer."""
        name = self.store_name or f'tether-bench-{uuid.uuid4().hex[:12]}'
        store: Store[Any] = Store(
            name,
            self.connector.get_connector(),
            cache_size=self.cache_size,
            register=True,
        )
        return StoreTransformer(
            store,
            extract_target=self.extract_target,
            async_resolve=self.async_resolve,
        )


ProxyTransformerConfig = StoreTransformerConfig
"""TaPS's name for :class:`StoreTransformerConfig`."""
