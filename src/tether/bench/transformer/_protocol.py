"""The transformer protocol, its config base, and the filter-plus-transformer pair."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import pydantic

from tether.bench.filter import Filter

__all__ = ['TaskDataTransformer', 'Transformer', 'TransformerConfig']


@runtime_checkable
class Transformer(Protocol):
    """Turns objects into identifiers and back. Instances must pickle (workers use them)."""

    def is_identifier(self, obj: Any) -> bool:
        """Return whether ``obj`` is an identifier made by :meth:`transform`."""
        ...

    def transform(self, obj: Any) -> Any:
        """Store ``obj`` and return its identifier."""
        ...

    def resolve(self, identifier: Any) -> Any:
        """Return the object behind ``identifier``."""
        ...

    def close(self) -> None:
        """Release what the transformer holds (called once, by the client)."""
        ...


class TransformerConfig(pydantic.BaseModel):
    """Base of transformer configs (``[engine.transformer]`` in a run config)."""

    model_config = pydantic.ConfigDict(extra='forbid')

    name: str

    def get_transformer(self) -> Transformer:
        """Build the transformer."""
        raise NotImplementedError


_NEVER = (type(None), bool, int, float, complex)


class TaskDataTransformer:
    """A transformer with the filter that selects what it transforms.

    ``None``, booleans and numbers are never transformed (an identifier would be larger).

    Args:
        transformer: The transformer.
        filter_: Selects the objects to transform (default: all).
    """

    __slots__ = ('filter', 'transformer')

    def __init__(self, transformer: Transformer, filter_: Filter | None = None) -> None:
        self.transformer = transformer
        self.filter = filter_

    def __getstate__(self) -> tuple[Transformer, Filter | None]:
        return (self.transformer, self.filter)

    def __setstate__(self, state: tuple[Transformer, Filter | None]) -> None:
        self.transformer, self.filter = state

    def transform(self, obj: Any) -> Any:
        """Transform ``obj`` if the filter selects it; else return it unchanged."""
        if isinstance(obj, _NEVER) or self.transformer.is_identifier(obj):
            return obj
        if self.filter is not None and not self.filter(obj):
            return obj
        return self.transformer.transform(obj)

    def resolve(self, obj: Any) -> Any:
        """Resolve ``obj`` if it is an identifier; else return it unchanged."""
        if self.transformer.is_identifier(obj):
            return self.transformer.resolve(obj)
        return obj

    def transform_iterable(self, objs: Iterable[Any]) -> tuple[Any, ...]:
        """Transform each object of ``objs``."""
        return tuple(self.transform(o) for o in objs)

    def transform_mapping(self, objs: Mapping[str, Any]) -> dict[str, Any]:
        """Transform each value of ``objs``."""
        return {k: self.transform(v) for k, v in objs.items()}

    def resolve_iterable(self, objs: Iterable[Any]) -> tuple[Any, ...]:
        """Resolve each object of ``objs``."""
        return tuple(self.resolve(o) for o in objs)

    def resolve_mapping(self, objs: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve each value of ``objs``."""
        return {k: self.resolve(v) for k, v in objs.items()}

    def timed_transform(self, obj: Any) -> tuple[Any, float]:
        """Return ``(transform(obj), seconds taken)``."""
        start = time.perf_counter()
        out = self.transform(obj)
        return out, time.perf_counter() - start

    def close(self) -> None:
        """Close the transformer."""
        self.transformer.close()
