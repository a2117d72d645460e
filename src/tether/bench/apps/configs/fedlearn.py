"""TaPS's name for the fedlearn application's config (see :mod:`tether.bench.apps.fedlearn`)."""

from __future__ import annotations

from tether.bench.apps.fedlearn import FedLearnAppConfig

__all__ = ['FedlearnConfig']

FedlearnConfig = FedLearnAppConfig
