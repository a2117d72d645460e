"""Endpoints: object stores at each site, peered across firewalls and NATs.

An endpoint (:class:`Endpoint`, configured by a :class:`SiteConfig`) runs at every
data site a user works on. Clients of the site
talk only to it (:class:`tether.connectors.endpoint.EndpointConnector`); a request for an
object owned by an endpoint at another site is forwarded over a peer channel between
the two endpoints, opened with the help of the user's relay (:mod:`tether.relay`): a
direct TLS connection when one side is reachable, UDP hole punching with QUIC through
cone NATs, or a channel relayed (end-to-end encrypted) through the relay when both
sides sit behind symmetric NATs.

``tether endpoint configure|start|stop|list|remove|check-nat|test`` manages endpoints;
configurations live under ``$TETHER_HOME/endpoints``.
"""

from __future__ import annotations

from tether._serve.site import (
    PeeringSettings,
    RelaySettings,
    SiteConfig,
    StorageSettings,
    find_config,
    list_configs,
    tether_home,
)
from tether.endpoint._daemon import endpoint_status, start_endpoint, stop_endpoint
from tether.endpoint._server import Endpoint

EndpointConfig = SiteConfig
"""The old name of :class:`SiteConfig` (the same class), kept for existing code."""

__all__ = [
    'Endpoint',
    'EndpointConfig',
    'PeeringSettings',
    'RelaySettings',
    'SiteConfig',
    'StorageSettings',
    'endpoint_status',
    'find_config',
    'list_configs',
    'start_endpoint',
    'stop_endpoint',
    'tether_home',
]
