"""Certificates and TLS contexts for the relay and for endpoint-to-endpoint channels.

Endpoints identify themselves by a self-signed certificate made when they are configured;
peers pin each other's certificate (received over the authenticated relay channel, the
way WebRTC exchanges DTLS fingerprints), so no certificate authority is involved.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
from pathlib import Path

__all__ = [
    'client_context',
    'fingerprint',
    'make_self_signed',
    'pinned_client_context',
    'server_context',
    'write_private',
]


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path``, readable by this user only (mode 0600)."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'wb') as f:
        f.write(raw)


def make_self_signed(name: str, hosts: list[str] | None = None) -> tuple[str, str]:
    """Return ``(certificate PEM, private key PEM)`` of a new self-signed certificate.

    Args:
        name: Common name, also a DNS subject alternative name.
        hosts: More subject alternative names (IP addresses or DNS names).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    sans: list[x509.GeneralName] = [x509.DNSName(name)]
    for host in hosts or []:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return cert_pem, key_pem


def fingerprint(cert_pem: str) -> str:
    """SHA-256 fingerprint of a PEM certificate (hex of its DER form)."""
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert_pem)).hexdigest()


def server_context(cert_file: str | Path, key_file: str | Path | None = None) -> ssl.SSLContext:
    """A TLS server context presenting ``cert_file`` (its key in ``key_file``, else in
    ``cert_file``); TLS 1.2 at least.

    Raises:
        OSError, ssl.SSLError: the certificate or key cannot be loaded.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
    return ctx


def client_context(ca_file: str | Path | None = None, *, verify: bool = True) -> ssl.SSLContext:
    """A TLS client context trusting ``ca_file`` (``None``: the system's authorities);
    TLS 1.2 at least.

    ``verify=False`` checks neither the certificate nor the host name: only for
    connections that prove the server otherwise (a local control connection
    authenticated by a shared secret), or where the user asked for it.

    Raises:
        OSError, ssl.SSLError: ``ca_file`` cannot be loaded.
    """
    ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def pinned_client_context(peer_cert_pem: str) -> ssl.SSLContext:
    """A TLS client context that accepts exactly one (self-signed) peer certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=peer_cert_pem)
    return ctx
