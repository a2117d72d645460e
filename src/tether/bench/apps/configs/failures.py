"""TaPS's name for the failures application's config (see :mod:`tether.bench.apps.failures`)."""

from __future__ import annotations

from tether.bench.apps.failures import FailuresAppConfig

__all__ = ['FailureInjectionConfig']

FailureInjectionConfig = FailuresAppConfig
