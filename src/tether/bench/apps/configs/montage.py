"""TaPS's name for the montage application's config (see :mod:`tether.bench.apps.montage`)."""

from __future__ import annotations

from tether.bench.apps.montage import MontageAppConfig

__all__ = ['MontageConfig']

MontageConfig = MontageAppConfig
