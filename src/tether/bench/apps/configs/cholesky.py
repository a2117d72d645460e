"""TaPS's name for the cholesky application's config (see :mod:`tether.bench.apps.cholesky`)."""

from __future__ import annotations

from tether.bench.apps.cholesky import CholeskyAppConfig

__all__ = ['CholeskyConfig']

CholeskyConfig = CholeskyAppConfig
