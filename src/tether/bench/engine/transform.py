"""TaPS's home of the task data transformer: :class:`TaskTransformer`.

``TaskTransformer(transformer, filter_)`` is :class:`~tether.bench.transformer.TaskDataTransformer`
with both arguments optional: without a transformer it passes every object unchanged.
"""

from __future__ import annotations

from typing import Any

from tether._closing import ClosingContext
from tether.bench.filter import Filter
from tether.bench.transformer import TaskDataTransformer, Transformer

__all__ = ['NullTransformer', 'TaskTransformer']


class NullTransformer:
    """Transforms nothing: no object is an identifier, and nothing needs closing."""

    def is_identifier(self, obj: Any) -> bool:
        """Nothing is an identifier."""
        return False

    def transform(self, obj: Any) -> Any:
        """Return ``obj`` itself."""
        return obj

    def resolve(self, identifier: Any) -> Any:
        """Return ``identifier`` itself."""
        return identifier

    def close(self) -> None:
        """Nothing to close."""


class TaskTransformer(TaskDataTransformer, ClosingContext):
    """A transformer and its filter (both optional: the default changes nothing).

    A context manager: ``with TaskTransformer(t) as tt:`` closes the transformer.
    """

    __slots__ = ()

    def __init__(
        self,
        transformer: Transformer | None = None,
        filter_: Filter | None = None,
    ) -> None:
        super().__init__(transformer if transformer is not None else NullTransformer(), filter_)
