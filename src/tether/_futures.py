"""Completing one ``concurrent.futures.Future`` as another completed: one function instead
of the same cancelled / failed / result steps written wherever a future is chained.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

__all__ = ['pass_outcome']


def pass_outcome(
    source: concurrent.futures.Future[Any],
    target: concurrent.futures.Future[Any],
    convert: Callable[[Any], Any] | None = None,
) -> None:
    """Complete ``target`` as ``source`` (done) completed.

    Cancelled, it cancels ``target``; failed, it sets ``source``'s exception; else it
    sets ``source``'s result, passed through ``convert`` when given.
    """
    if source.cancelled():
        target.cancel()
        return
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    elif convert is None:
        target.set_result(source.result())
    else:
        target.set_result(convert(source.result()))
