"""Scraping servers' Prometheus endpoints, and the history the charts draw."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tether.dashboard._config import MetricsTarget

__all__ = ['Sample', 'Scrape', 'Scraper', 'mean_latency', 'parse_metrics', 'rate', 'summary']

# The largest metrics page read (a server's is a few kilobytes).
MAX_METRICS_BYTES = 4 * 2**20

Sample = tuple[str, dict[str, str], float]
"""``(name, labels, value)`` of one sample."""


def parse_metrics(text: str) -> list[Sample]:
    """The samples of a page in Prometheus' text format (``prometheus_client``'s parser).

    Raises:
        ValueError: the text is not in that format.
    """
    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


@dataclasses.dataclass
class Scrape:
    """One scrape of one server."""

    at: float
    seconds: float
    samples: list[Sample]
    error: str = ''

    def total(self, name: str, **labels: str) -> float | None:
        """The sum of ``name``'s samples whose labels include ``labels`` (``None``: none)."""
        found = [
            v
            for n, ls, v in self.samples
            if n == name and all(ls.get(k) == w for k, w in labels.items())
        ]
        return sum(found) if found else None

    def by(self, name: str, label: str) -> dict[str, float]:
        """``name``'s samples summed by the value of ``label``."""
        out: dict[str, float] = {}
        for n, ls, v in self.samples:
            if n == name and label in ls:
                out[ls[label]] = out.get(ls[label], 0.0) + v
        return out

    def info(self) -> dict[str, str]:
        """The labels of ``tether_server_info`` (``kind``, ``name``)."""
        for n, ls, _ in self.samples:
            if n == 'tether_server_info':
                return ls
        return {}


class Scraper:
    """Scrapes every target each ``interval`` seconds and keeps the last ``history``
    scrapes of each."""

    def __init__(self, targets: list[MetricsTarget], interval: float, history: int) -> None:
        self.targets = targets
        self.interval = interval
        self.history: dict[str, collections.deque[Scrape]] = {
            t.name: collections.deque(maxlen=history) for t in targets
        }
        self._client: httpx.AsyncClient | None = None

    def latest(self, name: str) -> Scrape | None:
        scrapes = self.history.get(name)
        return scrapes[-1] if scrapes else None

    async def scrape(self, target: MetricsTarget) -> Scrape:
        """Scrape ``target`` once (an unreachable or malformed endpoint gives a
        :class:`Scrape` with its ``error``)."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=5.0)
        start = time.perf_counter()
        now = time.time()
        headers = {}
        try:
            token = target.token()
            if token:
                headers['Authorization'] = f'Bearer {token}'
            async with self._client.stream('GET', target.url, headers=headers) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_METRICS_BYTES:
                        raise ValueError(f'metrics page over {MAX_METRICS_BYTES} bytes')
                if response.status_code != 200:
                    raise ValueError(f'HTTP {response.status_code}')
            samples = parse_metrics(body.decode('utf-8', 'replace'))
        except Exception as e:
            return Scrape(now, time.perf_counter() - start, [], f'{type(e).__name__}: {e}')
        return Scrape(now, time.perf_counter() - start, samples)

    async def scrape_all(self) -> None:
        scrapes = await asyncio.gather(*(self.scrape(t) for t in self.targets))
        for target, scrape in zip(self.targets, scrapes, strict=True):
            self.history[target.name].append(scrape)

    async def run(self) -> None:
        """Scrape forever (cancel the task to stop)."""
        while True:
            await self.scrape_all()
            await asyncio.sleep(self.interval)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def rate(scrapes: list[Scrape], name: str, **labels: str) -> tuple[list[float], list[float]]:
    """Per-second rate of a counter between consecutive scrapes: ``(times, rates)``."""
    xs: list[float] = []
    ys: list[float] = []
    previous: tuple[float, float] | None = None
    for s in scrapes:
        value = s.total(name, **labels)
        if value is None:
            previous = None
            continue
        if previous is not None and s.at > previous[0] and value >= previous[1]:
            xs.append(s.at)
            ys.append((value - previous[1]) / (s.at - previous[0]))
        previous = (s.at, value)
    return xs, ys


def mean_latency(
    scrape: Scrape, name: str = 'tether_request_seconds', label: str = 'op'
) -> dict[str, float]:
    """Mean seconds by ``label`` of a histogram (its ``_sum`` over its ``_count``)."""
    sums = scrape.by(f'{name}_sum', label)
    counts = scrape.by(f'{name}_count', label)
    return {k: sums[k] / counts[k] for k in sums if counts.get(k)}


def summary(scrape: Scrape) -> dict[str, Any]:
    """What the overview shows of a server."""
    return {
        'kind': scrape.info().get('kind', ''),
        'requests': scrape.total('tether_requests_total'),
        'errors': scrape.total('tether_request_errors_total'),
        'bytes': scrape.total('tether_request_bytes_total'),
    }
