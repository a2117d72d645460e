"""Recognise futures of any framework: :class:`FutureProtocol` and :func:`is_future`.

A future here is anything with ``add_done_callback``, ``cancel``, ``done``,
``exception`` and ``result``: ``concurrent.futures.Future``, Dask's, Parsl's and
tether's task futures alike (TaPS's ``taps.future``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ['FutureProtocol', 'is_future']

T_co = TypeVar('T_co', covariant=True)


@runtime_checkable
class FutureProtocol(Protocol[T_co]):
    """What the bench needs of a future (``running()`` is not required: Dask's lacks it)."""

    def add_done_callback(self, callback: Callable[[Any], Any], /) -> None:
        """Call ``callback(future)`` once the future is done."""
        ...

    def cancel(self) -> bool:
        """Try to cancel; return whether it was cancelled."""
        ...

    def done(self) -> bool:
        """Whether the future is done."""
        ...

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The future's exception, or ``None``."""
        ...

    def result(self, timeout: float | None = None) -> T_co:
        """The future's value (raises its exception)."""
        ...


def is_future(obj: object) -> bool:
    """Whether ``obj`` looks like a future (see :class:`FutureProtocol`)."""
    return isinstance(obj, FutureProtocol)
