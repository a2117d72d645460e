"""Filters: which task arguments and results a data transformer transforms.

A filter is any ``Callable[[object], bool]``; ``True`` means transform. Built in:
:class:`AllFilter`, :class:`NeverFilter`, :class:`ObjectSizeFilter` (``sys.getsizeof``),
:class:`PickleSizeFilter` (the length of the pickled object) and
:class:`ObjectTypeFilter` (by the qualified name of the type or any of its bases, so a
config names types without importing anything). Each has a registered config.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any, Protocol

import pydantic

from tether.bench.registry import register

__all__ = [
    'AllFilter',
    'AllFilterConfig',
    'Filter',
    'FilterConfig',
    'NeverFilter',
    'NeverFilterConfig',
    'ObjectSizeFilter',
    'ObjectSizeFilterConfig',
    'ObjectTypeFilter',
    'ObjectTypeFilterConfig',
    'PickleSizeFilter',
    'PickleSizeFilterConfig',
]


class Filter(Protocol):
    """Decides whether to transform an object."""

    def __call__(self, obj: Any) -> bool:
        """Return ``True`` to transform ``obj``."""
        ...


class AllFilter:
    """Transform every object."""

    def __call__(self, obj: Any) -> bool:
        return True


class NeverFilter:
    """Transform nothing."""

    def __call__(self, obj: Any) -> bool:
        return False


class _SizeFilter:
    def __init__(self, min_size: int = 0, max_size: float = float('inf')) -> None:
        if min_size < 0 or max_size < min_size:
            raise ValueError(f'need 0 <= min_size <= max_size, got {min_size}, {max_size}')
        self.min_size = min_size
        self.max_size = max_size

    def _in_range(self, size: int) -> bool:
        return self.min_size <= size <= self.max_size


class ObjectSizeFilter(_SizeFilter):
    """Transform objects whose ``sys.getsizeof`` is within ``[min_size, max_size]`` bytes."""

    def __call__(self, obj: Any) -> bool:
        return self._in_range(sys.getsizeof(obj))


class PickleSizeFilter(_SizeFilter):
    """Transform objects whose pickle is within ``[min_size, max_size]`` bytes.

    Pickles the object to measure it (so it costs one extra pickle per argument).
    """

    def __call__(self, obj: Any) -> bool:
        try:
            size = len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:
            return False
        return self._in_range(size)


class ObjectTypeFilter:
    """Transform objects of the named types (or subclasses).

    Args:
        types: Qualified type names, ``'numpy.ndarray'``, ``'builtins.bytes'``; a name
            without a dot matches a type of that name in any module.
    """

    def __init__(self, *types: str) -> None:
        self.types = frozenset(types)

    def __call__(self, obj: Any) -> bool:
        for cls in type(obj).__mro__:
            if cls.__qualname__ in self.types or f'{cls.__module__}.{cls.__qualname__}' in (
                self.types
            ):
                return True
        return False


class FilterConfig(pydantic.BaseModel):
    """Base of filter configs (``[engine.filter]`` in a run config)."""

    model_config = pydantic.ConfigDict(extra='forbid')

    name: str

    def get_filter(self) -> Filter:
        """Build the filter."""
        raise NotImplementedError


@register('filter')
class AllFilterConfig(FilterConfig):
    """Transform every argument and result."""

    name: str = 'all'

    def get_filter(self) -> Filter:
        """Build an :class:`AllFilter`."""
        return AllFilter()


@register('filter')
class NeverFilterConfig(FilterConfig):
    """Transform nothing (the transformer is configured but idle: its baseline)."""

    name: str = 'never'

    def get_filter(self) -> Filter:
        """Build a :class:`NeverFilter`."""
        return NeverFilter()


class _SizeConfig(FilterConfig):
    min_size: int = pydantic.Field(
        default=0, ge=0, description='smallest size transformed (bytes)'
    )
    max_size: float = pydantic.Field(
        default=float('inf'),
        ge=0,
        description='largest size transformed (bytes)',
    )


@register('filter')
class ObjectSizeFilterConfig(_SizeConfig):
    """Transform objects by ``sys.getsizeof``."""

    name: str = 'object-size'

    def get_filter(self) -> Filter:
        """Build an :class:`ObjectSizeFilter`."""
        return ObjectSizeFilter(self.min_size, self.max_size)


@register('filter')
class PickleSizeFilterConfig(_SizeConfig):
    """Transform objects by the size of their pickle."""

    name: str = 'pickle-size'

    def get_filter(self) -> Filter:
        """Build a :class:`PickleSizeFilter`."""
        return PickleSizeFilter(self.min_size, self.max_size)


@register('filter')
class ObjectTypeFilterConfig(FilterConfig):
    """Transform objects of the named types."""

    name: str = 'object-type'
    types: list[str] = pydantic.Field(
        default_factory=list,
        description="qualified type names, e.g. 'numpy.ndarray' (JSON list on the CLI)",
    )

    def get_filter(self) -> Filter:
        """Build an :class:`ObjectTypeFilter`."""
        return ObjectTypeFilter(*self.types)
