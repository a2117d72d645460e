"""``with`` for objects that have a ``close()``: one mixin instead of the same two methods
written in every class that closes.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

__all__ = ['ClosingContext']


class ClosingContext:
    """``with obj:`` returns ``obj`` and calls its ``close()`` (no arguments) on exit."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        close: Any = getattr(self, 'close')  # noqa: B009 - the subclass's own close()
        close()
