"""MultiConnector: one store, several connectors, each object routed by policy.

Each connector comes with a :class:`Policy`: the host names it works on, the object
sizes it suits, the tags it offers and requires, and a priority that breaks ties. ``put``
and ``proxy`` take optional constraints (``subset_tags``, ``superset_tags``); the object's
size and the constraints are matched against every policy and the highest-priority match
wins. Keys remember which connector holds the object, so ``get`` goes back to it.

Connectors whose policy does not match this host stay *dormant*: only their
configuration is kept (and travels with the store's config), and they are built on the
hosts where they apply, or on first ``get`` of a key that names them. Setting a connector
aside never deletes anything: a dormant connector is never closed with its own ``clear``
(its data belongs to the hosts where it is active), and one built here only to read a key
is closed without clearing. A connector that fails to build on a host is set aside with
its error: the others stay usable, and using that one raises
:class:`~tether.exceptions.ConnectorError` saying why it could not be built.

Example:
    ```python
    from tether.connectors.multi import MultiConnector, Policy
    from tether.connectors.node import NodeConnector
    from tether.connectors.redis import RedisConnector
    from tether.store import Store

    multi = MultiConnector({
        'small': (RedisConnector('redis-host'), Policy(max_size=1_000_000, priority=1)),
        'large': (NodeConnector(), Policy(min_size=1_000_000, subset_tags=['cluster'])),
        'site-b': (NodeConnector('b'), Policy(host_pattern=r'nid\\d+', superset_tags=['b'])),
    })
    store = Store('app', multi)
    p = store.proxy(big_array, subset_tags=['cluster'])
    ```

No matching policy raises :class:`~tether.exceptions.NoConnectorMatchError`; add a
low-priority policy without constraints as a fallback if you prefer never to fail.
"""

from __future__ import annotations

import inspect
import logging
import operator
import re
import socket
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Self

import pydantic

from tether.connectors._context import ClosingContext
from tether.connectors._util import per_group
from tether.connectors.base import ConnectorBase, adapt
from tether.connectors.config import ConnectorConfigModel
from tether.exceptions import ConfigError, ConnectorError, NoConnectorMatchError
from tether.serialize import BytesLike

__all__ = ['MultiConnector', 'MultiConnectorConfig', 'MultiKey', 'Policy']

_connector_of = operator.attrgetter('connector_name')  # of a MultiKey

logger = logging.getLogger(__name__)


# ProxyStore's names of Policy's fields that it names otherwise.
_PROXYSTORE_NAMES = {'min_size_bytes': 'min_size', 'max_size_bytes': 'max_size'}


class Policy(pydantic.BaseModel):
    """When a connector of a :class:`MultiConnector` may be used.

    Attributes:
        priority: Higher wins among the connectors that match.
        host_pattern: Regular expressions (full match) of the host names where the
            connector works; ``None`` means every host.
        min_size: Smallest object, in bytes.
        max_size: Largest object, in bytes.
        subset_tags: Tags the connector offers: a ``put`` asking for
            ``subset_tags=[...]`` matches only if every tag asked for is offered here.
        superset_tags: Tags the connector requires: a ``put`` with
            ``superset_tags=[...]`` matches only if it carries every tag listed here.
    """

    model_config = pydantic.ConfigDict(frozen=True, extra='forbid')

    priority: int = 0
    host_pattern: list[str] | None = None
    min_size: int = 0
    max_size: int = sys.maxsize
    subset_tags: list[str] = pydantic.Field(default_factory=list)
    superset_tags: list[str] = pydantic.Field(default_factory=list)

    @pydantic.model_validator(mode='before')
    @classmethod
    def _proxystore_names(cls, data: Any) -> Any:
        """Accept ProxyStore's field names ``min_size_bytes`` and ``max_size_bytes``."""
        if isinstance(data, dict) and ('min_size_bytes' in data or 'max_size_bytes' in data):
            data = dict(data)
            for old, new in _PROXYSTORE_NAMES.items():
                if old in data:
                    if new in data:
                        raise ValueError(f'give {new} or {old}, not both')
                    data[new] = data.pop(old)
        return data

    @pydantic.field_validator('host_pattern', mode='before')
    @classmethod
    def _one_pattern(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @property
    def min_size_bytes(self) -> int:
        """ProxyStore's name for :attr:`min_size`."""
        return self.min_size

    @property
    def max_size_bytes(self) -> int:
        """ProxyStore's name for :attr:`max_size`."""
        return self.max_size

    def as_dict(self) -> dict[str, Any]:
        """The policy with ProxyStore's field names (its ``PolicyDict``)."""
        ours = {new: old for old, new in _PROXYSTORE_NAMES.items()}
        return {ours.get(name, name): value for name, value in self.model_dump().items()}

    def valid_on_host(self, hostname: str | None = None) -> bool:
        """Return whether the connector applies on ``hostname`` (default: this host)."""
        if self.host_pattern is None:
            return True
        host = hostname or socket.gethostname()
        return any(re.fullmatch(p, host) for p in self.host_pattern)

    def is_valid_on_host(self, hostname: str | None = None) -> bool:
        """ProxyStore's name for :meth:`valid_on_host`."""
        return self.valid_on_host(hostname)

    def mismatch(
        self,
        *,
        size: int | None = None,
        subset_tags: Iterable[str] = (),
        superset_tags: Iterable[str] = (),
    ) -> str | None:
        """Return why an object does not match (``None`` if it does)."""
        if size is not None and size < self.min_size:
            return f'{size} bytes < min_size {self.min_size}'
        if size is not None and size > self.max_size:
            return f'{size} bytes > max_size {self.max_size}'
        missing = set(subset_tags) - set(self.subset_tags)
        if missing:
            return f'does not offer tags {sorted(missing)}'
        required = set(self.superset_tags) - set(superset_tags)
        if required:
            return f'requires tags {sorted(required)}'
        return None

    def is_valid(
        self,
        *,
        size: int | None = None,
        subset_tags: Iterable[str] = (),
        superset_tags: Iterable[str] = (),
        size_bytes: int | None = None,
    ) -> bool:
        """Return whether an object of ``size`` with these constraints matches.

        ``size_bytes`` is ProxyStore's name for ``size``. The host is not checked here
        (see :meth:`valid_on_host`).
        """
        if size is None:
            size = size_bytes
        return (
            self.mismatch(size=size, subset_tags=subset_tags, superset_tags=superset_tags) is None
        )


class MultiKey(NamedTuple):
    """Key of a :class:`MultiConnector`: the connector's name and its own key."""

    connector_name: str
    connector_key: Any


def _path_of(obj: Any) -> str:
    cls = type(obj)
    return f'{cls.__module__}.{cls.__qualname__}'


def _release(connector: Any) -> None:
    """Let go of a connector without deleting anything it stores.

    A connector whose ``close`` takes ``clear`` is closed with ``clear=False``; any other
    is left to the garbage collector, since its ``close`` may clear (connectors connect
    lazily, so one that was never used holds nothing).
    """
    close = getattr(connector, 'close', None)
    if close is None:
        return
    try:
        params = inspect.signature(close).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return
    if 'clear' in params:
        try:
            close(clear=False)
        except Exception:
            logger.warning('closing set-aside connector %r failed', connector, exc_info=True)


def _import(path: str) -> Any:
    import importlib

    module, _, attr = path.rpartition('.')
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f'cannot import connector type {path!r}: {e}') from e


class MultiConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`MultiConnector`: each connector as a spec
    (``{'type', 'config', 'policy'}``), which a rebuilt multi-connector takes as its
    ``dormant`` argument (it builds the ones whose policy matches its host)."""

    connectors: dict[str, dict[str, Any]]
    hostname: str | None = None


class MultiConnector(ClosingContext, ConnectorBase[MultiKey]):
    """Route each object to one of several connectors by policy.

    Args:
        connectors: Name to ``(connector, policy)``. Connectors whose policy does not
            match this host are kept as configuration (dormant); the instance is let go
            of without being cleared.
        dormant: Name to ``{'type', 'config', 'policy'}`` of connectors not built here
            (as found in :meth:`config`).
        hostname: Host name matched against ``host_pattern`` (default: this host's).
    """

    def __init__(
        self,
        connectors: Mapping[str, tuple[Any, Policy]],
        dormant: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        hostname: str | None = None,
    ) -> None:
        self.hostname = hostname
        self._specs: dict[str, dict[str, Any]] = {}
        self._policies: dict[str, Policy] = {}
        self._active: dict[str, Any] = {}
        self._borrowed: set[str] = set()  # dormant here, built only to read their keys
        self._failed: dict[str, Exception] = {}
        self._lock = threading.Lock()
        for name, (connector, policy) in connectors.items():
            if not isinstance(policy, Policy):
                raise ConfigError(f'connector {name!r}: policy must be a Policy, got {policy!r}')
            self._specs[name] = {
                'type': _path_of(connector),
                'config': connector.config(),
                'policy': policy.model_dump(),
            }
            self._policies[name] = policy
            if policy.valid_on_host(hostname):
                self._active[name] = connector
            else:
                logger.info('connector %r does not apply on this host: dormant', name)
                _release(connector)
        for name, spec in (dormant or {}).items():
            self._add_spec(name, spec)
        if not self._specs:
            raise ConfigError('a MultiConnector needs at least one connector')
        if len(self._failed) == len(self._specs):
            first = next(iter(self._failed.values()))
            raise ConfigError(
                'no connector of the MultiConnector can be built on this host: '
                + '; '.join(f'{n}: {e}' for n, e in self._failed.items()),
            ) from first

    def _add_spec(self, name: str, spec: Mapping[str, Any]) -> None:
        try:
            policy = Policy.model_validate(spec['policy'])
            self._specs[name] = {
                'type': str(spec['type']),
                'config': dict(spec['config']),
                'policy': policy.model_dump(),
            }
        except (KeyError, TypeError, pydantic.ValidationError) as e:
            raise ConfigError(f'connector {name!r} of a MultiConnector: bad spec: {e}') from e
        self._policies[name] = policy
        if policy.valid_on_host(self.hostname):
            try:
                self._active[name] = self._build(name)
            except Exception as e:
                logger.warning(
                    'connector %r of a MultiConnector cannot be built on this host; the '
                    'others stay usable: %s',
                    name,
                    e,
                )
                self._failed[name] = e

    def _build(self, name: str) -> Any:
        spec = self._specs[name]
        return _import(spec['type']).from_config(spec['config'])

    def _build_error(self, name: str, error: Exception, why: str) -> ConnectorError:
        return ConnectorError(
            f'connector {name!r} of {self!r} {why}: {type(error).__name__}: {error}',
        )

    def __repr__(self) -> str:
        return f'MultiConnector(active={sorted(self._active)}, dormant={sorted(self.dormant)})'

    @property
    def active(self) -> dict[str, Any]:
        """The connectors built on this host, by name."""
        return dict(self._active)

    @property
    def dormant(self) -> list[str]:
        """Names of the connectors not built on this host."""
        return [n for n in self._specs if n not in self._active]

    @property
    def failed(self) -> dict[str, Exception]:
        """The connectors that apply on this host but could not be built, with the error."""
        return dict(self._failed)

    def policy(self, name: str) -> Policy:
        """The policy of connector ``name``."""
        return self._policies[name]

    # Routing ---------------------------------------------------------------------------

    def _choose(
        self,
        size: int | None,
        subset_tags: Iterable[str],
        superset_tags: Iterable[str],
        *,
        deferrable: bool = False,
    ) -> str:
        subset, superset = list(subset_tags), list(superset_tags)
        best: str | None = None
        reasons: list[str] = []
        for name in self._specs:
            if name in self._failed:
                error = self._failed[name]
                reasons.append(f'{name}: cannot be built on this host ({error})')
                continue
            if name not in self._active or name in self._borrowed:
                reasons.append(f'{name}: not available on this host')
                continue
            policy = self._policies[name]
            why = policy.mismatch(size=size, subset_tags=subset, superset_tags=superset)
            if why is None and deferrable and not hasattr(self._active[name], 'new_key'):
                why = 'not deferrable'
            if why is not None:
                reasons.append(f'{name}: {why}')
                continue
            if best is None or policy.priority > self._policies[best].priority:
                best = name
        if best is None:
            raise NoConnectorMatchError(
                f'no connector of {self!r} accepts an object of {size} bytes with '
                f'subset_tags={subset} superset_tags={superset}: ' + '; '.join(reasons) + '. '
                'Add a low-priority policy without constraints as a fallback.',
            )
        return best

    def _connector(self, name: str) -> Any:
        connector = self._active.get(name)
        if connector is not None:
            return connector
        if name not in self._specs:
            # NoConnectorMatchError: ProxyStore's MultiConnectorError for this too.
            raise NoConnectorMatchError(
                f'key names connector {name!r}, unknown to {self!r} (it does not exist there)',
            )
        with self._lock:
            if name not in self._active:
                failed = self._failed.get(name)
                logger.info('building connector %r to read a key it holds', name)
                try:
                    connector = self._build(name)
                except Exception as e:
                    why = (
                        'could not be built on this host'
                        if failed is not None
                        else 'is dormant on this host and cannot be built here to read its key'
                    )
                    raise self._build_error(name, e, why) from e
                self._active[name] = connector
                if failed is None:
                    self._borrowed.add(name)
                else:
                    logger.info('connector %r built on a second attempt', name)
                    self._failed.pop(name, None)
            return self._active[name]

    # Connector protocol ----------------------------------------------------------------

    def close(self) -> None:
        """Close every connector active on this host.

        Connectors that are dormant here but were built to read a key are let go of
        without clearing (their data belongs to the hosts where they are active).
        """
        for name, connector in self._active.items():
            if name in self._borrowed:
                _release(connector)
            else:
                connector.close()

    def config(self) -> dict[str, Any]:
        """Type, configuration and policy of every connector, and the ``hostname`` override."""
        return MultiConnectorConfig(
            connectors={n: dict(s) for n, s in self._specs.items()},
            hostname=self.hostname,
        ).dump()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Rebuild on any host: connectors whose policy matches it are built.

        Raises:
            ConnectorConfigError: for unknown fields or values of the wrong type.
        """
        model = MultiConnectorConfig.load(config)
        return cls({}, model.connectors, hostname=model.hostname)

    def put(
        self,
        data: BytesLike,
        *,
        subset_tags: Iterable[str] = (),
        superset_tags: Iterable[str] = (),
    ) -> MultiKey:
        """Store ``data`` through the best matching connector."""
        size = memoryview(data).nbytes
        name = self._choose(size, subset_tags, superset_tags)
        return MultiKey(name, self._active[name].put(data))

    def put_parts(self, parts: Sequence[BytesLike]) -> MultiKey:
        """Store the concatenation of ``parts`` (without joining, if the target can)."""
        size = sum(memoryview(p).nbytes for p in parts)
        name = self._choose(size, (), ())
        return MultiKey(name, adapt(self._active[name]).put_parts(parts))

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[MultiKey]:
        """Store each item's parts through its best connector (one batch per connector);
        parts are joined only for a connector that cannot take them as they are."""

        def choose(parts: Sequence[BytesLike]) -> str:
            return self._choose(sum(memoryview(p).nbytes for p in parts), (), ())

        def put_in(name: str, idx: list[int]) -> list[MultiKey]:
            got = adapt(self._active[name]).put_parts_batch([batch[i] for i in idx])
            return [MultiKey(name, key) for key in got]

        return per_group(batch, choose, put_in)

    def put_batch(
        self,
        datas: Sequence[BytesLike],
        *,
        subset_tags: Iterable[str] = (),
        superset_tags: Iterable[str] = (),
    ) -> list[MultiKey]:
        """Store each item through its best connector (one batch per connector)."""
        subset, superset = list(subset_tags), list(superset_tags)

        def choose(data: BytesLike) -> str:
            return self._choose(memoryview(data).nbytes, subset, superset)

        def put_in(name: str, idx: list[int]) -> list[MultiKey]:
            got = self._active[name].put_batch([datas[i] for i in idx])
            return [MultiKey(name, key) for key in got]

        return per_group(datas, choose, put_in)

    def get(self, key: MultiKey) -> BytesLike | None:
        """Fetch through the connector that holds the object."""
        result: BytesLike | None = self._connector(key.connector_name).get(key.connector_key)
        return result

    def get_batch(self, keys: Sequence[MultiKey]) -> list[BytesLike | None]:
        """Fetch several objects (one batch per connector)."""

        def get_from(name: str, idx: list[int]) -> list[BytesLike | None]:
            got = self._connector(name).get_batch([keys[i].connector_key for i in idx])
            return list(got)

        return per_group(keys, _connector_of, get_from)

    def exists(self, key: MultiKey) -> bool:
        """Return whether the holding connector has the object."""
        return bool(self._connector(key.connector_name).exists(key.connector_key))

    def evict(self, key: MultiKey) -> None:
        """Remove the object from its connector."""
        self._connector(key.connector_name).evict(key.connector_key)

    def new_key(
        self,
        data: BytesLike | None = None,
        *,
        subset_tags: Iterable[str] = (),
        superset_tags: Iterable[str] = (),
    ) -> MultiKey:
        """Reserve a key in the deferrable connector whose policy ``data``'s size matches.

        Nothing is stored until :meth:`set`.
        """
        size = None if data is None else memoryview(data).nbytes
        name = self._choose(size, subset_tags, superset_tags, deferrable=True)
        return MultiKey(name, self._active[name].new_key(data))

    def set(self, key: MultiKey, data: BytesLike) -> None:
        """Store ``data`` under a key from :meth:`new_key`."""
        self._connector(key.connector_name).set(key.connector_key, data)
