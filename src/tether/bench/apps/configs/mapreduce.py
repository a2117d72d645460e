"""TaPS's name for the mapreduce application's config (see :mod:`tether.bench.apps.mapreduce`)."""

from __future__ import annotations

from tether.bench.apps.mapreduce import MapReduceAppConfig

__all__ = ['MapreduceConfig']

MapreduceConfig = MapReduceAppConfig
