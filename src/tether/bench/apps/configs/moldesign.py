"""TaPS's name for the moldesign application's config (see :mod:`tether.bench.apps.moldesign`)."""

from __future__ import annotations

from tether.bench.apps.moldesign import MolDesignAppConfig

__all__ = ['MoldesignConfig']

MoldesignConfig = MolDesignAppConfig
