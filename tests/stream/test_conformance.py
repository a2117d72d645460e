"""The conformance suite of ``tether.testing.stream``, over every broker shim of tether.

Each shim runs against its real broker; the harnesses are in ``_brokers.py``.
"""

from __future__ import annotations

import pytest

from tests.stream._brokers import RESTARTABLE, Broker
from tether.testing.stream import ShimConformance, ShimRestartConformance


class TestConformance(ShimConformance):
    """Every kind of ``_brokers.KINDS``."""

    @pytest.fixture
    def shim(self, broker: Broker) -> Broker:
        return broker


@pytest.mark.parametrize('broker', RESTARTABLE, indirect=True)
class TestRestart(ShimRestartConformance):
    """The kinds whose messages survive a killed consumer (``_brokers.RESTARTABLE``)."""

    @pytest.fixture
    def shim(self, broker: Broker) -> Broker:
        return broker
