"""The relay: signalling, NAT discovery and the relayed path for endpoints.

Endpoints (:mod:`tether.endpoint`) at different sites register with a publicly reachable
relay using their user's token; the relay lets two endpoints of the same user exchange
what they need to open a peer channel (certificates, a session secret, candidate
addresses), answers NAT discovery probes, and splices a relayed channel when both sides
are behind NATs that defeat hole punching. Run one with ``tether relay --config
relay.toml``.
"""

from __future__ import annotations

from tether._serve.tls import fingerprint, make_self_signed
from tether.relay._config import RelayConfig, RelayUser, hash_token
from tether.relay._server import RelayServer

__all__ = [
    'RelayConfig',
    'RelayServer',
    'RelayUser',
    'fingerprint',
    'hash_token',
    'make_self_signed',
]
