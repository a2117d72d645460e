"""What the pages share: the configuration, the scraper and the service reader."""

from __future__ import annotations

import dataclasses

from tether.dashboard._config import DashboardConfig
from tether.dashboard._faas import FaasReader
from tether.dashboard._metrics import Scraper

__all__ = ['State']


@dataclasses.dataclass
class State:
    """One dashboard's sources."""

    config: DashboardConfig
    scraper: Scraper
    faas: FaasReader | None

    @classmethod
    def of(cls, config: DashboardConfig) -> State:
        faas = FaasReader(config.faas_url, config.user_token()) if config.faas_url else None
        return cls(config, Scraper(config.metrics, config.refresh_s, config.history), faas)
