"""``with`` for objects that have a ``close()`` (or a ``start()`` and a ``stop()``): one
mixin instead of the same two methods written in every such class.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

from typing import Any, Self

__all__ = ['ClosingContext', 'StartStopContext']


class ClosingContext:
    """``with obj:`` returns ``obj`` and calls its ``close()`` (no arguments) on exit."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        close: Any = getattr(self, 'close')  # noqa: B009 - the subclass's own close()
        close()


class StartStopContext:
    """``with obj:`` calls its ``start()``, returns ``obj`` and calls its ``stop()`` on exit
    (both without arguments)."""

    __slots__ = ()

    def __enter__(self) -> Self:
        start: Any = getattr(self, 'start')  # noqa: B009 - the subclass's own start()
        start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        stop: Any = getattr(self, 'stop')  # noqa: B009 - the subclass's own stop()
        stop()
