"""The conformance suite of ``tether.testing.connectors``, over every tether connector."""

from __future__ import annotations

from tether.testing.connectors import ConnectorConformance, DeferrableConformance


class TestConformance(ConnectorConformance, DeferrableConformance):
    """Runs over the ``connector`` fixture of conftest.py: one run per connector."""
