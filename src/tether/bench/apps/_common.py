"""What the built-in applications share: a no-op close, the four-to-start rule, CSV output."""

from __future__ import annotations

import csv
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ['HoldsNothing', 'at_least_four', 'write_csv']


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


def write_csv(
    path: pathlib.Path,
    fieldnames: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
) -> pathlib.Path:
    """Write a header of ``fieldnames``, then ``rows`` (by those keys), to ``path``; return it.

    UTF-8, the ``csv`` module's default (Excel) dialect; the directory is made if missing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(rows)
    return path
