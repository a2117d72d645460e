"""TaPS's name for the physics application's config (see :mod:`tether.bench.apps.physics`)."""

from __future__ import annotations

from tether.bench.apps.physics import PhysicsAppConfig

__all__ = ['PhysicsConfig']

PhysicsConfig = PhysicsAppConfig
