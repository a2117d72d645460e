"""Serialize task inputs and values once, proxying those over a topic's threshold.

Each value is serialized exactly once, to learn its size. Under the threshold (or with no
store), those bytes travel inline; over it, the same bytes go to the store
(:meth:`~tether.store.Store.proxy_serialized`) and only the small proxy travels. A value
that already is a proxy travels as it is. The task server never unpacks: it moves the
packed bytes and proxies as they are.

The size compared with the threshold is the value's *payload*: the bytes of a ``bytes``
or ``str``, the memory of an array, the pickle of anything else (with its out-of-band
buffers), not counting the few dozen bytes of framing that :mod:`tether.serialize` puts
in front. So ``proxystore_threshold=100_000`` sends a 100,000-byte input inline and a
100,001-byte one by proxy, as a user reading "values over 100 kB" expects. ``None``,
``True``, ``False``, ``...`` and ``NotImplemented`` always travel inline (a proxy of
them could not behave like them: ``value is None`` would be false), even with a
threshold of 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from tether.exceptions import NotAStoreProxyError
from tether.proxy import Proxy, resolve_async
from tether.serialize import deserialize, serialize_parts
from tether.store.utils import get_key

__all__ = ['Packed', 'pack_inputs', 'pack_value']


class Packed:
    """Serialized values: ``bytes`` items travel inline, proxies by reference.

    ``kwnames`` names the trailing items that are keyword arguments; a packed single
    value has ``single=True``.
    """

    __slots__ = ('fmt', 'items', 'kwnames', 'proxied', 'single')

    def __init__(
        self,
        items: list[Any],
        kwnames: tuple[str, ...] = (),
        *,
        single: bool = False,
        proxied: tuple[int, ...] = (),
        fmt: str = 'pickle',
    ) -> None:
        self.items = items
        self.kwnames = kwnames
        self.single = single
        self.proxied = proxied  # indices of items proxied by the packer (it made the keys)
        self.fmt = fmt  # 'pickle' (tether.serialize) or 'json': how inline items were made

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.items, self.kwnames, self.single, self.proxied, self.fmt)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.items, self.kwnames, self.single, self.proxied, *fmt = state
        self.fmt = fmt[0] if fmt else 'pickle'

    def __repr__(self) -> str:
        return f'Packed({len(self.items)} items, {self.fmt}, {len(self.proxied)} proxied)'

    def __bool__(self) -> bool:
        return True  # as before it had a length: a packed value is never falsy

    def __len__(self) -> int:
        if self.single:
            raise TypeError('a packed value has no length; deserialize() it first')
        return 2

    def __getitem__(self, index: int) -> Any:
        """Colmena's view of inputs in transit: ``[0]`` the args, ``[1]`` the kwargs.

        Each inline item shows as the string Colmena would hold: the JSON text
        (``'json'``) or the hex of the serialized bytes (``'pickle'``; tether's framing,
        so a view to look at, not a Colmena pickle); proxies show as they are. Built on
        access only. Packed values (``single``) have no such view.
        """
        if self.single:
            raise TypeError('a packed value is not indexable; deserialize() it first')
        shown = [_shown(i, self.fmt) for i in self.items]
        n = len(shown) - len(self.kwnames)
        return (shown[:n], dict(zip(self.kwnames, shown[n:], strict=True)))[index]

    @property
    def nbytes(self) -> int:
        """Bytes carried inline (proxies count as zero: their bytes are elsewhere)."""
        return sum(len(i) for i in self.items if type(i) is bytes)

    def proxies(self) -> list[Proxy[Any]]:
        """The items that travel by reference."""
        return [i for i in self.items if type(i) is not bytes]

    def resolve_async(self, timings: ProxyTimes | None = None) -> None:
        """Start fetching every proxied item in the background.

        The seconds each start took go to ``timings`` (``resolve_async`` of its key).
        """
        for p in self.proxies():
            start = time.perf_counter()
            resolve_async(p)
            if timings is not None:
                record_proxy_time(timings, p, 'resolve_async', time.perf_counter() - start)

    def _objects(self) -> list[Any]:
        load = json.loads if self.fmt == 'json' else deserialize
        return [load(i) if type(i) is bytes else i for i in self.items]

    def unpack(self) -> Any:
        """Return ``(args, kwargs)``, or the single value; proxies stay proxies."""
        objs = self._objects()
        if self.single:
            return objs[0]
        n = len(objs) - len(self.kwnames)
        return tuple(objs[:n]), dict(zip(self.kwnames, objs[n:], strict=True))


def _shown(item: Any, fmt: str) -> Any:
    if type(item) is not bytes:
        return item
    return item.decode() if fmt == 'json' else item.hex()


ProxyTimes = dict[str, dict[str, Any]]
"""Timings by proxy, as Colmena keeps them: ``{str(key): {'times': {op: stats}}}``."""


def record_proxy_time(timings: ProxyTimes, proxy: Any, op: str, seconds: float) -> None:
    """Add one ``op`` of ``seconds`` on ``proxy`` (a store proxy) to ``timings``.

    ``stats`` are ``{'count': n, 'seconds': total}``. A proxy not made by a store has no
    key and is not recorded.
    """
    try:
        key = str(get_key(proxy))
    except NotAStoreProxyError:
        return
    entry = timings.setdefault(key, {'times': {}})
    stats = entry['times'].setdefault(op, {'count': 0, 'seconds': 0.0})
    stats['count'] += 1
    stats['seconds'] += seconds


def _pack(
    values: Iterable[Any],
    store: Any,
    threshold: int | None,
    evict: bool,
    timings: ProxyTimes,
    *,
    fmt: str = 'pickle',
) -> tuple[list[Any], tuple[int, ...]]:
    items: list[Any] = []
    proxied: list[int] = []
    for value in values:
        if _is_proxy(value):
            # Already a reference (a user-made proxy): it travels as it is, unresolved.
            items.append(value)
            continue
        if fmt == 'json':
            # Colmena's JSON method: TypeError for what JSON cannot encode.
            text = json.dumps(value).encode()
            if store is not None and threshold is not None and len(text) > threshold:
                start = time.perf_counter()
                items.append(store.proxy(json.loads(text), evict=evict))
                record_proxy_time(timings, items[-1], 'store.proxy', time.perf_counter() - start)
                proxied.append(len(items) - 1)
            else:
                items.append(text)
            continue
        parts = serialize_parts(value)
        if (
            store is not None
            and threshold is not None
            and not isinstance(value, _INLINE)
            and _payload_size(parts) > threshold
        ):
            start = time.perf_counter()
            # No hash of the value for the proxy (hashing 10 MB of bytes costs ms).
            items.append(store.proxy_serialized(value, parts, evict=evict, hash_target=False))
            record_proxy_time(timings, items[-1], 'store.proxy', time.perf_counter() - start)
            proxied.append(len(items) - 1)
        else:
            one = len(parts) == 1 and type(parts[0]) is bytes
            items.append(parts[0] if one else b''.join(parts))
    return items, tuple(proxied)


# Containers longer than this are not scanned for proxies (the scan would cost more than
# the overlap it buys).
_SCAN_LIMIT = 1000


def resolve_nested_async(
    args: tuple[Any, ...], kwargs: dict[str, Any], timings: ProxyTimes | None = None
) -> None:
    """Start fetching the proxies one level down in list, tuple and dict arguments.

    Proxies given as arguments themselves travel as items of :class:`Packed` (see
    :meth:`Packed.resolve_async`); a proxy inside a list argument (``[proxy]``) is found
    here, as Colmena's workers find it. Containers of more than ``_SCAN_LIMIT`` items
    are skipped.
    """
    for value in (*args, *kwargs.values()):
        kind = type(value)
        if kind not in (list, tuple, dict) or len(value) > _SCAN_LIMIT:
            continue
        for item in value.values() if kind is dict else value:
            if _is_proxy(item):
                start = time.perf_counter()
                resolve_async(item)
                if timings is not None:
                    record_proxy_time(timings, item, 'resolve_async', time.perf_counter() - start)


# Never proxied: a proxy of them cannot pass for them (``is None``), and they are tiny.
_INLINE = (type(None), bool, type(NotImplemented), type(Ellipsis))


def _payload_size(parts: list[Any]) -> int:
    """Bytes of a value's serialization after its framing header (``parts[0]``)."""
    return sum(memoryview(p).nbytes for p in parts[1:])


def _is_proxy(value: Any) -> bool:
    return Proxy in type(value).__mro__


def pack_inputs(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    store: Any = None,
    threshold: int | None = None,
    timings: ProxyTimes | None = None,
    *,
    fmt: str = 'pickle',
) -> Packed:
    """Pack a call's arguments (proxying those over ``threshold`` into ``store``).

    ``fmt='json'`` encodes each inline item with :func:`json.dumps` (Colmena's JSON
    serialization method) instead of :mod:`tether.serialize`.
    """
    names = tuple(kwargs)
    items, proxied = _pack(
        (*args, *kwargs.values()),
        store,
        threshold,
        False,
        timings if timings is not None else {},
        fmt=fmt,
    )
    return Packed(items, names, proxied=proxied, fmt=fmt)


def pack_value(
    value: Any,
    store: Any = None,
    threshold: int | None = None,
    timings: ProxyTimes | None = None,
    *,
    fmt: str = 'pickle',
) -> Packed:
    """Pack a task's return value (proxied, evicted on first resolve, if over threshold)."""
    t = timings if timings is not None else {}
    items, proxied = _pack([value], store, threshold, True, t, fmt=fmt)
    return Packed(items, single=True, proxied=proxied, fmt=fmt)
