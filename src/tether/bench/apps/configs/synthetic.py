"""TaPS's name for the synthetic application's config (see :mod:`tether.bench.apps.synthetic`)."""

from __future__ import annotations

from tether.bench.apps.synthetic import SyntheticAppConfig, WorkflowStructure

__all__ = ['SyntheticConfig', 'WorkflowStructure']

SyntheticConfig = SyntheticAppConfig
