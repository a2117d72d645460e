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

from typing import TypeAlias, TypeVar

from tether._missing import MISSING
from tether._proxy_core import Proxy, rebuild_proxy, rebuild_proxy_as
from tether._proxy_engine import register_engine_module
from tether._proxy_locker import ProxyLocker
from tether._proxy_meta import (
    ProxyMetadata,
    get_metadata,
    metadata_of,
    set_metadata,
    set_target,
)
from tether._proxy_resolve import (
    LOCAL_NAMES,
    extract,
    get_factory,
    is_resolved,
    resolve,
    resolve_async,
    trace_resolution,
    where_resolved,
)
from tether._proxy_slots import ENGINE_SPECIAL_CLASSES, MISSING_TARGET
from tether.exceptions import ProxyResolveError

__all__ = [
    'ENGINE_SPECIAL_CLASSES',
    'LOCAL_NAMES',
    'MISSING',
    'Proxy',
    'ProxyLocker',
    'ProxyMetadata',
    'ProxyOr',
    'ProxyResolveError',
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

ProxyOr: TypeAlias = Proxy[T] | T
"""A type that is either a ``Proxy[T]`` or a ``T``."""

# The machinery lives in small private modules (slots, engine detection, resolving,
# metadata, the class, the locker); its public names are this module's own: reprs,
# pickles (``tether.proxy.rebuild_proxy`` ...) and docs name ``tether.proxy``.
for _obj in (
    Proxy,
    ProxyLocker,
    ProxyMetadata,
    extract,
    get_factory,
    get_metadata,
    is_resolved,
    metadata_of,
    rebuild_proxy,
    rebuild_proxy_as,
    register_engine_module,
    resolve,
    resolve_async,
    set_metadata,
    set_target,
    trace_resolution,
    where_resolved,
):
    _obj.__module__ = __name__
del _obj

# Names older pickles and code used.
_MISSING = MISSING_TARGET
_rebuild = rebuild_proxy
_rebuild_as = rebuild_proxy_as
