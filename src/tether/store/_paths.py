"""Import paths of classes and functions (``module.qualname``), both ways."""

from __future__ import annotations

import importlib
from typing import Any

from tether.exceptions import ConfigError, ImportPathError

__all__ = ['import_from_path', 'path_of']


def path_of(obj: Any) -> str:
    """Return the import path (``module.qualname``) of a class or function."""
    qualname = getattr(obj, '__qualname__', None)
    module = getattr(obj, '__module__', None)
    if qualname is None or module is None or '<locals>' in qualname or '<lambda>' in qualname:
        raise ConfigError(f'{obj!r} has no import path (define it at module level)')
    return f'{module}.{qualname}'


def import_from_path(path: str) -> Any:
    """Import ``module.qualname`` and return the object.

    Raises:
        ImportPathError: if no module of the path imports, or it lacks the name (a
            ``ConfigError`` and an ``ImportError``, which ProxyStore raised).
    """
    module_name, _, attr = path.rpartition('.')
    while module_name:
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError:
            module_name, _, head = module_name.rpartition('.')
            attr = f'{head}.{attr}'
            continue
        try:
            for part in attr.split('.'):
                obj = getattr(obj, part)
        except AttributeError as e:
            raise ImportPathError(f'cannot import {path!r}: {e}') from e
        return obj
    raise ImportPathError(f'cannot import {path!r}: no importable module in it')
