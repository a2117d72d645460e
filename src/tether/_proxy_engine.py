"""Who asks a proxy for its class: engine code (told ``Proxy``) or anyone else.

Private to :mod:`tether.proxy` (whose docstring states the contract).
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

__all__ = ['asked_by_engine', 'register_engine_module', 'skip_frames_of']

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
# The globals (by id) of the proxy machinery's own modules: their frames never ask.
_OWN_GLOBALS: set[int] = set()


def skip_frames_of(module_globals: dict[str, Any]) -> None:
    """Count frames of the module with these globals as the proxy machinery's own."""
    _OWN_GLOBALS.add(id(module_globals))


def register_engine_module(name: str) -> None:
    """Treat code of module ``name`` (and its submodules) as an engine's.

    When code of such a module asks a proxy for its class (``isinstance``, ``__class__``,
    ``__module__``) and the answer is not known without resolving, or is one of
    :data:`~tether.proxy.ENGINE_SPECIAL_CLASSES` (containers engines walk, buffers they
    send raw), the proxy answers :class:`~tether.proxy.Proxy` instead of resolving or
    waiting. Dask, distributed, Ray,
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


def asked_by_engine(start: int = 1) -> bool:
    """Whether the code asking a proxy for its class belongs to an engine.

    The asker is the first frame up the stack that is not the proxy machinery's, not a
    ``__getattribute__`` of a proxy subclass and not a module asking for its caller
    (``functools``, ``abc``, ``typing``); C callers such as ``isinstance`` have no frame,
    so their Python caller is the asker. Only reached when the answer is not known.
    The search starts ``start`` frames up (frames below it are the machinery's).
    """
    frame: FrameType | None = sys._getframe(start)
    own = _OWN_GLOBALS
    while frame is not None:
        f_globals = frame.f_globals
        if id(f_globals) not in own and frame.f_code.co_name != '__getattribute__':
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
