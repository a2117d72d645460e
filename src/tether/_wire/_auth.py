"""HMAC-SHA256 challenge-response over a shared secret (the secret never crosses the wire).

Both sides send a fresh 32-byte nonce. The server proves it knows the secret first
(``HMAC(secret, 'tether-server' | client_nonce | server_nonce)``) and the client answers
(``HMAC(secret, 'tether-client' | server_nonce | client_nonce)``), so each side
authenticates the other and a recorded exchange cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import os

__all__ = ['as_secret', 'client_proof', 'new_nonce', 'server_proof', 'verify']

NONCE_BYTES = 32


def as_secret(secret: str | bytes | None) -> bytes | None:
    """Normalise a secret given as text or bytes (``None`` means no authentication)."""
    if secret is None:
        return None
    return secret.encode() if isinstance(secret, str) else bytes(secret)


def new_nonce() -> bytes:
    """Return a fresh random nonce."""
    return os.urandom(NONCE_BYTES)


def server_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes) -> str:
    """The server's answer to the client's nonce (hex)."""
    return hmac.new(
        secret, b'tether-server' + client_nonce + server_nonce, hashlib.sha256
    ).hexdigest()


def client_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes) -> str:
    """The client's answer to the server's nonce (hex)."""
    return hmac.new(
        secret, b'tether-client' + server_nonce + client_nonce, hashlib.sha256
    ).hexdigest()


def verify(expected: str, got: object) -> bool:
    """Compare two proofs in constant time."""
    return isinstance(got, str) and hmac.compare_digest(expected.encode(), got.encode())
