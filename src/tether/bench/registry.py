"""The bench registry: apps, executors, transformers and filters, by name.

A plugin is a pydantic config class with a ``name`` field whose default is the plugin's
name, decorated with :func:`register`::

    @register('app')
    class FooAppConfig(AppConfig):
        name: str = 'foo'
        ...

The built-in plugins are listed in :data:`BUILTIN` as ``name -> module`` so that listing
them and building the command line imports only the modules of the chosen ones (and none
of their heavy dependencies). Third-party plugins are modules named in the
``tether.bench.plugins`` entry-point group (or passed to ``tether bench run --import``):
importing them runs their ``@register`` decorators. Adding a built-in plugin is one
module plus one line in :data:`BUILTIN`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from tether.exceptions import (
    ConfigError,
    PluginKindError,
    PluginNotFoundError,
    PluginRegistrationError,
)

__all__ = [
    'BUILTIN',
    'KINDS',
    'Kind',
    'get_app_configs',
    'get_executor_configs',
    'get_filter_configs',
    'get_plugin',
    'get_transformer_configs',
    'import_plugin_module',
    'plugin_names',
    'register',
    'registered',
]

logger = logging.getLogger(__name__)

Kind = Literal['app', 'executor', 'filter', 'transformer']
KINDS: tuple[Kind, ...] = ('app', 'executor', 'filter', 'transformer')

ConfigT = TypeVar('ConfigT', bound=type[Any])

_APPS = 'tether.bench.apps.'
_EX = 'tether.bench.executor.'

BUILTIN: dict[str, dict[str, str]] = {
    'app': {
        'cholesky': _APPS + 'cholesky',
        'docking': _APPS + 'docking',
        'failures': _APPS + 'failures',
        'fedlearn': _APPS + 'fedlearn',
        'mapreduce': _APPS + 'mapreduce',
        'moldesign': _APPS + 'moldesign',
        'montage': _APPS + 'montage',
        'physics': _APPS + 'physics',
        'synthetic': _APPS + 'synthetic',
    },
    'executor': {
        'dask': _EX + 'dask',
        'faas': _EX + 'faas',
        'globus': _EX + 'faas',
        'parsl-htex': _EX + 'parsl',
        'parsl-local': _EX + 'parsl',
        'process-pool': _EX + 'python',
        'ray': _EX + 'ray',
        'thread-pool': _EX + 'python',
    },
    'filter': {
        'all': 'tether.bench.filter',
        'never': 'tether.bench.filter',
        'object-size': 'tether.bench.filter',
        'object-type': 'tether.bench.filter',
        'pickle-size': 'tether.bench.filter',
    },
    'transformer': {
        'file': 'tether.bench.transformer.file',
        'proxystore': 'tether.bench.transformer.store',
        'store': 'tether.bench.transformer.store',
    },
}
"""Built-in plugins: kind -> name -> module that registers it."""

_ENTRY_POINT_GROUP = 'tether.bench.plugins'

_registry: dict[str, dict[str, type[Any]]] = {kind: {} for kind in KINDS}
_lock = threading.RLock()
_entry_points_loaded = False


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise PluginKindError(f'Unknown plugin type "{kind}". Kinds: {", ".join(KINDS)}')


def register(kind: Kind, *, name: str | None = None) -> Callable[[ConfigT], ConfigT]:
    """Class decorator registering a config class as the plugin ``name`` of ``kind``.

    Args:
        kind: ``'app'``, ``'executor'``, ``'filter'`` or ``'transformer'``.
        name: The plugin's name (default: the default of the class's ``name`` field).

    Raises:
        PluginKindError: for an unknown kind (a ConfigError and a ValueError).
        PluginRegistrationError: for a class without a name, or a name already taken by
            another class (a ConfigError and a RuntimeError).
    """
    _check_kind(kind)

    def decorator(cls: ConfigT) -> ConfigT:
        plugin = name
        if plugin is None:
            field = getattr(cls, 'model_fields', {}).get('name')
            plugin = None if field is None else field.default
        if not isinstance(plugin, str) or not plugin:
            raise PluginRegistrationError(
                f'Failed to register {cls.__name__} as a {kind} plugin: it needs a name: '
                f'give its "name" field a default '
                f"(name: str = 'foo') or pass register({kind!r}, name=...)",
            )
        with _lock:
            current = _registry[kind].get(plugin)
            if current is not None and current is not cls and not _same_class(current, cls):
                raise PluginRegistrationError(
                    f'{kind} plugin {plugin!r} is already registered by '
                    f'{current.__module__}.{current.__qualname__}',
                )
            _registry[kind][plugin] = cls
        return cls

    return decorator


def _same_class(a: type[Any], b: type[Any]) -> bool:
    # A module imported twice (as __main__ and by name) registers equal classes twice.
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def import_plugin_module(module: str) -> None:
    """Import ``module`` so that its ``@register`` decorators run.

    Raises:
        ConfigError: if the module cannot be imported.
    """
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f'cannot import plugin module {module!r}: {e}') from e


def _load_entry_points() -> None:
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        _entry_points_loaded = True
    for ep in importlib.metadata.entry_points(group=_ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception:
            logger.exception('cannot load tether.bench plugin entry point %s', ep.name)


def plugin_names(kind: Kind) -> list[str]:
    """Return the sorted names of every plugin of ``kind`` (built-in and registered)."""
    _check_kind(kind)
    _load_entry_points()
    with _lock:
        return sorted({*BUILTIN.get(kind, {}), *_registry[kind]})


def get_plugin(kind: Kind, name: str) -> type[Any]:
    """Return the config class of the plugin ``name`` of ``kind``, importing it if built in.

    Raises:
        PluginNotFoundError: if no plugin of that kind has that name.
        ConfigError: if the plugin's module cannot be imported.
    """
    _check_kind(kind)
    with _lock:
        cls = _registry[kind].get(name)
    if cls is not None:
        return cls
    module = BUILTIN.get(kind, {}).get(name)
    if module is not None:
        import_plugin_module(module)
    else:
        _load_entry_points()
    with _lock:
        cls = _registry[kind].get(name)
    if cls is None:
        raise PluginNotFoundError(
            f'no {kind} named {name!r}; available: {", ".join(plugin_names(kind))}',
        )
    return cls


def registered(kind: Kind) -> dict[str, type[Any]]:
    """Import every plugin of ``kind`` and return ``name -> config class``.

    Built-in plugins whose module cannot be imported (a missing optional dependency) are
    left out and logged.
    """
    for name in plugin_names(kind):
        try:
            get_plugin(kind, name)
        except ConfigError as e:
            logger.warning('%s plugin %r is unavailable: %s', kind, name, e)
    with _lock:
        return dict(sorted(_registry[kind].items()))


def get_app_configs() -> dict[str, type[Any]]:
    """Every application config: ``name -> class`` (TaPS's name for ``registered('app')``)."""
    return registered('app')


def get_executor_configs() -> dict[str, type[Any]]:
    """Every executor config (``registered('executor')``)."""
    return registered('executor')


def get_filter_configs() -> dict[str, type[Any]]:
    """Every filter config (``registered('filter')``)."""
    return registered('filter')


def get_transformer_configs() -> dict[str, type[Any]]:
    """Every transformer config (``registered('transformer')``)."""
    return registered('transformer')
