"""The one "no value" sentinel every module uses (``tether.proxy.MISSING`` publicly).

A sentinel stands for "no argument given" or "no value found" where ``None`` is a valid
value. There is one, here, at the bottom of the package, so that a value missing in one
module is missing in all of them (a store's ``get(default=MISSING)`` answered by a
future, a proxy without a target).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ['MISSING']


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return '<missing>'

    def __reduce__(self) -> str:
        # Pickled and unpickled in the same interpreter it stays the one object.
        return 'MISSING'


MISSING: Final[Any] = _Missing()
"""Stands for "no value": compare with ``is``."""
