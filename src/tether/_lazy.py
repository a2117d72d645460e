"""Names a package exports but imports only on first use (PEP 562 ``__getattr__``).

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ['lazy_attributes']


def lazy_attributes(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module`` that imports each name of ``homes`` from its home.

    ``homes`` maps a name to the module that defines it; the value is kept in ``module``
    once imported, so a name is looked up this way once.

    Usage: ``__getattr__ = lazy_attributes(__name__, {'Name': 'package.module'})``.
    """

    def lazy_getattr(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f'module {module!r} has no attribute {name!r}')
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    return lazy_getattr
