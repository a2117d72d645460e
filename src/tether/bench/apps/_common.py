"""What the built-in applications share: an app that holds nothing, the four-to-start rule."""

from __future__ import annotations

__all__ = ['HoldsNothing', 'at_least_four']


class HoldsNothing:
    """Base of an application that holds nothing between runs: :meth:`close` is a no-op."""

    def close(self) -> None:
        """Nothing to release."""


def at_least_four(count: int, what: str) -> int:
    """Return ``count``, or raise :class:`ValueError` if it is under four.

    The active-learning apps (docking, moldesign) fit a 4-nearest-neighbours regression:
    they need ``what`` (their initial results) to number four before the first model.
    """
    if count < 4:
        raise ValueError(f'Number of initial {what} must be at least four.')
    return count
