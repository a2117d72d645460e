"""The latency buckets of every tether histogram, in seconds: from a loopback round trip to
a slow multi-GB transfer. A module of its own so that an agent process, which adds to its
shared statistics block, takes them without importing the metrics client."""

from __future__ import annotations

__all__ = ['LATENCY_BUCKETS']

LATENCY_BUCKETS = (
    0.0001,
    0.0005,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    30.0,
    float('inf'),
)
