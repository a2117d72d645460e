"""Scraping a metrics endpoint and reading samples, for the metrics tests."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(address: tuple[str, int] | list[object], token: str | None = None) -> str:
    """GET /metrics (raises ``urllib.error.HTTPError`` on a refusal)."""
    host, port = address
    request = urllib.request.Request(f'http://{host}:{port}/metrics')
    if token is not None:
        request.add_header('Authorization', f'Bearer {token}')
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.read().decode())


def status_of(address: tuple[str, int] | list[object], token: str | None = None) -> int:
    """The HTTP status of a scrape."""
    try:
        scrape(address, token)
    except urllib.error.HTTPError as e:
        return e.code
    return 200


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def value(text: str, metric: str, /, **labels: str) -> float:
    """One sample's value (0.0 if absent)."""
    return samples(text).get((metric, tuple(sorted(labels.items()))), 0.0)
