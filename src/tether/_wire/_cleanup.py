"""Opening a connection: what fails on the way closes it, and says which peer failed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from tether.exceptions import WireConnectionError

__all__ = ['closed_on_error']


@contextlib.contextmanager
def closed_on_error(
    close: Callable[[], object],
    error: type[BaseException] | tuple[type[BaseException], ...] = (),
    describe: Callable[[BaseException], str] = str,
) -> Iterator[None]:
    """Run the block; if anything escapes it, call ``close`` first, and raise an ``error``
    as a :class:`~tether.exceptions.WireConnectionError` saying ``describe(error)``
    (anything else, and everything when no ``error`` is given, propagates as it is)."""
    try:
        yield
    except BaseException as e:
        close()
        if isinstance(e, error):
            raise WireConnectionError(describe(e)) from e
        raise
