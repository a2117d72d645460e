"""The compact pickled form of a store config, shared by every store factory.

A store proxy pickles its factory, and the factory its store's config: as a tuple of the
config's field values (trailing defaults left out), rebuilt once per process per
distinct config.
"""

from __future__ import annotations

from typing import Any

from tether.store.config import StoreConfig

__all__ = ['config_from_state', 'config_state']

_FIELDS = tuple(StoreConfig.model_fields)
_config_cache: dict[str, StoreConfig] = {}

# Computed once: asking pydantic for each default cost ~30 us per pickled proxy.
_DEFAULTS = tuple(
    StoreConfig.model_fields[f].get_default(call_default_factory=True) for f in _FIELDS
)


def config_state(config: StoreConfig) -> tuple[Any, ...]:
    """Return the tuple a factory pickles for ``config``."""
    values = [getattr(config, f) for f in _FIELDS]
    # Trailing fields equal to their defaults are not sent.
    while len(values) > 2 and values[-1] == _DEFAULTS[len(values) - 1]:
        values.pop()
    return tuple(values)


def config_from_state(state: tuple[Any, ...]) -> StoreConfig:
    """Return the config :func:`config_state` made ``state`` from (cached per process)."""
    marker = repr(state)
    cached = _config_cache.get(marker)
    if cached is None:
        cached = StoreConfig(**dict(zip(_FIELDS, state, strict=False)))
        if len(_config_cache) < 1024:
            _config_cache[marker] = cached
    return cached
