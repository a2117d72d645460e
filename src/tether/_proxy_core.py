"""The Proxy class: forwards every operation to its target, resolving it on first use.

Private to :mod:`tether.proxy`, which re-exports :class:`~tether.proxy.Proxy` and states
the contract (what resolves and what does not).
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from tether._proxy_engine import skip_frames_of
from tether._proxy_meta import pickled_metadata, preset_target
from tether._proxy_resolve import LOCAL_NAMES, class_of, local_attribute, resolve_now, target_of
from tether._proxy_slots import (
    MISSING_TARGET,
    UNHASHABLE,
    ProxySlots,
    set_class,
    set_slot,
    slot_class,
    slot_factory,
    slot_hash,
    slot_shown,
    slot_target,
)

__all__ = ['Proxy', 'own_names', 'rebuild_proxy', 'rebuild_proxy_as', 'serve_own_names']

T = TypeVar('T')

skip_frames_of(globals())


class Proxy(ProxySlots, Generic[T]):
    """A lazy, transparent proxy of the object its factory returns.

    Args:
        factory: Zero-argument callable returning the target object. It is called at
            most once, on first use of the proxy.
        target_class: The class of the target, if known, so that ``isinstance`` and
            ``__class__`` do not resolve the proxy.
        target_hash: The hash of the target, if known, so that ``hash`` does not resolve.
        target: The target, if already at hand: the proxy starts resolved (the factory
            still travels when it is pickled).
        cache_defaults: With ``target``, take ``target_class`` and ``target_hash`` from
            it, so that an unpickled copy answers ``isinstance`` and ``hash`` unresolved.

    A subclass may define its own methods, properties, class attributes and slots: those
    names are served by the proxy, every other name is forwarded to the target. Every
    proxy class pickles by the same rule: its class, its factory and its
    :class:`~tether.proxy.ProxyMetadata`, rebuilt as ``cls(factory)`` with the metadata set
    again (see "Proxy subclasses" in ``docs/concepts.md``).

    Raises:
        ProxyResolveError: (on first use) when the factory raises; the factory's error
            is chained as the cause. Errors of tether itself (for example
            ``ProxyResolveMissingKeyError``, ``SerializationError``, ``ConnectorError``)
            propagate with their own type and a note naming the factory.
    """

    __slots__ = ('__weakref__',)

    def __init__(
        self,
        factory: Callable[[], T],
        *,
        target_class: type | None = None,
        target_hash: int | None = None,
        target: Any = MISSING_TARGET,
        cache_defaults: bool = False,
    ) -> None:
        if not callable(factory):
            raise TypeError(f'Proxy factory must be callable, got {type(factory).__name__}')
        set_slot(self, '__proxy_factory__', factory)
        set_slot(self, '__proxy_target__', MISSING_TARGET)
        set_class(self, target_class)
        set_slot(self, '__proxy_hash__', target_hash)
        set_slot(self, '__proxy_lock__', threading.Lock())
        set_slot(self, '__proxy_pending__', None)
        set_slot(self, '__proxy_trace__', None)
        if target is not MISSING_TARGET:
            preset_target(self, target, cache_defaults)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        serve_own_names(cls)

    # Attribute access ------------------------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if name in LOCAL_NAMES:
            return local_attribute(self, name)
        target = slot_target(self)
        if target is MISSING_TARGET:
            target = resolve_now(self)
        return getattr(target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(target_of(self), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(target_of(self), name)

    def __dir__(self) -> list[str]:
        return dir(target_of(self))

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # Reached through ``object.__getattribute__(p, '__class__')``; the usual way in
        # (``p.__class__``, ``isinstance``) is ``_local_attribute``, which answers the same.
        cls = slot_shown(self)
        if cls is None:
            return class_of(self)
        return cast(type, cls)

    # Pickling --------------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        # The one pickling rule of every proxy class: (class, factory, metadata), rebuilt
        # as ``cls(factory)``. Plain proxies use a shorter form of the same thing.
        factory = slot_factory(self)
        cls, h = pickled_metadata(self)
        kind = type(self)
        if kind is not Proxy:
            return (rebuild_proxy_as, (kind, factory, cls, h))
        if cls is None and h is None:
            return (Proxy, (factory,))
        return (rebuild_proxy, (factory, cls, h))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def __copy__(self) -> Proxy[T]:
        fn, args = self.__reduce__()
        return cast(Proxy[T], fn(*args))

    def __deepcopy__(self, memo: dict[int, Any]) -> Proxy[T]:
        import copy

        fn, args = self.__reduce__()
        return cast(Proxy[T], fn(*copy.deepcopy(args, memo)))

    def __dask_tokenize__(self) -> tuple[str, str]:
        # Dask tokenizes task arguments at submit; it must not resolve (or pickle) proxies.
        return (type(self).__qualname__, repr(slot_factory(self)))

    # Representation --------------------------------------------------------------------

    def __repr__(self) -> str:
        target = slot_target(self)
        if target is MISSING_TARGET:
            cls = slot_class(self)
            what = f'{cls.__module__}.{cls.__qualname__}' if cls is not None else 'unknown'
            return f'<Proxy of {what} (unresolved), factory={slot_factory(self)!r}>'
        return repr(target)

    def __str__(self) -> str:
        return str(target_of(self))

    def __bytes__(self) -> bytes:
        return bytes(target_of(self))

    def __format__(self, spec: str) -> str:
        return format(target_of(self), spec)

    # Hashing and truth -----------------------------------------------------------------

    def __hash__(self) -> int:
        h = slot_hash(self)
        if h is None:
            return hash(target_of(self))
        if h is UNHASHABLE:
            cls = slot_class(self)
            name = cls.__name__ if cls is not None else 'object'
            raise TypeError(f"unhashable type: '{name}' (proxy)")
        return cast(int, h)

    def __bool__(self) -> bool:
        return bool(target_of(self))

    # Comparisons -----------------------------------------------------------------------

    def __eq__(self, other: object) -> Any:
        return target_of(self) == other

    def __ne__(self, other: object) -> Any:
        return target_of(self) != other

    def __lt__(self, other: Any) -> Any:
        return target_of(self) < other

    def __le__(self, other: Any) -> Any:
        return target_of(self) <= other

    def __gt__(self, other: Any) -> Any:
        return target_of(self) > other

    def __ge__(self, other: Any) -> Any:
        return target_of(self) >= other

    # Containers ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(target_of(self))

    def __length_hint__(self) -> int:
        return operator.length_hint(target_of(self))

    def __getitem__(self, key: Any) -> Any:
        return target_of(self)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        target_of(self)[key] = value

    def __delitem__(self, key: Any) -> None:
        del target_of(self)[key]

    def __iter__(self) -> Any:
        return iter(target_of(self))

    def __next__(self) -> Any:
        return next(target_of(self))

    def __reversed__(self) -> Any:
        return reversed(target_of(self))

    def __contains__(self, item: Any) -> bool:
        return item in target_of(self)

    # Calls, contexts, coroutines -------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return target_of(self)(*args, **kwargs)

    def __enter__(self) -> Any:
        return target_of(self).__enter__()

    def __exit__(self, *args: Any) -> Any:
        return target_of(self).__exit__(*args)

    async def __aenter__(self) -> Any:
        return await target_of(self).__aenter__()

    async def __aexit__(self, *args: Any) -> Any:
        return await target_of(self).__aexit__(*args)

    def __await__(self) -> Any:
        return target_of(self).__await__()

    def __aiter__(self) -> Any:
        return target_of(self).__aiter__()

    def __anext__(self) -> Any:
        return target_of(self).__anext__()

    # Numbers ---------------------------------------------------------------------------

    def __neg__(self) -> Any:
        return -target_of(self)

    def __pos__(self) -> Any:
        return +target_of(self)

    def __abs__(self) -> Any:
        return abs(target_of(self))

    def __invert__(self) -> Any:
        return ~target_of(self)

    def __int__(self) -> int:
        return int(target_of(self))

    def __float__(self) -> float:
        return float(target_of(self))

    def __complex__(self) -> complex:
        return complex(target_of(self))

    def __index__(self) -> int:
        # As ProxyStore's: a target without __index__ is indexed by its __int__.
        target = target_of(self)
        kind = type(target)
        if not hasattr(kind, '__index__') and hasattr(kind, '__int__'):
            return int(target)
        return operator.index(target)

    def __round__(self, ndigits: int | None = None) -> Any:
        return round(target_of(self), ndigits)

    def __trunc__(self) -> Any:
        import math

        return math.trunc(target_of(self))

    def __floor__(self) -> Any:
        import math

        return math.floor(target_of(self))

    def __ceil__(self) -> Any:
        import math

        return math.ceil(target_of(self))

    def __fspath__(self) -> Any:
        return os.fspath(target_of(self))

    def __sizeof__(self) -> int:
        return object.__sizeof__(self)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        target = target_of(self)
        method = getattr(type(target), '__array__', None)
        if method is not None:
            return method(target, *args, **kwargs)
        import numpy

        return numpy.asarray(target, *args, **kwargs)


def _binary(op: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    def forward(self: Proxy[Any], other: Any) -> Any:
        return op(target_of(self), other)

    def reflected(self: Proxy[Any], other: Any) -> Any:
        return op(other, target_of(self))

    return forward, reflected


def _inplace(op: Callable[[Any, Any], Any]) -> Any:
    def method(self: Proxy[Any], other: Any) -> Proxy[Any]:
        set_slot(self, '__proxy_target__', op(target_of(self), other))
        return self

    return method


for _name, _op, _iop in (
    ('add', operator.add, operator.iadd),
    ('sub', operator.sub, operator.isub),
    ('mul', operator.mul, operator.imul),
    ('matmul', operator.matmul, operator.imatmul),
    ('truediv', operator.truediv, operator.itruediv),
    ('floordiv', operator.floordiv, operator.ifloordiv),
    ('mod', operator.mod, operator.imod),
    ('lshift', operator.lshift, operator.ilshift),
    ('rshift', operator.rshift, operator.irshift),
    ('and', operator.and_, operator.iand),
    ('xor', operator.xor, operator.ixor),
    ('or', operator.or_, operator.ior),
    ('divmod', divmod, None),
):
    _fwd, _rfl = _binary(_op)
    _fwd.__name__ = f'__{_name}__'
    _rfl.__name__ = f'__r{_name}__'
    setattr(Proxy, f'__{_name}__', _fwd)
    setattr(Proxy, f'__r{_name}__', _rfl)
    if _iop is not None:
        _ifn = _inplace(_iop)
        _ifn.__name__ = f'__i{_name}__'
        setattr(Proxy, f'__i{_name}__', _ifn)


def _pow(self: Proxy[Any], other: Any, mod: Any = None) -> Any:
    if mod is None:
        return target_of(self) ** other
    return pow(target_of(self), other, mod)


def _rpow(self: Proxy[Any], other: Any, mod: Any = None) -> Any:
    if mod is None:
        return other ** target_of(self)
    return pow(other, target_of(self), mod)


def _ipow(self: Proxy[Any], other: Any, mod: Any = None) -> Proxy[Any]:
    set_slot(self, '__proxy_target__', _pow(self, other, mod))
    return self


_pow.__name__, _rpow.__name__, _ipow.__name__ = '__pow__', '__rpow__', '__ipow__'
for _name, _fn in (('__pow__', _pow), ('__rpow__', _rpow), ('__ipow__', _ipow)):
    setattr(Proxy, _name, _fn)


def rebuild_proxy(factory: Callable[[], Any], cls: type | None, h: int | str | None) -> Proxy[Any]:
    """Unpickle a plain :class:`~tether.proxy.Proxy` with its metadata (``'u'``: known
    unhashable)."""
    proxy: Proxy[Any] = Proxy(factory, target_class=cls)
    set_slot(proxy, '__proxy_hash__', UNHASHABLE if h == 'u' else h)
    return proxy


def rebuild_proxy_as(
    kind: type[Proxy[Any]],
    factory: Callable[[], Any],
    cls: type | None,
    h: int | str | None,
) -> Proxy[Any]:
    """Unpickle a proxy of a subclass: ``kind(factory)``, then its metadata again."""
    proxy = kind(factory)
    set_class(proxy, cls)
    set_slot(proxy, '__proxy_hash__', UNHASHABLE if h == 'u' else h)
    return proxy


def proxy_bases(cls: type) -> tuple[type, ...]:
    """The classes of ``cls``'s MRO that are proxy subclasses (``Proxy`` excluded)."""
    return tuple(
        klass
        for klass in cls.__mro__
        if klass is not Proxy and isinstance(klass, type) and issubclass(klass, Proxy)
    )


def own_names(cls: type) -> frozenset[str]:
    """The non-dunder names a proxy subclass (and its proxy bases) define themselves."""
    names: set[str] = set()
    for klass in proxy_bases(cls):
        names.update(n for n in vars(klass) if not (n.startswith('__') and n.endswith('__')))
    return frozenset(names)


def _defined_later(bases: tuple[type, ...], name: str) -> bool:
    """Whether a proxy subclass got ``name`` as a class attribute after its definition."""
    if name[:2] == '__' and name[-2:] == '__':
        return False
    return any(name in vars(klass) for klass in bases)


def serve_own_names(cls: type) -> None:
    """Let a proxy subclass serve its own attributes instead of forwarding them.

    Plain proxies pay nothing: the lookup is installed only on subclasses, and only
    where they do not define ``__getattribute__``/``__setattr__`` themselves. Names the
    subclass defines are served by the proxy, including class attributes added to it
    after its definition (as ProxyStore's proxies do); every other name is forwarded.
    """
    own = own_names(cls)
    bases = proxy_bases(cls)
    namespace = vars(cls)
    if '__getattribute__' not in namespace:

        def __getattribute__(self: Proxy[Any], name: str) -> Any:  # noqa: N807
            if name in own or _defined_later(bases, name):
                return object.__getattribute__(self, name)
            return super(cls, self).__getattribute__(name)  # type: ignore[arg-type]

        cls.__getattribute__ = __getattribute__  # type: ignore[method-assign,assignment]
    if '__setattr__' not in namespace:

        def __setattr__(self: Proxy[Any], name: str, value: Any) -> None:  # noqa: N807
            if name in own or _defined_later(bases, name):
                object.__setattr__(self, name, value)
            else:
                super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

        cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
    if '__delattr__' not in namespace:

        def __delattr__(self: Proxy[Any], name: str) -> None:  # noqa: N807
            if name in own or _defined_later(bases, name):
                object.__delattr__(self, name)
            else:
                super(cls, self).__delattr__(name)  # type: ignore[arg-type]

        cls.__delattr__ = __delattr__  # type: ignore[method-assign,assignment]
