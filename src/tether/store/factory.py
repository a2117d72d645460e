"""The factory inside every store proxy."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tether.exceptions import ProxyResolveMissingKeyError
from tether.store._registry import get_or_create_store
from tether.store.config import StoreConfig

if TYPE_CHECKING:
    from tether.serialize import Deserializer
    from tether.store._store import Store

__all__ = ['StoreFactory']

T = TypeVar('T')


class StoreFactory(Generic[T]):
    """Fetches one object from a store; carries what any process needs to do so.

    Pickles as its key, the store's config, the evict flag and the deserializer, in a few
    hundred bytes. In the process that made it, it uses the store that made it; elsewhere
    it rebuilds that store from the config (once per process, via the registry).

    Unpickling is the trusted path: the config's types are imported without the
    allowlist of :mod:`tether.store.allowlist`, since unpickling already runs whatever
    the pickle names. Load proxies only from producers you trust (``docs/security.md``).

    Args:
        key: Connector key of the object.
        store_config: Config of the store that holds it.
        evict: Evict the object from the store after the first resolve.
        deserializer: Deserializer to use instead of the store's.
    """

    __slots__ = ('_store', 'deserializer', 'evict', 'key', 'store_config')

    def __init__(
        self,
        key: Any,
        store_config: StoreConfig,
        *,
        evict: bool = False,
        deserializer: Deserializer | None = None,
        store: Store[Any] | None = None,
    ) -> None:
        self.key = key
        self.store_config = store_config
        self.evict = evict
        self.deserializer = deserializer
        self._store: weakref.ref[Store[Any]] | None = None if store is None else weakref.ref(store)

    def __repr__(self) -> str:
        return f'StoreFactory(store={self.store_config.name!r}, key={self.key!r})'

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (self.key, _config_state(self.store_config), self.evict, self.deserializer),
        )

    def get_store(self) -> Store[Any]:
        """Return the store this factory reads from (building it if needed)."""
        if self._store is not None:
            store = self._store()
            if store is not None and not store.closed:
                return store
        return get_or_create_store(self.store_config)

    def __call__(self) -> T:
        store = self.get_store()
        obj = store.get(self.key, deserializer=self.deserializer, default=_MISSING)
        if obj is _MISSING:
            raise ProxyResolveMissingKeyError(self.key, store.name, repr(store.connector))
        if self.evict:
            store.evict(self.key)
        return obj  # type: ignore[no-any-return]

    def resolve_async(self) -> None:
        """Kept for compatibility: use :func:`tether.proxy.resolve_async` on the proxy."""


_MISSING: Any = object()

# Configs are pickled as a compact tuple, and rebuilt once per process per distinct config.
_FIELDS = tuple(StoreConfig.model_fields)
_config_cache: dict[str, StoreConfig] = {}


# Computed once: asking pydantic for each default cost ~30 us per pickled proxy.
_DEFAULTS = tuple(
    StoreConfig.model_fields[f].get_default(call_default_factory=True) for f in _FIELDS
)


def _config_state(config: StoreConfig) -> tuple[Any, ...]:
    values = [getattr(config, f) for f in _FIELDS]
    # Trailing fields equal to their defaults are not sent.
    while len(values) > 2 and values[-1] == _DEFAULTS[len(values) - 1]:
        values.pop()
    return tuple(values)


def _config_from_state(state: tuple[Any, ...]) -> StoreConfig:
    marker = repr(state)
    cached = _config_cache.get(marker)
    if cached is None:
        cached = StoreConfig(**dict(zip(_FIELDS, state, strict=False)))
        if len(_config_cache) < 1024:
            _config_cache[marker] = cached
    return cached


def _rebuild(
    key: Any,
    state: tuple[Any, ...],
    evict: bool,
    deserializer: Deserializer | None,
) -> StoreFactory[Any]:
    return StoreFactory(key, _config_from_state(state), evict=evict, deserializer=deserializer)
