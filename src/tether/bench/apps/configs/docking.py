"""TaPS's name for the docking application's config (see :mod:`tether.bench.apps.docking`)."""

from __future__ import annotations

from tether.bench.apps.docking import DockingAppConfig

__all__ = ['DockingConfig']

DockingConfig = DockingAppConfig
