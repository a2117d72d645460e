"""Lazy, transparent object proxies.

A :class:`Proxy` is built from a *factory*, any zero-argument callable that returns the
*target* object. The factory runs the first time the proxy is used (once, even when many
threads use the proxy at the same moment), and from then on every operation on the proxy
is forwarded to the target::

    p = Proxy(lambda: [1, 2, 3])
    assert p == [1, 2, 3]           # resolves here
    assert isinstance(p, list)      # and behaves as a list from now on

Pickling a proxy sends its factory and cached metadata (the target's class and hash),
never the target, so proxies are cheap to communicate and resolve wherever they land.

What resolves a proxy, and what does not (this is a tested contract):

* never resolve: ``pickle.dumps(p)``, ``copy.copy(p)``, ``type(p)``, Dask's ``tokenize(p)``,
  ``isinstance(p, Proxy)``, ``id(p)``, ``is_resolved(p)``, ``get_factory(p)``,
  ``repr(p)`` (shows ``<Proxy of ... (unresolved)>``; once resolved, the target's repr);
* resolve only when the metadata is unknown: ``isinstance(p, C)``, ``p.__class__`` and
  ``p.__module__`` (store proxies know the target's class), ``hash(p)`` (store proxies know
  the hash of hashable targets; unhashable targets raise ``TypeError`` without resolving);
  a proxy whose factory may wait on another task (``resolve_may_block``: a future's
  proxy, in the process that made the future) never waits for ``isinstance``,
  ``__class__`` or ``__module__``: while its class is unknown and resolving would wait,
  it answers as what it is, a :class:`Proxy` (``isinstance(p, str)`` false,
  ``isinstance(p, Proxy)`` true); once the result is set it resolves and answers for it;
* always resolve: attribute access, method calls, operators, ``str``, ``format``, ``bool``,
  ``len``, iteration, comparisons, ``dir``.

Engines (Dask, Ray, Parsl, pools, tether's executors) inspect task arguments before they
pickle them, and a proxy handed on must not resolve (or wait) in the process that submits
it. So who asks matters: code of an engine module (:func:`register_engine_module`) asking
for the class of a proxy whose class is unknown, or is one of
:data:`ENGINE_SPECIAL_CLASSES` (containers engines walk, buffers they send raw), is told
:class:`Proxy` and never resolves it; everyone else gets the answers above.

Set ``TETHER_TRACE_RESOLVE=1`` in the environment (or call :func:`trace_resolution`) to
log, at the moment each proxy resolves, the stack that resolved it; :func:`where_resolved`
then returns that stack for a given proxy.
"""

from __future__ import annotations

import concurrent.futures
import logging
import operator
import os
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, Generic, NamedTuple, TypeAlias, TypeVar, cast

from tether._missing import MISSING
from tether.exceptions import ProxyResolveError, TetherError

__all__ = [
    'ENGINE_SPECIAL_CLASSES',
    'LOCAL_NAMES',
    'MISSING',
    'Proxy',
    'ProxyLocker',
    'ProxyMetadata',
    'ProxyOr',
    'extract',
    'get_factory',
    'get_metadata',
    'is_resolved',
    'metadata_of',
    'register_engine_module',
    'resolve',
    'resolve_async',
    'set_metadata',
    'set_target',
    'trace_resolution',
    'where_resolved',
]

T = TypeVar('T')

logger = logging.getLogger(__name__)

FactoryType: TypeAlias = Callable[[], T]


_MISSING: Any = MISSING
"""The missing-target marker: what stands for "no target (yet)" (``Proxy(target=...)``)."""


class _Unhashable:
    __slots__ = ()

    def __repr__(self) -> str:
        return '<unhashable>'


# Marker stored in the hash slot when the target is known to be unhashable.
_UNHASHABLE: Any = _Unhashable()

_trace_enabled = os.environ.get('TETHER_TRACE_RESOLVE', '') not in ('', '0')

_async_pool: concurrent.futures.ThreadPoolExecutor | None = None
_async_pool_lock = threading.Lock()


def trace_resolution(enabled: bool = True) -> None:
    """Turn on (or off) the logging of the stack at which each proxy resolves.

    When on, every resolution logs the resolving stack at ``INFO`` on the logger
    ``tether.proxy`` and keeps it on the proxy for :func:`where_resolved`. The
    environment variable ``TETHER_TRACE_RESOLVE=1`` turns it on at import.
    """
    global _trace_enabled
    _trace_enabled = enabled


# The names below are served by the proxy itself, never forwarded to the target.
_SLOTS = (
    '__proxy_factory__',
    '__proxy_target__',
    '__proxy_class__',
    '__proxy_shown__',
    '__proxy_hash__',
    '__proxy_lock__',
    '__proxy_pending__',
    '__proxy_trace__',
)


class Proxy(Generic[T]):
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
    :class:`ProxyMetadata`, rebuilt as ``cls(factory)`` with the metadata set again (see
    "Proxy subclasses" in ``docs/concepts.md``).

    Raises:
        ProxyResolveError: (on first use) when the factory raises; the factory's error
            is chained as the cause. Errors of tether itself (for example
            ``ProxyResolveMissingKeyError``, ``SerializationError``, ``ConnectorError``)
            propagate with their own type and a note naming the factory.
    """

    __slots__ = (*_SLOTS, '__weakref__')

    def __init__(
        self,
        factory: Callable[[], T],
        *,
        target_class: type | None = None,
        target_hash: int | None = None,
        target: Any = _MISSING,
        cache_defaults: bool = False,
    ) -> None:
        if not callable(factory):
            raise TypeError(f'Proxy factory must be callable, got {type(factory).__name__}')
        _set(self, '__proxy_factory__', factory)
        _set(self, '__proxy_target__', _MISSING)
        _set_class(self, target_class)
        _set(self, '__proxy_hash__', target_hash)
        _set(self, '__proxy_lock__', threading.Lock())
        _set(self, '__proxy_pending__', None)
        _set(self, '__proxy_trace__', None)
        if target is not _MISSING:
            _preset_target(self, target, cache_defaults)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _serve_own_names(cls)

    # Attribute access ------------------------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if name in _LOCAL_NAMES:
            return _local_attribute(self, name)
        target = _get_target(self)
        if target is _MISSING:
            target = _resolve(self)
        return getattr(target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_target(self), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(_target(self), name)

    def __dir__(self) -> list[str]:
        return dir(_target(self))

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # Reached through ``object.__getattribute__(p, '__class__')``; the usual way in
        # (``p.__class__``, ``isinstance``) is ``_local_attribute``, which answers the same.
        cls = _get_shown(self)
        if cls is None:
            return _class_of(self)
        return cast(type, cls)

    # Pickling --------------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        # The one pickling rule of every proxy class: (class, factory, metadata), rebuilt
        # as ``cls(factory)``. Plain proxies use a shorter form of the same thing.
        factory = _get_factory(self)
        cls, h = _pickled_metadata(self)
        kind = type(self)
        if kind is not Proxy:
            return (_rebuild_as, (kind, factory, cls, h))
        if cls is None and h is None:
            return (Proxy, (factory,))
        return (_rebuild, (factory, cls, h))

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
        return (type(self).__qualname__, repr(_get_factory(self)))

    # Representation --------------------------------------------------------------------

    def __repr__(self) -> str:
        target = _get_target(self)
        if target is _MISSING:
            cls = _get_class(self)
            what = f'{cls.__module__}.{cls.__qualname__}' if cls is not None else 'unknown'
            return f'<Proxy of {what} (unresolved), factory={_get_factory(self)!r}>'
        return repr(target)

    def __str__(self) -> str:
        return str(_target(self))

    def __bytes__(self) -> bytes:
        return bytes(_target(self))

    def __format__(self, spec: str) -> str:
        return format(_target(self), spec)

    # Hashing and truth -----------------------------------------------------------------

    def __hash__(self) -> int:
        h = _get_hash(self)
        if h is None:
            return hash(_target(self))
        if h is _UNHASHABLE:
            cls = _get_class(self)
            name = cls.__name__ if cls is not None else 'object'
            raise TypeError(f"unhashable type: '{name}' (proxy)")
        return cast(int, h)

    def __bool__(self) -> bool:
        return bool(_target(self))

    # Comparisons -----------------------------------------------------------------------

    def __eq__(self, other: object) -> Any:
        return _target(self) == other

    def __ne__(self, other: object) -> Any:
        return _target(self) != other

    def __lt__(self, other: Any) -> Any:
        return _target(self) < other

    def __le__(self, other: Any) -> Any:
        return _target(self) <= other

    def __gt__(self, other: Any) -> Any:
        return _target(self) > other

    def __ge__(self, other: Any) -> Any:
        return _target(self) >= other

    # Containers ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(_target(self))

    def __length_hint__(self) -> int:
        return operator.length_hint(_target(self))

    def __getitem__(self, key: Any) -> Any:
        return _target(self)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        _target(self)[key] = value

    def __delitem__(self, key: Any) -> None:
        del _target(self)[key]

    def __iter__(self) -> Any:
        return iter(_target(self))

    def __next__(self) -> Any:
        return next(_target(self))

    def __reversed__(self) -> Any:
        return reversed(_target(self))

    def __contains__(self, item: Any) -> bool:
        return item in _target(self)

    # Calls, contexts, coroutines -------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _target(self)(*args, **kwargs)

    def __enter__(self) -> Any:
        return _target(self).__enter__()

    def __exit__(self, *args: Any) -> Any:
        return _target(self).__exit__(*args)

    async def __aenter__(self) -> Any:
        return await _target(self).__aenter__()

    async def __aexit__(self, *args: Any) -> Any:
        return await _target(self).__aexit__(*args)

    def __await__(self) -> Any:
        return _target(self).__await__()

    def __aiter__(self) -> Any:
        return _target(self).__aiter__()

    def __anext__(self) -> Any:
        return _target(self).__anext__()

    # Numbers ---------------------------------------------------------------------------

    def __neg__(self) -> Any:
        return -_target(self)

    def __pos__(self) -> Any:
        return +_target(self)

    def __abs__(self) -> Any:
        return abs(_target(self))

    def __invert__(self) -> Any:
        return ~_target(self)

    def __int__(self) -> int:
        return int(_target(self))

    def __float__(self) -> float:
        return float(_target(self))

    def __complex__(self) -> complex:
        return complex(_target(self))

    def __index__(self) -> int:
        return operator.index(_target(self))

    def __round__(self, ndigits: int | None = None) -> Any:
        return round(_target(self), ndigits)

    def __trunc__(self) -> Any:
        import math

        return math.trunc(_target(self))

    def __floor__(self) -> Any:
        import math

        return math.floor(_target(self))

    def __ceil__(self) -> Any:
        import math

        return math.ceil(_target(self))

    def __fspath__(self) -> Any:
        return os.fspath(_target(self))

    def __sizeof__(self) -> int:
        return object.__sizeof__(self)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        target = _target(self)
        method = getattr(type(target), '__array__', None)
        if method is not None:
            return method(target, *args, **kwargs)
        import numpy

        return numpy.asarray(target, *args, **kwargs)


_set = object.__setattr__
_get_factory = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_factory__.__get__)  # type: ignore[attr-defined]
_get_target = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_target__.__get__)  # type: ignore[attr-defined]
_get_class = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_class__.__get__)  # type: ignore[attr-defined]
_get_shown = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_shown__.__get__)  # type: ignore[attr-defined]
_get_hash = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_hash__.__get__)  # type: ignore[attr-defined]
_get_lock = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_lock__.__get__)  # type: ignore[attr-defined]
_get_pending = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_pending__.__get__)  # type: ignore[attr-defined]
_get_trace = cast(Callable[[Proxy[Any]], Any], Proxy.__proxy_trace__.__get__)  # type: ignore[attr-defined]

# Classes engines handle by ``isinstance`` in ways that would resolve a proxy: Dask's
# parse_input walks dicts, lists, tuples and sets to find futures in task arguments; Ray
# sends ``bytes`` raw (and, when that fails, formats the argument in its error report).
# A proxy of one tells engine code it is a Proxy even when its class is known, so the
# class goes only to ``__proxy_class__``; the class in ``__proxy_shown__`` is told to
# anyone without asking who asks.
ENGINE_SPECIAL_CLASSES: Final[tuple[type, ...]] = (
    dict,
    list,
    tuple,
    set,
    frozenset,
    bytes,
    bytearray,
    memoryview,
)
"""Classes (with their subclasses) whose proxies engine code is always told are ``Proxy``."""
_special_memo: dict[type, bool] = {}


def _set_class(proxy: Proxy[Any], cls: type | None) -> None:
    _set(proxy, '__proxy_class__', cls)
    shown = cls
    if cls is not None:
        special = _special_memo.get(cls)
        if special is None:
            try:
                special = issubclass(cls, ENGINE_SPECIAL_CLASSES)
            except TypeError:
                special = False
            if len(_special_memo) < 4096:
                _special_memo[cls] = special
        if special:
            shown = None
    _set(proxy, '__proxy_shown__', shown)


_LOCAL_NAMES = frozenset(
    (
        *_SLOTS,
        '__class__',
        '__copy__',
        '__deepcopy__',
        '__module__',
        '__reduce__',
        '__reduce_ex__',
        '__weakref__',
        # Dask probes task arguments for these; a proxy is plain data to Dask and must
        # not resolve (or be mistaken for a Dask collection or future) when probed.
        '__dask_tokenize__',
        '__dask_future__',
        '__dask_graph__',
        '__dask_keys__',
        '__dask_layers__',
        '__dask_optimize__',
        '__dask_postcompute__',
        '__dask_postpersist__',
        '__dask_scheduler__',
    ),
)


def _local_attribute(proxy: Proxy[Any], name: str) -> Any:
    if name == '__class__':
        cls = _get_shown(proxy)
        if cls is not None:
            return cls
        return _class_of(proxy)
    if name == '__module__':
        cls = _get_shown(proxy)
        return (cls if cls is not None else _class_of(proxy)).__module__
    return object.__getattribute__(proxy, name)


# Where, counted from ``_asked_by_engine``, the search for the asker starts: past itself,
# ``_class_of`` and its caller (``_local_attribute`` or the ``__class__`` getter), so at
# the ``__getattribute__`` that called ``_local_attribute`` (skipped by the search) or at
# whoever called the getter. Starting there spares Python materializing the frames below.
_ASKER_START = 3


def _class_of(proxy: Proxy[Any]) -> type:
    """``__class__`` of a proxy whose class is unknown or engine-special, by who asks.

    Engine code (see :func:`register_engine_module`) inspecting a task argument is told
    the proxy is a :class:`Proxy`, resolved or not: it then handles the proxy as opaque
    data and pickles it (its factory), instead of resolving it, waiting for a future's
    result, walking a container's items or sending a buffer raw. Anyone else is told
    the target's class: from the metadata if known, else by resolving (a future's proxy
    not set yet, in the process that made the future, answers :class:`Proxy` instead of
    waiting).
    """
    if _asked_by_engine(_ASKER_START):
        return type(proxy)
    cls = _get_class(proxy)
    if cls is not None:
        return cast(type, cls)
    target = _get_target(proxy)
    if target is _MISSING:
        if _may_block(proxy):
            return type(proxy)
        target = _resolve(proxy)
    return type(target)


# Engines that inspect the objects they are handed (task arguments and results) before
# pickling them: module names, matched with their submodules. tether's own modules that
# pass user objects along (executors, task servers, the function service) are engines too.
_ENGINE_MODULES: set[str] = {
    'cloudpickle',
    'concurrent.futures',
    'copy',
    'copyreg',
    'dask',
    'dill',
    'distributed',
    'inspect',
    'multiprocessing',
    'parsl',
    'pickle',
    'ray',
    'tether.bench.engine',
    'tether.bench.executor',
    'tether.bench.transformer',
    'tether.faas',
    'tether.plugins',
    'tether.serialize',
    'tether.steer',
    'tether.store.executor',
}
# Modules that ask on behalf of their caller (``functools.singledispatch`` reads
# ``args[0].__class__``; ``abc`` and ``typing`` run ``isinstance`` for a class): the asker
# is whoever called them.
_RELAYING_MODULES = frozenset(('_py_abc', 'abc', 'functools', 'typing'))
_USER, _ENGINE, _RELAY = 0, 1, 2
_engine_memo: dict[str, int] = {}
_PROXY_GLOBALS = globals()


def register_engine_module(name: str) -> None:
    """Treat code of module ``name`` (and its submodules) as an engine's.

    When code of such a module asks a proxy for its class (``isinstance``, ``__class__``,
    ``__module__``) and the answer is not known without resolving, or is one of
    :data:`ENGINE_SPECIAL_CLASSES` (containers engines walk, buffers they send raw), the
    proxy answers :class:`Proxy` instead of resolving or waiting. Dask, distributed, Ray,
    Parsl, cloudpickle, dill, ``pickle``, ``copy``, ``inspect``, ``multiprocessing``,
    ``concurrent.futures`` and tether's executors are registered already; register the
    modules of another engine that inspects task arguments before pickling them.
    """
    _ENGINE_MODULES.add(name)
    _engine_memo.clear()


def _module_kind(name: str) -> int:
    if name in _RELAYING_MODULES:
        return _RELAY
    while True:
        if name in _ENGINE_MODULES:
            return _ENGINE
        name, dot, _ = name.rpartition('.')
        if not dot:
            return _USER


def _asked_by_engine(start: int = 1) -> bool:
    """Whether the code asking a proxy for its class belongs to an engine.

    The asker is the first frame up the stack that is not this module's, not a
    ``__getattribute__`` of a proxy subclass and not a module asking for its caller
    (``functools``, ``abc``, ``typing``); C callers such as ``isinstance`` have no frame,
    so their Python caller is the asker. Only reached when the answer is not known.
    The search starts ``start`` frames up (frames below it are this module's).
    """
    frame: FrameType | None = sys._getframe(start)
    while frame is not None:
        f_globals = frame.f_globals
        if f_globals is not _PROXY_GLOBALS and frame.f_code.co_name != '__getattribute__':
            name = f_globals.get('__name__')
            if not isinstance(name, str):
                return False
            kind = _engine_memo.get(name)
            if kind is None:
                kind = _module_kind(name)
                if len(_engine_memo) < 4096:
                    _engine_memo[name] = kind
            if kind != _RELAY:
                return kind == _ENGINE
        frame = frame.f_back
    return False


def _may_block(proxy: Proxy[Any]) -> bool:
    """Whether resolving ``proxy`` now would wait on another task (a future not set yet).

    Factories say that resolving may wait with a true ``resolve_may_block`` attribute,
    and may offer ``ready()`` (true once resolving would not wait). The factories of
    :meth:`tether.store.future.Future.proxy` do, in the process that made the future.
    Metadata queries (``__class__``, ``isinstance``, ``__module__``) on such an
    unresolved proxy of unknown class answer for the proxy itself instead of waiting.
    """
    factory = _get_factory(proxy)
    if not getattr(factory, 'resolve_may_block', False):
        return False
    ready = getattr(factory, 'ready', None)
    return ready is None or not ready()


def _binary(op: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    def forward(self: Proxy[Any], other: Any) -> Any:
        return op(_target(self), other)

    def reflected(self: Proxy[Any], other: Any) -> Any:
        return op(other, _target(self))

    return forward, reflected


def _inplace(op: Callable[[Any, Any], Any]) -> Any:
    def method(self: Proxy[Any], other: Any) -> Proxy[Any]:
        _set(self, '__proxy_target__', op(_target(self), other))
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
        return _target(self) ** other
    return pow(_target(self), other, mod)


def _rpow(self: Proxy[Any], other: Any, mod: Any = None) -> Any:
    if mod is None:
        return other ** _target(self)
    return pow(other, _target(self), mod)


def _ipow(self: Proxy[Any], other: Any, mod: Any = None) -> Proxy[Any]:
    _set(self, '__proxy_target__', _pow(self, other, mod))
    return self


_pow.__name__, _rpow.__name__, _ipow.__name__ = '__pow__', '__rpow__', '__ipow__'
for _name, _fn in (('__pow__', _pow), ('__rpow__', _rpow), ('__ipow__', _ipow)):
    setattr(Proxy, _name, _fn)


def _pickled_metadata(proxy: Proxy[Any]) -> tuple[type | None, int | str | None]:
    """The class and hash a pickled proxy carries (``'u'`` for a known unhashable)."""
    cls = _get_class(proxy)
    if cls is None:
        target = _get_target(proxy)
        if target is not _MISSING:
            cls = type(target)
    if cls is not None and '<locals>' in getattr(cls, '__qualname__', '<locals>'):
        cls = None
    h = _get_hash(proxy)
    if h is _UNHASHABLE:
        h = 'u'
    return cls, h


def _rebuild(factory: Callable[[], Any], cls: type | None, h: int | str | None) -> Proxy[Any]:
    proxy: Proxy[Any] = Proxy(factory, target_class=cls)
    _set(proxy, '__proxy_hash__', _UNHASHABLE if h == 'u' else h)
    return proxy


def _rebuild_as(
    kind: type[Proxy[Any]],
    factory: Callable[[], Any],
    cls: type | None,
    h: int | str | None,
) -> Proxy[Any]:
    proxy = kind(factory)
    _set_class(proxy, cls)
    _set(proxy, '__proxy_hash__', _UNHASHABLE if h == 'u' else h)
    return proxy


def _target(proxy: Proxy[Any]) -> Any:
    target = _get_target(proxy)
    if target is _MISSING:
        return _resolve(proxy)
    return target


def _resolve(proxy: Proxy[T]) -> T:
    with _get_lock(proxy):
        target = _get_target(proxy)
        if target is not _MISSING:
            return cast(T, target)
        pending = _get_pending(proxy)
        factory = _get_factory(proxy)
        try:
            target = pending.result() if pending is not None else factory()
        except TetherError as e:
            # Our own errors (missing key, corrupt bytes, server down) keep their type.
            e.add_note(f'while resolving a proxy with factory {factory!r}')
            raise
        except Exception as e:
            raise ProxyResolveError(
                f'factory {factory!r} of a proxy raised {type(e).__name__}: {e}',
            ) from e
        finally:
            _set(proxy, '__proxy_pending__', None)
        _set(proxy, '__proxy_target__', target)
        if _trace_enabled:
            stack = ''.join(traceback.format_stack()[:-2])
            _set(proxy, '__proxy_trace__', stack)
            logger.info(
                'proxy of %s resolved by factory %r at:\n%s',
                type(target).__qualname__,
                factory,
                stack,
            )
        return cast(T, target)


ProxyOr: TypeAlias = Proxy[T] | T
"""A type that is either a ``Proxy[T]`` or a ``T``."""


def extract(proxy: Proxy[T]) -> T:
    """Return the target of ``proxy``, resolving it first if needed."""
    return cast(T, _target(proxy))


def get_factory(proxy: Proxy[T]) -> Callable[[], T]:
    """Return the factory of ``proxy`` (does not resolve)."""
    return cast(Callable[[], T], _get_factory(proxy))


def is_resolved(proxy: Proxy[Any]) -> bool:
    """Return ``True`` when the target of ``proxy`` is already resolved (does not resolve)."""
    return _get_target(proxy) is not _MISSING


def resolve(proxy: Proxy[Any]) -> None:
    """Resolve ``proxy`` in place, now, if it is not resolved yet."""
    _target(proxy)


def _forget_pool_after_fork() -> None:
    # A forked child inherits the pool object but none of its threads; worse, the pool's
    # idle-thread count says a thread is waiting, so it would never start one, and every
    # resolve_async in the child (a task server's worker forked from a process that had
    # resolved a proxy in the background) would wait forever. The child starts afresh.
    global _async_pool, _async_pool_lock
    _async_pool = None
    _async_pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _async_pool
    with _async_pool_lock:
        if _async_pool is None:
            _async_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix='tether-resolve',
            )
        return _async_pool


def resolve_async(proxy: Proxy[Any]) -> None:
    """Start resolving ``proxy`` in the background and return at once.

    The fetch overlaps with whatever the caller does next; the first use of the proxy
    waits for it to finish. The work runs on a small shared thread pool, not a thread per
    proxy. Calling it on a resolved (or already resolving) proxy does nothing.
    """
    if _get_target(proxy) is not _MISSING:
        return
    with _get_lock(proxy):
        if _get_target(proxy) is not _MISSING or _get_pending(proxy) is not None:
            return
        factory = _get_factory(proxy)
        _set(proxy, '__proxy_pending__', _pool().submit(factory))


def where_resolved(proxy: Proxy[Any]) -> str | None:
    """Return the stack at which ``proxy`` resolved, if tracing was on at that moment."""
    return cast(str | None, _get_trace(proxy))


# The API for proxy subclasses and for code that builds proxies (stores) ---------------


class ProxyMetadata(NamedTuple):
    """What a proxy knows about its target without resolving it; pickled with the proxy.

    Attributes:
        target_class: The target's class (``isinstance`` and ``__class__`` answer from
            it), or ``None`` if unknown.
        target_hash: The target's hash (``hash`` answers from it), or ``None`` if unknown.
        unhashable: The target is known to be unhashable (``hash`` raises ``TypeError``
            without resolving).
    """

    target_class: type | None = None
    target_hash: int | None = None
    unhashable: bool = False


LOCAL_NAMES: Final[frozenset[str]] = frozenset(_LOCAL_NAMES)
"""Names a proxy serves itself (never forwarded to the target, never resolving it).

A subclass that intercepts attribute access (``__getattribute__``) lets these through
untouched, as :class:`Proxy` does.
"""


def get_metadata(proxy: Proxy[Any]) -> ProxyMetadata:
    """Return what ``proxy`` knows about its target (does not resolve)."""
    h = _get_hash(proxy)
    if h is _UNHASHABLE:
        return ProxyMetadata(_get_class(proxy), None, True)
    return ProxyMetadata(_get_class(proxy), h, False)


def set_metadata(proxy: Proxy[Any], metadata: ProxyMetadata) -> None:
    """Replace what ``proxy`` knows about its target (its target, if any, stays)."""
    _set_class(proxy, metadata.target_class)
    _set(proxy, '__proxy_hash__', _UNHASHABLE if metadata.unhashable else metadata.target_hash)


def metadata_of(obj: Any) -> ProxyMetadata:
    """Return the metadata a proxy of ``obj`` carries: its class and hash (never raises)."""
    if type(obj).__hash__ is None:
        return ProxyMetadata(type(obj), None, True)
    try:
        return ProxyMetadata(type(obj), hash(obj), False)
    except TypeError:
        return ProxyMetadata(type(obj), None, True)
    except Exception:
        return ProxyMetadata(type(obj))  # hashing failed otherwise: unknown, hash() resolves


def set_target(proxy: Proxy[T], target: T) -> None:
    """Make ``proxy`` resolved to ``target`` now, without calling its factory.

    For code that builds a proxy of an object at hand (a store's ``proxy()``). The
    factory is kept (it still travels when the proxy is pickled).
    """
    _set(proxy, '__proxy_target__', target)


def _target_hash(obj: Any) -> Any:
    """The hash to cache for ``obj`` (``_UNHASHABLE`` when it has none)."""
    meta = metadata_of(obj)
    return _UNHASHABLE if meta.unhashable else meta.target_hash


def _preset_target(proxy: Proxy[Any], target: Any, cache_defaults: bool) -> None:
    _set(proxy, '__proxy_target__', target)
    if cache_defaults:
        if _get_class(proxy) is None:
            _set_class(proxy, type(target))
        if _get_hash(proxy) is None:
            _set(proxy, '__proxy_hash__', _target_hash(target))


def _own_names(cls: type) -> frozenset[str]:
    """The non-dunder names a proxy subclass (and its proxy bases) define themselves."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is Proxy or not (isinstance(klass, type) and issubclass(klass, Proxy)):
            continue
        names.update(n for n in vars(klass) if not (n.startswith('__') and n.endswith('__')))
    return frozenset(names)


def _serve_own_names(cls: type) -> None:
    """Let a proxy subclass serve its own attributes instead of forwarding them.

    Plain proxies pay nothing: the lookup is installed only on subclasses that define
    names of their own and do not define ``__getattribute__``/``__setattr__`` themselves.
    """
    own = _own_names(cls)
    if not own:
        return
    namespace = vars(cls)
    if '__getattribute__' not in namespace:

        def __getattribute__(self: Proxy[Any], name: str) -> Any:  # noqa: N807
            if name in own:
                return object.__getattribute__(self, name)
            return super(cls, self).__getattribute__(name)  # type: ignore[arg-type]

        cls.__getattribute__ = __getattribute__  # type: ignore[method-assign,assignment]
    if '__setattr__' not in namespace:

        def __setattr__(self: Proxy[Any], name: str, value: Any) -> None:  # noqa: N807
            if name in own:
                object.__setattr__(self, name, value)
            else:
                super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

        cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
    if '__delattr__' not in namespace:

        def __delattr__(self: Proxy[Any], name: str) -> None:  # noqa: N807
            if name in own:
                object.__delattr__(self, name)
            else:
                super(cls, self).__delattr__(name)  # type: ignore[arg-type]

        cls.__delattr__ = __delattr__  # type: ignore[method-assign,assignment]


class ProxyLocker(Generic[T]):
    """Holds a proxy so that nothing can use (and so resolve) it by accident.

    Every attribute of the locker is refused except :meth:`unlock`, which hands the proxy
    back. Pickling a locker pickles the proxy (never its target).

    Args:
        proxy: The proxy to lock.
    """

    __slots__ = ('_proxy',)

    def __init__(self, proxy: Proxy[T]) -> None:
        object.__setattr__(self, '_proxy', proxy)

    def __getattribute__(self, name: str) -> Any:
        if name == '_proxy':
            raise AttributeError('a ProxyLocker hides its proxy: call unlock() to get it')
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return 'ProxyLocker(<locked proxy>)'

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProxyLocker, (self.unlock(),))

    def unlock(self) -> Proxy[T]:
        """Return the locked proxy (unresolved if it was)."""
        return cast(Proxy[T], _locker_proxy(self))


_locker_proxy = cast(Callable[[ProxyLocker[Any]], Any], ProxyLocker._proxy.__get__)  # type: ignore[attr-defined]
