"""Mixin that makes a connector a context manager (``with Connector(...) as c:``)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

__all__ = ['ClosingContext']


class ClosingContext:
    """``with`` returns the connector and calls its ``close()`` (no arguments) on exit."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        close: Any = getattr(self, 'close')  # noqa: B009 - the connector's own close()
        close()
